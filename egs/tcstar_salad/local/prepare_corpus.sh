#!/usr/bin/env bash
# Any transcribed corpus of speechkit's registry (speechkit-prepare-corpus --help) for egs/tcstar_salad
# (./run.sh --corpus NAME --db_root DIR): the --num_speakers speakers with the most utterances (ties: C
# order of the ids), each split 100/15/15 into train/dev/test (local/split_speaker.sh, --seed): the
# acoustic models are per speaker. Audio is resampled to 16 kHz in wav.scp (sox pipes; speechkit-resample
# for MP3 and Opus). A corpus without utt2lang gets --lang (the G2P language). Prints each speaker's sets.
#
# Usage: local/prepare_corpus.sh --corpus NAME [--corpus_opts "--opt v ..."] [--num_speakers 1] [--seed S]
#                                [--lang en] <corpus-dir> <data-dir>
#   writes <data-dir>/<speaker>/{train,dev,test} and <data-dir>/speakers.
set -euo pipefail

corpus=
corpus_opts=
num_speakers=1
seed=1
lang=en
help_message="Usage: $0 --corpus NAME [--corpus_opts '...'] [--num_speakers N] [--seed S] [--lang L] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] && [ -n "$corpus" ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[[ "$num_speakers" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --num_speakers must be a whole number >= 1, got '$num_speakers'" >&2; exit 1; }

src=$data/${corpus}_src
# shellcheck disable=SC2086  # --corpus_opts holds several words
speechkit-prepare-corpus "$corpus" "$db" "$src/all" --sample-rate 16000 $corpus_opts
[ -s "$src/all/text" ] || { echo "$0: corpus $corpus wrote no transcripts ($src/all/text): the acoustic models need them" >&2; exit 1; }
if [ ! -f "$src/all/utt2lang" ]; then
  echo "$0: $corpus has no utt2lang: every utterance is --lang $lang"
  awk -v l="$lang" '{print $1, l}' "$src/all/utt2spk" > "$src/all/utt2lang.tmp"
  mv "$src/all/utt2lang.tmp" "$src/all/utt2lang"
fi
utils/validate_data_dir.sh --no-feats "$src/all"

# speakers by number of utterances (ties broken by id), the largest first
awk '{print $1, NF - 1}' "$src/all/spk2utt" | LC_ALL=C sort -k2,2nr -k1,1 | head -n "$num_speakers" | cut -d' ' -f1 \
  > "$src/speakers"
n=$(wc -l < "$src/speakers")
[ "$n" -eq "$num_speakers" ] || { echo "$0: --num_speakers $num_speakers: $corpus has $n speaker(s)" >&2; exit 1; }
: > "$data/speakers.tmp"
while read -r spk; do
  echo "$spk" > "$src/$spk.list"
  utils/subset_data_dir.sh --spk-list "$src/$spk.list" "$src/all" "$src/$spk"
  local/split_speaker.sh --seed "$seed" "$src/$spk" "$data/$spk"
  echo "$spk" >> "$data/speakers.tmp"
  echo "$0: speaker $spk: train/dev/test $(for x in train dev test; do wc -l < "$data/$spk/$x/utt2spk"; done | paste -sd/)" \
    "utterances"
done < "$src/speakers"
mv "$data/speakers.tmp" "$data/speakers"
