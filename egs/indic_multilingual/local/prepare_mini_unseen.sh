#!/usr/bin/env bash
# local/prepare_mini_unseen.sh: the 'mini' corpus grown, split by sentence (voices seen, sentences
# unseen): the check that the models learn (README, "Models that learn"; issue 11).
#
# Usage: local/prepare_mini_unseen.sh [--num-speakers N] [--sentences N] [--languages en,hi] [--seed S]
#                                     [--dev F] [--test F] <corpus-dir> <data-root>
# Synthesizes the espeak-ng 'mini' corpus into <corpus-dir> (nothing downloaded; skipped when it is
# complete with the same parameters) and writes <data-root>/{train,dev,test}: every speaker in every
# part; per language, whole transcripts go to test and dev (about F of the utterances each), so no
# test or dev sentence is ever heard in training (local/split_by_sentence.py).
# Through run.sh (the corpus directory is --db_root, options inside --local_prep):
#   mkdir -p db/mini_unseen && ./run.sh --setup mini_unseen --db_root db/mini_unseen \
#     --local_prep "local/prepare_mini_unseen.sh --sentences 300 --languages en,hi" --stop_stage 2
set -euo pipefail

num_speakers=6
sentences=300
languages=en,hi
seed=0
dev=0.05
test=0.1
help_message="Usage: $0 [--num-speakers N] [--sentences N] [--languages L1,L2] [--seed S] [--dev F] [--test F] <corpus-dir> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2

speechkit-prepare-corpus mini "$db" "$data/local/all" --num-speakers "$num_speakers" \
  --sentences-per-language "$sentences" --languages "$languages" --log-file "$data/local/prepare.log"
local/split_by_sentence.py --dev "$dev" --test "$test" --seed "$seed" "$data/local/all" "$data/local/split"
for x in train dev test; do
  rm -rf "${data:?}/$x"
  cp -r "$data/local/split/$x" "$data/$x"
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
