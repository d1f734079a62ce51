#!/usr/bin/env bash
# The embedded default of egs/zerospeech2019: speechkit's espeak-ng corpus ("mini"), English only,
# laid out as the ZeroSpeech 2019 sets.
#
#   speakers sp01 .. sp<N-3>  unit set: $data/train (VQ-VAE training) and $data/dev (every 10th utterance,
#                             at least one; validation)
#   speaker  sp<N-2>          voice set: $data/voice (target voice of the inverter; also VQ-VAE training
#                             data, as train/voice is in ZeroSpeech 2019)
#   speakers sp<N-1>, sp<N>   test set: $data/test, with phone_alignments (espeak's phoneme events)
#                             for the ABX task; unseen in training, as the 2019 test speakers
#
# Usage: local/prepare_mini.sh [--nj N] [--speakers N] [--sentences N] <corpus-dir> <data-dir>
#   <corpus-dir> is synthesized first unless it already holds the same corpus (a few seconds).
set -euo pipefail

nj=2
speakers=8
sentences=40
help_message="Usage: $0 [--nj N] [--speakers N (4..8)] [--sentences N] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ "$speakers" -ge 4 ] && [ "$speakers" -le 8 ] || { echo "$0: --speakers must be in 4..8, got $speakers" >&2; exit 1; }

all=$data/mini_all
speechkit-prepare-corpus mini "$db" "$all" --languages en --seed 1 \
  --num-speakers "$speakers" --sentences-per-language "$sentences" --nj "$nj"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cut -d' ' -f1 "$all/spk2utt" > "$tmp/spk"
n_unit=$((speakers - 3))
head -n "$n_unit" "$tmp/spk" > "$tmp/unit.spk"
sed -n "$((n_unit + 1))p" "$tmp/spk" > "$tmp/voice.spk"
tail -n 2 "$tmp/spk" > "$tmp/test.spk"

utils/subset_data_dir.sh --spk-list "$tmp/unit.spk" "$all" "$tmp/unit"
n=$(wc -l < "$tmp/unit/utt2spk")
awk -v n="$n" 'NR % 10 == 0 || (n < 10 && NR == n) {print $1}' "$tmp/unit/utt2spk" > "$tmp/dev.utt"
utils/filter_scp.pl --exclude "$tmp/dev.utt" "$tmp/unit/utt2spk" > "$tmp/unit_train.utt"
utils/subset_data_dir.sh --utt-list "$tmp/dev.utt" "$all" "$data/dev"
utils/subset_data_dir.sh --spk-list "$tmp/voice.spk" "$all" "$data/voice"
utils/subset_data_dir.sh --utt-list "$tmp/unit_train.utt" "$all" "$tmp/unit_train"
utils/combine_data.sh "$data/train" "$tmp/unit_train" "$data/voice"
utils/subset_data_dir.sh --spk-list "$tmp/test.spk" "$all" "$data/test"
utils/filter_scp.pl "$data/test/utt2spk" "$all/phone_alignments" > "$data/test/phone_alignments"

for x in train dev voice test; do
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $(wc -l < "$data/$x/spk2utt") speakers"
done
