#!/usr/bin/env bash
# The embedded default of egs/tcstar_salad: one espeak-ng voice (speaker sp01) of speechkit's 'mini'
# corpus, English, synthesized into <corpus-dir> (a few seconds), split 100/15/15.
#
# Usage: local/prepare_mini.sh [--nj N] [--sentences N] [--seed S] <corpus-dir> <data-dir>
#   writes <data-dir>/sp01/{train,dev,test} and <data-dir>/speakers.
set -euo pipefail

nj=2
sentences=150
seed=1
help_message="Usage: $0 [--nj N] [--sentences N] [--seed S] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2

speechkit-prepare-corpus mini "$db" "$data/mini_all" --languages en --seed 1 \
  --num-speakers 1 --sentences-per-language "$sentences" --nj "$nj"
spk=$(cut -d' ' -f1 "$data/mini_all/spk2utt")
local/split_speaker.sh --seed "$seed" "$data/mini_all" "$data/$spk"
echo "$spk" > "$data/speakers"
