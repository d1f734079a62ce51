#!/usr/bin/env bash
# Shared tail of the preparers: per-speaker train/dev/test split of <data>/all (local/split_speakers.py)
# into <data>/{train,dev,test}, checked; the speaker lists must already be in <data>.
#
# Usage: local/finish_split.sh [--seed S] [--num_test N] [--num_dev N] <data-dir>
set -euo pipefail

seed=1
num_test=5
num_dev=3
help_message="Usage: $0 [--seed S] [--num_test N] [--num_dev N] <data-dir>"
. utils/parse_options.sh
[ $# -eq 1 ] || { echo "$help_message" >&2; exit 1; }
data=$1
for f in all/utt2spk pretrain_speakers continual_speakers; do
  [ -s "$data/$f" ] || { echo "$0: $data/$f: missing or empty" >&2; exit 1; }
done
python local/split_speakers.py --num-test "$num_test" --num-dev "$num_dev" --seed "$seed" "$data/all" "$data/lists"
for x in train dev test; do
  rm -rf "$data/$x"
  utils/subset_data_dir.sh --utt-list "$data/lists/$x.list" "$data/all" "$data/$x"
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
# every continual speaker needs dev (early stopping) and test (the synthesized sentences) utterances
for spk in $(cat "$data/continual_speakers"); do
  for x in dev test; do
    grep -q " $spk\$" "$data/$x/utt2spk" || {
      echo "$0: continual speaker '$spk' has no $x utterance (too few recordings for --num_test $num_test --num_dev $num_dev)" >&2; exit 1; }
  done
done
