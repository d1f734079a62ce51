#!/usr/bin/env bash
# CSTR VCTK for egs/vctk_continual (the paper's corpus): either layout that speechkit-prepare-corpus
# vctk reads (0.92: wav48_silence_trimmed/<spk>/<utt>_mic1.flac; 0.80: wav48/<spk>/<utt>.wav;
# txt/<spk>/<utt>.txt), resampled to 16 kHz by sox pipes.
#   - continual split: --continual_speakers (comma-separated), else --num_continual speakers drawn
#     from --seed among those with at least num_test + num_dev + 2 recordings;
#   - pre-training split: the other speakers, plus, with --ljspeech_root, LJSpeech as the
#     single-speaker set (as the paper does).
#
# Usage: local/prepare_vctk.sh [--num_continual 10] [--continual_speakers p225,p226,...]
#          [--ljspeech_root DIR] [--seed S] [--num_test 5] [--num_dev 3] <vctk-root> <data-dir>
set -euo pipefail

num_continual=10
continual_speakers=
ljspeech_root=
seed=1
num_test=5
num_dev=3
help_message="Usage: $0 [--num_continual N] [--continual_speakers a,b] [--ljspeech_root DIR] [--seed S] <vctk-root> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2

src=$data/vctk_src
rm -rf "$src" "$data/all"
speechkit-prepare-corpus vctk "$db" "$src/vctk" --sample-rate 16000
parts="$src/vctk"
if [ -n "$ljspeech_root" ]; then
  speechkit-prepare-corpus ljspeech "$ljspeech_root" "$src/ljspeech" --sample-rate 16000
  parts="$parts $src/ljspeech"
fi
# shellcheck disable=SC2086
utils/combine_data.sh "$data/all" $parts

# speakers with enough recordings for train, dev and test can be continual speakers
awk -v m=$((num_test + num_dev + 2)) 'NF - 1 >= m {print $1}' "$src/vctk/spk2utt" > "$src/vctk_speakers"
if [ -n "$continual_speakers" ]; then
  echo "$continual_speakers" | tr ',' '\n' | sed '/^$/d' | sort > "$data/continual_speakers"
  while read -r spk; do
    grep -qxF -- "$spk" "$src/vctk_speakers" || {
      echo "$0: --continual_speakers: '$spk' is not a speaker of $db with at least $((num_test + num_dev + 2)) recordings" >&2; exit 1; }
  done < "$data/continual_speakers"
else
  n=$(wc -l < "$src/vctk_speakers")
  [ "$num_continual" -ge 2 ] && [ "$num_continual" -lt "$n" ] || {
    echo "$0: --num_continual $num_continual must be in 2..$((n - 1)) ($n speakers in $db with enough recordings)" >&2; exit 1; }
  python -c "import random, sys; s = sys.stdin.read().split(); random.Random($seed).shuffle(s); print('\n'.join(sorted(s[:$num_continual])))" \
    < "$src/vctk_speakers" > "$data/continual_speakers"
fi
cut -d' ' -f1 "$data/all/spk2utt" | grep -vxF -f "$data/continual_speakers" | sort > "$data/pretrain_speakers"
local/finish_split.sh --seed "$seed" --num_test "$num_test" --num_dev "$num_dev" "$data"
