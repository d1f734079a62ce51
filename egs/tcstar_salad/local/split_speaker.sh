#!/usr/bin/env bash
# Split one speaker's data dir into train / dev / test in the SALAD paper's proportions
# (100 / 15 / 15, i.e. 11.5 % dev and 11.5 % test of the utterances), reproducibly from --seed.
#
# Usage: local/split_speaker.sh [--seed S] <speaker-data-dir> <out-dir>
#   writes <out-dir>/{train,dev,test}; phone_alignments and spk2gender are subset along.
set -euo pipefail

seed=1
help_message="Usage: $0 [--seed S] <speaker-data-dir> <out-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
src=$1
out=$2
nspk=$(wc -l < "$src/spk2utt")
[ "$nspk" -eq 1 ] || { echo "$0: $src holds $nspk speakers; the acoustic models are per speaker" >&2; exit 1; }
speechkit-split-corpus "$src" "$out" --dev 0.1154 --test 0.1154 --seed "$seed"
for x in train dev test; do
  utils/validate_data_dir.sh --no-feats "$out/$x"
done
