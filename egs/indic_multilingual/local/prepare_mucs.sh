#!/usr/bin/env bash
# local/prepare_mucs.sh: MUCS 2021 (sub-task 1: Hindi, Marathi, Odia, Tamil, Telugu, Gujarati) as the
# data of this recipe: Kaldi data dirs <data-root>/{train,dev,test} with utt2lang.
#
# Usage: local/prepare_mucs.sh [--languages hi,mr,...] [--dev F] [--seed S] [--speaker-from-id true]
#                              <mucs-root> <data-root>
#   ./run.sh --setup mucs --db_root /data/mucs --local_prep local/prepare_mucs.sh
#
# <mucs-root>/<Language>/<split>/transcription.txt ('<uttid> <text>') and .../audio/<uttid>.wav at
# 8 kHz, split = train, test (and dev if present; else --dev of the training speakers). wav.scp
# resamples to 16 kHz through a sox pipe. MUCS has no speaker ids: one pseudo-speaker per
# utterance, or with --speaker-from-id true the part of the id before its first '_'. Per-language
# dirs go to <data-root>/local/<lang>/{train,dev,test} (speechkit/data/corpora/mucs.py documents the rules).
set -euo pipefail

languages=
dev=0.1
seed=0
speaker_from_id=false
help_message="Usage: $0 [--languages L1,L2] [--dev F] [--seed S] [--speaker-from-id true|false] <mucs-root> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
[ -d "$db" ] || { echo "$0: $db: no such directory" >&2; exit 1; }
loc=$data/local
mkdir -p "$loc"
command -v sox >/dev/null || { echo "$0: sox not found: wav.scp resamples MUCS's 8 kHz audio with it" >&2; exit 1; }

opts=(--dev "$dev" --seed "$seed" --sample-rate 16000)
[ -n "$languages" ] && opts+=(--languages "$languages")
[ "$speaker_from_id" = true ] && opts+=(--speaker-from-id)
rm -rf "${loc:?}/mucs"
local/prepare_mucs.py "${opts[@]}" "$db" "$loc/mucs" | tee "$loc/mucs.counts"

for x in train dev test; do
  # shellcheck disable=SC2046
  utils/combine_data.sh "$data/$x" $(for l in "$loc"/mucs/*/; do echo "${l%/}/$x"; done)
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
