#!/usr/bin/env bash
# utils/recipe_common.sh: what every recipe's run.sh checks before it runs or creates anything.
# Source it after utils/parse_options.sh (which lists the options given in $cmdline_options):
#
#   . utils/parse_options.sh
#   . utils/recipe_common.sh
#   check_stages 8                       # a recipe whose stages are 0..8
#   option_given corpus && ...
#
#   die MESSAGE...      prints "$0: MESSAGE" on stderr, exits 1.
#   record_run FILE     appends this run (command line, environment, config hashes) to FILE (runs.jsonl).
#   option_given NAME   true if --NAME was given on the command line (or assigned in a --config
#                       file), whatever its value: the default given explicitly counts.
#   check_stages LAST   --stage and --stop_stage are whole numbers, --stage in 0..LAST,
#                       --stop_stage in --stage..LAST or 100 and more (the default 100: to the end);
#                       otherwise an error naming the option. Leading zeros are dropped (08 is 8).

die() { echo "$0: $*" >&2; exit 1; }

option_given() { [[ " ${cmdline_options:-} " == *" $1 "* ]]; }

check_stages() {
  local last=$1 opt value
  for opt in stage stop_stage; do
    value=${!opt}
    [[ "$value" =~ ^[0-9]{1,9}$ ]] || die "--$opt $value: not a stage number (this recipe's stages are 0..$last)"
    printf -v "$opt" '%d' "$((10#$value))"
  done
  [ "$stage" -le "$last" ] || die "--stage $stage: no such stage (this recipe's stages are 0..$last)"
  [ "$stop_stage" -le "$last" ] || [ "$stop_stage" -ge 100 ] ||
    die "--stop_stage $stop_stage: no such stage (this recipe's stages are 0..$last; 100 or more: to the end)"
  [ "$stop_stage" -ge "$stage" ] || die "--stop_stage $stop_stage is before --stage $stage: no stage would run"
}

# record_run FILE [CONFIG...]: append this invocation (the command line as typed, the environment:
# date, git commit, Python, torch, CPU/GPU, threads; the SHA-256 of every *.yaml under the CONFIG
# paths, default conf/) to FILE, a runs.jsonl that local/make_results.py turns into RESULTS.md's
# environment, commands and configs sections (speechkit-record-run, speechkit.utils.provenance).
record_run() {
  local file=$1
  shift
  [ $# -gt 0 ] || set -- conf
  speechkit-record-run --out "$file" --cmdline "${cmdline_args:-$0}" --configs "$@"
}
