#!/usr/bin/env bash
# local/prepare_real.sh: the real-data setup of this recipe, written as Kaldi data dirs with utt2lang.
#
# Usage: local/prepare_real.sh [--seed S] [--fsdd-heldout SPK] [--fsdd-eval N] <db-root> <data-root>
#
# <db-root> holds hindi_noa/, msc_malayalam/, timit_sample/ and fsdd/ (as ../../../shared/data);
# writes <data-root>/{train,dev,test} (combined, utt2lang = hi | ml | en) and the per-corpus dirs
# under <data-root>/local/.
#   hi: hindi_noa (All India Radio news). No speaker labels: the bulletin folder is the speaker,
#       so the by-speaker split keeps bulletins apart; dev/test 10 % each.
#   ml: msc_malayalam crowd-sourced sentences with vote >= 0 (rows without a vote count as 0);
#       split by the 78 contributors, dev/test about 10 % of the utterances each.
#   en: timit_sample without the sa1/sa2 sentences every speaker reads (TIMIT practice), split by
#       speaker (8 speakers: 6 / 1 / 1); fsdd (spoken digits, 8 kHz -> 16 kHz through sox): only 4
#       speakers, so one (--fsdd-heldout) is held out entirely and N (--fsdd-eval) of its recordings
#       go to dev and N others to test; the other three speakers train.
# Every split is speaker-disjoint from train; all draws are seeded (--seed).
set -euo pipefail

seed=0
fsdd_heldout=lucas
fsdd_eval=100
help_message="Usage: $0 [--seed S] [--fsdd-heldout SPK] [--fsdd-eval N] <db-root> <data-root>"
. utils/parse_options.sh || exit 1
[ $# -eq 2 ] || { echo "$help_message" >&2; exit 1; }
db=$1
data=$2
for d in hindi_noa msc_malayalam timit_sample fsdd; do
  [ -d "$db/$d" ] || { echo "$0: $db/$d: no such corpus directory" >&2; exit 1; }
done
loc=$data/local
mkdir -p "$loc"

speechkit-prepare-corpus hindi_noa "$db/hindi_noa" "$loc/hi" --log-file "$loc/prepare.log"
speechkit-prepare-corpus msc_malayalam "$db/msc_malayalam" "$loc/ml" --subset crowd --min-vote 0 --log-file "$loc/prepare.log"
speechkit-prepare-corpus timit "$db/timit_sample" "$loc/timit" --no-include-sa --log-file "$loc/prepare.log"
speechkit-prepare-corpus fsdd "$db/fsdd" "$loc/fsdd" --sample-rate 16000 --log-file "$loc/prepare.log"

speechkit-split-corpus "$loc/hi" "$loc/hi_split" --dev 0.1 --test 0.1 --by-speaker --seed "$seed"
speechkit-split-corpus "$loc/ml" "$loc/ml_split" --dev 0.1 --test 0.1 --by-speaker --seed "$seed"
speechkit-split-corpus "$loc/timit" "$loc/timit_split" --dev 0.125 --test 0.125 --by-speaker --seed "$seed"

# fsdd: train on the other speakers; dev/test from the held-out one.
grep -q "^$fsdd_heldout " "$loc/fsdd/spk2utt" || { echo "$0: --fsdd-heldout $fsdd_heldout: no such fsdd speaker" >&2; exit 1; }
mkdir -p "$loc/fsdd_split"
echo "$fsdd_heldout" > "$loc/fsdd_split/heldout.spk"
awk '{print $1}' "$loc/fsdd/spk2utt" | grep -vx "$fsdd_heldout" > "$loc/fsdd_split/train.spk"
utils/subset_data_dir.sh --spk-list "$loc/fsdd_split/train.spk" "$loc/fsdd" "$loc/fsdd_split/train"
utils/subset_data_dir.sh --spk-list "$loc/fsdd_split/heldout.spk" "$loc/fsdd" "$loc/fsdd_split/heldout"
n=$(wc -l < "$loc/fsdd_split/heldout/utt2spk")
speechkit-split-corpus "$loc/fsdd_split/heldout" "$loc/fsdd_split/heldout_split" \
  --dev "$(awk -v a="$fsdd_eval" -v n="$n" 'BEGIN{printf "%.6f", a/n}')" \
  --test "$(awk -v a="$fsdd_eval" -v n="$n" 'BEGIN{printf "%.6f", a/n}')" --seed "$seed"
for x in dev test; do
  rm -rf "$loc/fsdd_split/$x"
  cp -r "$loc/fsdd_split/heldout_split/$x" "$loc/fsdd_split/$x"
done

for x in train dev test; do
  utils/combine_data.sh "$data/$x" "$loc/hi_split/$x" "$loc/ml_split/$x" "$loc/timit_split/$x" "$loc/fsdd_split/$x"
  utils/validate_data_dir.sh --no-feats "$data/$x"
done
