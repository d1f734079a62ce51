#!/usr/bin/env bash
# Real speech for egs/tcstar_salad (TC-STAR is not public): from the Malayalam Speech Corpus,
#   - the --num_crowd crowd speakers with the most recordings of vote >= 0 (2 by default: about 22 and
#     21 min, browser recordings re-encoded to Ogg Vorbis, 16 kHz), as the paper's speakers M1 and F1,
#     scaled down (the gender of crowd speakers is not recorded);
#   - the story reader (one studio voice, 112 utterances, 10 min, 22.05 kHz resampled to 16 kHz by a
#     sox pipe).
# Each speaker is split 100/15/15 into train/dev/test (local/split_speaker.sh, --seed).
#
# Usage: local/prepare_msc.sh [--num_crowd N] [--seed S] <msc_malayalam-dir> <data-dir>
#   writes <data-dir>/<speaker>/{train,dev,test} and <data-dir>/speakers (one speaker id a line).
set -euo pipefail

num_crowd=2
seed=1
help_message="Usage: $0 [--num_crowd N] [--seed S] <msc_malayalam-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ -f "$db/speech.tsv" ] || { echo "$0: $db/speech.tsv: no such file (expected the msc_malayalam folder)" >&2; exit 1; }

src=$data/msc_src
speechkit-prepare-corpus msc_malayalam "$db" "$src/crowd" --subset crowd --min-vote 0 --sample-rate 16000
speechkit-prepare-corpus msc_malayalam "$db" "$src/story" --subset story --sample-rate 16000

# speakers by number of recordings (ties broken by id), the largest first
awk '{print $1, NF - 1}' "$src/crowd/spk2utt" | sort -k2,2nr -k1,1 | head -n "$num_crowd" | cut -d' ' -f1 \
  > "$src/crowd_speakers"
: > "$data/speakers.tmp"
while read -r spk; do
  echo "$spk" > "$src/$spk.list"
  utils/subset_data_dir.sh --spk-list "$src/$spk.list" "$src/crowd" "$src/$spk"
  local/split_speaker.sh --seed "$seed" "$src/$spk" "$data/$spk"
  echo "$spk" >> "$data/speakers.tmp"
done < "$src/crowd_speakers"
spk=$(cut -d' ' -f1 "$src/story/spk2utt")
local/split_speaker.sh --seed "$seed" "$src/story" "$data/$spk"
echo "$spk" >> "$data/speakers.tmp"
mv "$data/speakers.tmp" "$data/speakers"
