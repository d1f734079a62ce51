#!/usr/bin/env bash
# Score a frame-level feature directory (units or features) on the test set of a data dir:
# ABX across and within speakers, by context (ZeroSpeech 2019) and without context, and bitrate.
#
# Usage: local/score.sh [--bootstrap 1000] <data-dir> <feature-dir> <out-dir>
#   --bootstrap N: a 95 % interval (N resamples of the test speakers) on the no-context across-speaker
#   ABX, the figure that ranks systems (0 = none)
#   <data-dir>/test/abx.item, abx_nocontext.item, utt2dur (or bitrate_filelist.txt) are used;
#   writes <out-dir>/{abx,abx_nocontext}_{across,within}.{json,log} and bitrate.json.
set -euo pipefail

bootstrap=1000
help_message="Usage: $0 [--bootstrap N] <data-dir> <feature-dir> <out-dir>"
. utils/parse_options.sh
[ $# -eq 3 ] || { echo "$help_message" >&2; exit 1; }
data=$1
feats=$2
out=$3
[ -f "$data/test/abx.item" ] || { echo "$0: no $data/test/abx.item (no phone alignments for the test set)" >&2; exit 1; }
bitrate_opts=(--durations "$data/test/utt2dur")
[ -f "$data/test/bitrate_filelist.txt" ] && bitrate_opts=(--file-list "$data/test/bitrate_filelist.txt")
mkdir -p "$out"
# the five commands in one process (utils/run_clis.py: each one's main with these arguments, the last line of
# its stdout printed, as `| tail -n 1`): one torch start instead of five
cmds=()
for item in abx abx_nocontext; do
  [ -f "$data/test/$item.item" ] || continue
  for mode in across within; do
    name=${item}_${mode}
    boot=()
    [ "$name" = abx_nocontext_across ] && [ "$bootstrap" -gt 0 ] && boot=(--bootstrap "$bootstrap" --bootstrap-seed 1)
    cmds+=("$(printf '%q ' speechkit-score-abx "$feats" "$data/test/$item.item" --"$mode" --distance cosine \
      "${boot[@]}" --json "$out/$name.json" --log-file "$out/$name.log")")
  done
done
cmds+=("$(printf '%q ' speechkit-score-bitrate "$feats" "${bitrate_opts[@]}" --json "$out/bitrate.json")")
printf '%s\n' "${cmds[@]}" | python utils/run_clis.py --last-line
