#!/usr/bin/env bash
# local/prepare_corpus.sh: any transcribed corpus of speechkit's registry (speechkit-prepare-corpus --help)
# as the data of this recipe (./run.sh --corpus NAME --db_root DIR): Kaldi data dirs
# <data-root>/{train,dev,test} with utt2lang.
#
# Usage: local/prepare_corpus.sh --corpus NAME [--corpus_opts "--opt v ..."] [--dev 0.1] [--test 0.1] [--seed 0]
#                                <corpus-dir> <data-root>
#
# The corpus is prepared once (<data-root>/local/all, audio resampled to 16 kHz in wav.scp: sox pipes,
# speechkit-resample for MP3 and Opus), then each language of its utt2lang is split by speaker
# (speechkit-split-corpus --by-speaker: about --dev and --test of its utterances, whole speakers, so dev
# and test speakers are never heard in training; a language needs 3 speakers or more) and the
# languages' parts are combined. Prints each part's size, languages and speakers.
set -euo pipefail

corpus=
corpus_opts=
dev=0.1
test=0.1
seed=0
help_message="Usage: $0 --corpus NAME [--corpus_opts '...'] [--dev F] [--test F] [--seed S] <corpus-dir> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] && [ -n "$corpus" ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
loc=$data/local
mkdir -p "$loc"

# shellcheck disable=SC2086  # --corpus_opts holds several words
speechkit-prepare-corpus "$corpus" "$db" "$loc/all" --sample-rate 16000 $corpus_opts --log-file "$loc/prepare.log"
for f in text utt2lang; do
  [ -s "$loc/all/$f" ] || {
    echo "$0: corpus $corpus wrote no $f: the recognizer needs transcripts and their language" >&2; exit 1; }
done
utils/validate_data_dir.sh --no-feats "$loc/all"

splits=()
for l in $(cut -d' ' -f2 "$loc/all/utt2lang" | LC_ALL=C sort -u); do
  awk -v l="$l" '$2 == l {print $1}' "$loc/all/utt2lang" > "$loc/$l.utts"
  utils/subset_data_dir.sh --utt-list "$loc/$l.utts" "$loc/all" "$loc/$l"
  speechkit-split-corpus "$loc/$l" "$loc/${l}_split" --dev "$dev" --test "$test" --by-speaker --seed "$seed" \
    --log-file "$loc/prepare.log"
  splits+=("$loc/${l}_split")
done
for x in train dev test; do
  utils/combine_data.sh "$data/$x" "${splits[@]/%//$x}"
  utils/validate_data_dir.sh --no-feats "$data/$x"
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $(wc -l < "$data/$x/spk2utt") speakers," \
    "languages: $(cut -d' ' -f2 "$data/$x/utt2lang" | LC_ALL=C sort | uniq -c | awk '{printf "%s%s %d", NR > 1 ? ", " : "", $2, $1}')"
done
