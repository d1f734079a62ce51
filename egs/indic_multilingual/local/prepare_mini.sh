#!/usr/bin/env bash
# local/prepare_mini.sh: the embedded default corpus (speechkit's espeak-ng 'mini': en hi ta gu,
# synthesized locally, nothing downloaded) split so that the test sets measure learning:
#   train              the first N-1 voices, minus every utterance of a test or dev sentence
#   dev, test          the same voices saying sentences never heard in training (--dev-utts / --test-utts
#                      per language; whole sentences are dealt, so a few more is possible)
#   test_unseen_voice  the last voice, never heard in training, saying sentences never heard
#                      (--test-utts per language)
# (local/split_by_sentence.py --unseen-voices 1).
#
# Usage: local/prepare_mini.sh [--num-speakers N] [--sentences N] [--languages en,hi,ta,gu]
#                              [--test-utts N] [--dev-utts N] [--seed S] <corpus-dir> <data-root>
set -euo pipefail

num_speakers=6
sentences=150
languages=en,hi,ta,gu
test_utts=30
dev_utts=15
seed=0
help_message="Usage: $0 [--num-speakers N] [--sentences N] [--languages L1,L2,...] [--test-utts N] [--dev-utts N] [--seed S] <corpus-dir> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ "$num_speakers" -ge 2 ] || { echo "$0: --num-speakers must be >= 2 (training voices and one unseen voice)" >&2; exit 1; }

speechkit-prepare-corpus mini "$db" "$data/local/all" --num-speakers "$num_speakers" \
  --sentences-per-language "$sentences" --languages "$languages" --log-file "$data/local/prepare.log"
rm -rf "${data:?}/local/split"
local/split_by_sentence.py --dev "$dev_utts" --test "$test_utts" --seed "$seed" \
  --unseen-voices 1 --unseen-voice-utts "$test_utts" "$data/local/all" "$data/local/split"
for x in train dev test test_unseen_voice; do
  rm -rf "${data:?}/$x"
  cp -r "$data/local/split/$x" "$data/$x"
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
