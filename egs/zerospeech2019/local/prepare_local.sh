#!/usr/bin/env bash
# Real speech for egs/zerospeech2019: the corpora of the shared data folder, as ZeroSpeech 2019 sets.
#
#   unit set  the untranscribed audio of every corpus but the test set's (transcripts are never used):
#               fsdd (2000 spoken digits, 8 kHz -> 16 kHz), msc_malayalam crowd (vote >= 0) and story
#               (22.05 kHz -> 16 kHz), hindi_noa (523 news sentences) -- about 3.1 h; ids prefixed
#               with the corpus name (<corpus>-<speaker>_...).
#             $data/train, and $data/dev (every 50th utterance, validation only)
#   voice     the msc_malayalam story reader (one female voice, 112 utterances, 10 min): $data/voice
#   test      timit_sample with its hand-labelled phones (61-phone set; h#, pau, epi get no ABX
#             item): $data/test. Its speakers are unseen: none of their audio is in the unit set
#             (with --test_in_unit_set true it is, as the ZeroSpeech 2017 rules allowed; the
#             earlier campaign of results/local/NOTES.md was measured that way).
# Audio at another rate than 16 kHz is resampled through sox pipes in wav.scp.
#
# Usage: local/prepare_local.sh [--test_in_unit_set false] <shared-data-dir> <data-dir>
set -euo pipefail

test_in_unit_set=false
help_message="Usage: $0 [--test_in_unit_set false] <shared-data-dir (timit_sample fsdd msc_malayalam hindi_noa)> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
for c in timit_sample fsdd msc_malayalam hindi_noa; do
  [ -d "$db/$c" ] || { echo "$0: $db/$c: no such corpus folder" >&2; exit 1; }
done

src=$data/local_src
sr=(--sample-rate 16000)
speechkit-prepare-corpus timit "$db/timit_sample" "$src/timit" "${sr[@]}"
speechkit-prepare-corpus fsdd "$db/fsdd" "$src/fsdd" "${sr[@]}"
speechkit-prepare-corpus msc_malayalam "$db/msc_malayalam" "$src/mlcrowd" --subset crowd --min-vote 0 "${sr[@]}"
speechkit-prepare-corpus msc_malayalam "$db/msc_malayalam" "$src/mlstory" --subset story "${sr[@]}"
speechkit-prepare-corpus hindi_noa "$db/hindi_noa" "$src/hindi" "${sr[@]}"

parts=()
unit_corpora="fsdd mlcrowd mlstory hindi"
[ "$test_in_unit_set" = true ] && unit_corpora="timit $unit_corpora"
for c in $unit_corpora; do
  utils/copy_data_dir.sh --utt-prefix "$c-" --spk-prefix "$c-" "$src/$c" "$src/${c}_prefixed"
  parts+=("$src/${c}_prefixed")
done
utils/combine_data.sh "$src/all" "${parts[@]}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk 'NR % 50 == 0 {print $1}' "$src/all/utt2spk" > "$tmp/dev.utt"
utils/filter_scp.pl --exclude "$tmp/dev.utt" "$src/all/utt2spk" > "$tmp/train.utt"
utils/subset_data_dir.sh --utt-list "$tmp/train.utt" "$src/all" "$data/train"
utils/subset_data_dir.sh --utt-list "$tmp/dev.utt" "$src/all" "$data/dev"
utils/copy_data_dir.sh "$src/mlstory" "$data/voice"
utils/copy_data_dir.sh "$src/timit" "$data/test"
cp "$src/timit/phone_alignments" "$data/test/phone_alignments"

for x in train dev voice test; do
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $(wc -l < "$data/$x/spk2utt") speakers," \
    "$(awk '{s += $2} END {printf "%.2f", s / 3600}' "$data/$x/utt2dur") h"
done
