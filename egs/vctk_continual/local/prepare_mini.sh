#!/usr/bin/env bash
# The embedded default of egs/vctk_continual: speechkit's 'mini' corpus, English, its espeak-ng voice
# variants as speakers (synthesized into <corpus-dir> in seconds). The first voices are the
# pre-training split, the last --num_continual the continual split (one per episode).
#
# Usage: local/prepare_mini.sh [--nj N] [--num_speakers 8] [--num_continual 5] [--sentences 60]
#                              [--seed S] [--num_test 5] [--num_dev 3] <corpus-dir> <data-dir>
#   writes <data-dir>/{all,train,dev,test}, <data-dir>/{pretrain,continual}_speakers
set -euo pipefail

nj=2
num_speakers=8
num_continual=5
sentences=60
seed=1
num_test=5
num_dev=3
help_message="Usage: $0 [--nj N] [--num_speakers N] [--num_continual N] [--sentences N] [--seed S] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ "$num_continual" -ge 2 ] && [ "$num_continual" -lt "$num_speakers" ] || {
  echo "$0: --num_continual $num_continual must be in 2..$((num_speakers - 1)) (--num_speakers $num_speakers)" >&2; exit 1; }

rm -rf "$data/all"
speechkit-prepare-corpus mini "$db" "$data/all" --languages en --seed 1 \
  --num-speakers "$num_speakers" --sentences-per-language "$sentences" --nj "$nj"
cut -d' ' -f1 "$data/all/spk2utt" > "$data/speakers.all"
head -n $((num_speakers - num_continual)) "$data/speakers.all" > "$data/pretrain_speakers"
tail -n "$num_continual" "$data/speakers.all" > "$data/continual_speakers"
rm "$data/speakers.all"
local/finish_split.sh --seed "$seed" --num_test "$num_test" --num_dev "$num_dev" "$data"
