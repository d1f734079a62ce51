#!/usr/bin/env bash
# Real speech for egs/vctk_continual (VCTK is not on this machine): the Malayalam Speech Corpus.
#   - continual split: the crowd speakers (vote >= 0) with --min_utts to --max_utts recordings
#     (20..150: 9 speakers, 21 to 145 recordings each), one per episode;
#   - pre-training split: every other crowd speaker (vote >= 0) plus the story reader (one studio
#     voice, 112 utterances, 22.05 kHz resampled to 16 kHz by a sox pipe) as the single-speaker set,
#     the place of LJSpeech in the paper (sec. 2.2, Table 1).
# Each speaker with enough recordings gives --num_test to test and --num_dev to dev; speakers with
# fewer go wholly to pre-training's train set.
#
# Usage: local/prepare_msc.sh [--min_utts 20] [--max_utts 150] [--seed S] [--num_test 5] [--num_dev 3]
#                             <msc_malayalam-dir> <data-dir>
set -euo pipefail

min_utts=20
max_utts=150
seed=1
num_test=5
num_dev=3
help_message="Usage: $0 [--min_utts N] [--max_utts N] [--seed S] [--num_test N] [--num_dev N] <msc_malayalam-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ -f "$db/speech.tsv" ] || { echo "$0: $db/speech.tsv: no such file (expected the msc_malayalam folder)" >&2; exit 1; }

src=$data/msc_src
rm -rf "$src" "$data/all"
speechkit-prepare-corpus msc_malayalam "$db" "$src/crowd" --subset crowd --min-vote 0 --sample-rate 16000
speechkit-prepare-corpus msc_malayalam "$db" "$src/story" --subset story --sample-rate 16000
utils/combine_data.sh "$data/all" "$src/crowd" "$src/story"

story=$(cut -d' ' -f1 "$src/story/spk2utt")
awk -v lo="$min_utts" -v hi="$max_utts" '{n = NF - 1; if (n >= lo && n <= hi) print $1}' "$src/crowd/spk2utt" \
  | sort > "$data/continual_speakers"
[ -s "$data/continual_speakers" ] || { echo "$0: no crowd speaker has $min_utts to $max_utts recordings" >&2; exit 1; }
cut -d' ' -f1 "$data/all/spk2utt" | grep -vxF -f "$data/continual_speakers" | sort > "$data/pretrain_speakers"
echo "$0: $(wc -l < "$data/continual_speakers") continual speakers, $(wc -l < "$data/pretrain_speakers") pre-training speakers (incl. the story reader $story)"
local/finish_split.sh --seed "$seed" --num_test "$num_test" --num_dev "$num_dev" "$data"
