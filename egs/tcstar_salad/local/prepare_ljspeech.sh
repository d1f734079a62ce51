#!/usr/bin/env bash
# An LJSpeech-style corpus (metadata.csv 'id|text|normalized text', wavs/<id>.wav; one speaker) for
# egs/tcstar_salad, resampled to 16 kHz by sox pipes and split 100/15/15 (local/split_speaker.sh).
#
# Usage: local/prepare_ljspeech.sh [--seed S] [--lang en] <ljspeech-root> <data-dir>
#   writes <data-dir>/lj/{train,dev,test} and <data-dir>/speakers. --lang sets utt2lang (the G2P
#   language) for corpora in this layout that are not English.
set -euo pipefail

seed=1
lang=en
help_message="Usage: $0 [--seed S] [--lang L] <ljspeech-root> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2

src=$data/ljspeech_src
speechkit-prepare-corpus ljspeech "$db" "$src/all" --sample-rate 16000
if [ "$lang" != en ]; then
  awk -v l="$lang" '{print $1, l}' "$src/all/utt2lang" > "$src/all/utt2lang.tmp"
  mv "$src/all/utt2lang.tmp" "$src/all/utt2lang"
fi
utils/validate_data_dir.sh --no-feats "$src/all"
spk=$(cut -d' ' -f1 "$src/all/spk2utt")
local/split_speaker.sh --seed "$seed" "$src/all" "$data/$spk"
echo "$spk" > "$data/speakers"
