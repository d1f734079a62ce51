#!/usr/bin/env bash
# Any transcribed corpus of speechkit's registry (speechkit-prepare-corpus --help) for egs/vctk_continual
# (./run.sh --corpus NAME --db_root DIR), split as local/prepare_vctk.sh splits VCTK:
#   - continual split: --continual_speakers (comma-separated), else --num_continual speakers drawn from
#     --seed among those with at least num_test + num_dev + 2 recordings (default: half of them, at
#     most 20, at least 2), one per episode;
#   - pre-training split: every other speaker;
# then each speaker's train/dev/test (local/finish_split.sh). Audio is resampled to 16 kHz in wav.scp
# (sox pipes; speechkit-resample for MP3 and Opus). The corpus must write utt2lang (the G2P language).
# Prints the two splits' speakers.
#
# Usage: local/prepare_corpus.sh --corpus NAME [--corpus_opts "--opt v ..."] [--num_continual N]
#          [--continual_speakers a,b,...] [--seed S] [--num_test 5] [--num_dev 3] <corpus-dir> <data-dir>
set -euo pipefail

corpus=
corpus_opts=
num_continual=
continual_speakers=
seed=1
num_test=5
num_dev=3
help_message="Usage: $0 --corpus NAME [--corpus_opts '...'] [--num_continual N] [--continual_speakers a,b] [--seed S] [--num_test N] [--num_dev N] <corpus-dir> <data-dir>"
. utils/parse_options.sh
[ $# -eq 2 ] && [ -n "$corpus" ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2

src=$data/${corpus}_src
rm -rf "$src" "$data/all"
# shellcheck disable=SC2086  # --corpus_opts holds several words
speechkit-prepare-corpus "$corpus" "$db" "$src/corpus" --sample-rate 16000 $corpus_opts
for f in text utt2lang; do
  [ -s "$src/corpus/$f" ] || {
    echo "$0: corpus $corpus wrote no $f: the TTS models need transcripts and their language (G2P)" >&2; exit 1; }
done
utils/copy_data_dir.sh "$src/corpus" "$data/all"

# speakers with enough recordings for train, dev and test can be continual speakers
min=$((num_test + num_dev + 2))
awk -v m="$min" 'NF - 1 >= m {print $1}' "$src/corpus/spk2utt" > "$src/eligible"
n=$(wc -l < "$src/eligible")
if [ -n "$continual_speakers" ]; then
  echo "$continual_speakers" | tr ',' '\n' | sed '/^$/d' | LC_ALL=C sort > "$data/continual_speakers"
  while read -r spk; do
    grep -qxF -- "$spk" "$src/eligible" || {
      echo "$0: --continual_speakers: '$spk' is not a speaker of $db with at least $min recordings" >&2; exit 1; }
  done < "$data/continual_speakers"
else
  if [ -z "$num_continual" ]; then
    num_continual=$((n / 2))
    [ "$num_continual" -le 20 ] || num_continual=20
    [ "$num_continual" -ge 2 ] || num_continual=2
  fi
  [ "$num_continual" -ge 2 ] && [ "$num_continual" -lt "$n" ] || {
    echo "$0: --num_continual $num_continual must be in 2..$((n - 1)) ($n speakers of $corpus with at least $min" \
      "recordings, --num_test $num_test + --num_dev $num_dev + 2)" >&2; exit 1; }
  python -c 'import random, sys
s = sys.stdin.read().split(); random.Random(int(sys.argv[1])).shuffle(s); print("\n".join(sorted(s[:int(sys.argv[2])])))' \
    "$seed" "$num_continual" < "$src/eligible" > "$data/continual_speakers"
fi
cut -d' ' -f1 "$data/all/spk2utt" | grep -vxF -f "$data/continual_speakers" | LC_ALL=C sort > "$data/pretrain_speakers"
[ -s "$data/pretrain_speakers" ] || { echo "$0: no speaker left for pre-training" >&2; exit 1; }
echo "$0: $corpus: $(wc -l < "$data/continual_speakers") continual speakers ($(paste -sd' ' "$data/continual_speakers")," \
  "one per episode), $(wc -l < "$data/pretrain_speakers") pre-training speakers"
local/finish_split.sh --seed "$seed" --num_test "$num_test" --num_dev "$num_dev" "$data"
for x in train dev test; do
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $(wc -l < "$data/$x/spk2utt") speakers"
done
