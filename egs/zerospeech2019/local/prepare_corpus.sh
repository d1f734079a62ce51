#!/usr/bin/env bash
# Any corpus of speechkit's registry (speechkit-prepare-corpus --help) as the ZeroSpeech 2019 sets of
# egs/zerospeech2019 (./run.sh --corpus NAME --db_root DIR). Transcripts are never used.
#
#   voice   the speaker with the most audio (utt2dur; ties: C order of the ids): $data/voice, the
#           inverter's target voice (also VQ-VAE training data, as train/voice is in ZeroSpeech 2019)
#   test    --num_test_speakers other speakers drawn with --seed: $data/test, unseen in training
#           (phone_alignments, when the corpus has them, go along: stage 0 then makes the ABX items)
#   unit    every other speaker: $data/train (+ the voice) and $data/dev (every 10th unit utterance,
#           at least one; validation only)
# Audio at another rate than 16 kHz is resampled in wav.scp (sox pipes; speechkit-resample for MP3 and Opus).
# Prints each set's size and speakers.
#
# Usage: local/prepare_corpus.sh --corpus NAME [--corpus_opts "--opt v ..."] [--num_test_speakers 2] [--seed 1]
#                                <corpus-dir> <data-dir>
set -euo pipefail

corpus=
corpus_opts=
num_test_speakers=2
seed=1
help_message="Usage: $0 --corpus NAME [--corpus_opts '...'] [--num_test_speakers N] [--seed S] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] && [ -n "$corpus" ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[[ "$num_test_speakers" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --num_test_speakers must be a whole number >= 1, got '$num_test_speakers'" >&2; exit 1; }

all=$data/${corpus}_all
# shellcheck disable=SC2086  # --corpus_opts holds several words
speechkit-prepare-corpus "$corpus" "$db" "$all" --sample-rate 16000 $corpus_opts
utils/validate_data_dir.sh --no-feats --no-text "$all"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# speakers by audio, the most first (seconds from utt2dur; without it, by utterances)
if [ -f "$all/utt2dur" ]; then
  awk 'NR == FNR {d[$1] = $2; next} {s = 0; for (i = 2; i <= NF; i++) s += d[$i]; printf "%.3f %s\n", s, $1}' \
    "$all/utt2dur" "$all/spk2utt" > "$tmp/amount"
else
  awk '{print NF - 1, $1}' "$all/spk2utt" > "$tmp/amount"
fi
LC_ALL=C sort -k1,1gr -k2,2 "$tmp/amount" | cut -d' ' -f2 > "$tmp/ranked"
n=$(wc -l < "$tmp/ranked")
if [ "$n" -lt $((num_test_speakers + 2)) ]; then
  echo "$0: $all has $n speaker(s); the recipe needs a voice, --num_test_speakers $num_test_speakers unseen test" \
    "speaker(s) and at least one unit-set speaker ($((num_test_speakers + 2)) or more)" >&2
  exit 1
fi
head -n 1 "$tmp/ranked" > "$tmp/voice.spk"
tail -n +2 "$tmp/ranked" | LC_ALL=C sort > "$tmp/rest.spk"
python -c 'import random, sys
s = sys.stdin.read().split(); random.Random(int(sys.argv[1])).shuffle(s); print("\n".join(sorted(s[:int(sys.argv[2])])))' \
  "$seed" "$num_test_speakers" < "$tmp/rest.spk" > "$tmp/test.spk"
utils/filter_scp.pl --exclude "$tmp/test.spk" "$tmp/rest.spk" > "$tmp/unit.spk"

# stale side files of an earlier corpus must not become this one's ABX task or synthesis list
for f in phone_alignments abx.item abx_nocontext.item synthesis_list bitrate_filelist.txt; do
  rm -f "$data/test/$f"
done
utils/subset_data_dir.sh --spk-list "$tmp/unit.spk" "$all" "$tmp/unit"
n=$(wc -l < "$tmp/unit/utt2spk")
awk -v n="$n" 'NR % 10 == 0 || (n < 10 && NR == n) {print $1}' "$tmp/unit/utt2spk" > "$tmp/dev.utt"
utils/filter_scp.pl --exclude "$tmp/dev.utt" "$tmp/unit/utt2spk" > "$tmp/unit_train.utt"
utils/subset_data_dir.sh --utt-list "$tmp/dev.utt" "$all" "$data/dev"
utils/subset_data_dir.sh --spk-list "$tmp/voice.spk" "$all" "$data/voice"
if [ -s "$tmp/unit_train.utt" ]; then
  utils/subset_data_dir.sh --utt-list "$tmp/unit_train.utt" "$all" "$tmp/unit_train"
  utils/combine_data.sh "$data/train" "$tmp/unit_train" "$data/voice"
else  # one unit utterance, now dev: the voice trains alone
  utils/copy_data_dir.sh "$data/voice" "$data/train"
fi
utils/subset_data_dir.sh --spk-list "$tmp/test.spk" "$all" "$data/test"
if [ -f "$all/phone_alignments" ]; then
  utils/filter_scp.pl "$data/test/utt2spk" "$all/phone_alignments" > "$data/test/phone_alignments"
fi

speakers() { cut -d' ' -f1 "$1/spk2utt" | head -n 5 | tr '\n' ' ' | sed 's/ $//'; }
for x in train dev voice test; do
  ns=$(wc -l < "$data/$x/spk2utt")
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $ns speakers ($(speakers "$data/$x")$(
    [ "$ns" -le 5 ] || echo " ..."))"
done
