#!/usr/bin/env bash
# Split one speaker's data dir into train / dev / test in the proportions of the SALAD paper's
# "approximately 100 minutes for training, 15 minutes for validation, and 15 minutes for test"
# (sec. 3.1), here as shares of the utterances (11.5 % dev, 11.5 % test), reproducibly from --seed.
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
