#!/usr/bin/env bash
# Score a frame-level feature directory (units or features) on the test set of a data dir:
# ABX across and within speakers, by context (ZeroSpeech 2019) and without context, and bitrate.
#
# Usage: local/score.sh <data-dir> <feature-dir> <out-dir>
#   <data-dir>/test/abx.item, abx_nocontext.item, utt2dur (or bitrate_filelist.txt) are used;
#   writes <out-dir>/{abx,abx_nocontext}_{across,within}.{json,log} and bitrate.json.
set -euo pipefail

help_message="Usage: $0 <data-dir> <feature-dir> <out-dir>"
. utils/parse_options.sh
[ $# -eq 3 ] || { echo "$help_message" >&2; exit 1; }
data=$1
feats=$2
out=$3
[ -f "$data/test/abx.item" ] || { echo "$0: no $data/test/abx.item (no phone alignments for the test set)" >&2; exit 1; }
bitrate_opts=(--durations "$data/test/utt2dur")
[ -f "$data/test/bitrate_filelist.txt" ] && bitrate_opts=(--file-list "$data/test/bitrate_filelist.txt")
mkdir -p "$out"
for item in abx abx_nocontext; do
  [ -f "$data/test/$item.item" ] || continue
  for mode in across within; do
    name=${item}_${mode}
    speechkit-score-abx "$feats" "$data/test/$item.item" --"$mode" --distance cosine \
      --json "$out/$name.json" --log-file "$out/$name.log" | tail -n 1
  done
done
speechkit-score-bitrate "$feats" "${bitrate_opts[@]}" --json "$out/bitrate.json" | tail -n 1
