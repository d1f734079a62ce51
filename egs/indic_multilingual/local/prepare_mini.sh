#!/usr/bin/env bash
# local/prepare_mini.sh: the embedded default corpus (speechkit's espeak-ng 'mini': en hi ta gu,
# synthesized locally, nothing downloaded), split by speaker into <data-root>/{train,dev,test}.
#
# Usage: local/prepare_mini.sh [--num-speakers N] [--sentences N] [--languages en,hi,ta,gu] [--seed S]
#                              <corpus-dir> <data-root>
# With N speakers: one speaker for dev, one for test, N-2 for training (N >= 3).
set -euo pipefail

num_speakers=6
sentences=20
languages=en,hi,ta,gu
seed=0
help_message="Usage: $0 [--num-speakers N] [--sentences N] [--languages L1,L2,...] [--seed S] <corpus-dir> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ "$num_speakers" -ge 3 ] || { echo "$0: --num-speakers must be >= 3 (train, dev and test speakers)" >&2; exit 1; }

speechkit-prepare-corpus mini "$db" "$data/local/all" --num-speakers "$num_speakers" \
  --sentences-per-language "$sentences" --languages "$languages" --log-file "$data/local/prepare.log"
# One speaker each for dev and test (a fraction of 1/N of the utterances picks exactly one).
f=$(awk -v n="$num_speakers" 'BEGIN{printf "%.6f", 1/n}')
speechkit-split-corpus "$data/local/all" "$data/local/split" --dev "$f" --test "$f" --by-speaker --seed "$seed"
for x in train dev test; do
  rm -rf "${data:?}/$x"
  cp -r "$data/local/split/$x" "$data/$x"
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
