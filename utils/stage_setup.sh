#!/usr/bin/env bash
# The setup stage 0 prepared, remembered for the later stages (sourced by the recipes' run.sh).
#
# Stage 0 calls `setup_save FILE KEY...` after preparing the data: one `key=value` line per option
# that defines the data (corpus, db_root, data options). A later stage calls
# `setup_restore FILE KEY...`: every key takes its saved value, so `./run.sh --stage 3` continues
# what `./run.sh --db_root ... --stop_stage 2` prepared; a key given on this command line
# (utils/parse_options.sh lists it in $cmdline_options, whatever its value, the default included)
# with another value than the saved one is an error naming the option, the saved value and the
# file. Keys ending in `_root` are paths: compared as absolute paths. A key missing from the file (a
# .setup written before run.sh recorded that option) keeps the value given on this command line or
# its default, said on stdout; the next stage 0 records it.
#
#   . utils/parse_options.sh
#   . utils/stage_setup.sh
#   if [ "$stage" -gt 0 ]; then setup_restore "$datadir/.setup" $setup_keys; else ...; fi
#   ... stage 0 ...; setup_save "$datadir/.setup" $setup_keys

setup_restore() {
  local file=$1 key saved given
  shift
  if [ ! -f "$file" ]; then
    echo "$0: $file: no such file: run stage 0 first (./run.sh --stop_stage 0 [--db_root ...])" >&2
    exit 1
  fi
  for key in "$@"; do
    if ! grep -q "^$key=" "$file"; then
      echo "$0: $file has no '$key=' line (an older stage 0 did not record it): $key='${!key}', as given or" \
        "the default"
      continue
    fi
    saved=$(awk -F= -v k="$key" '$1 == k {sub(/^[^=]*=/, ""); print; exit}' "$file")
    case " ${cmdline_options:-} " in
      *" $key "*)   # given on this command line
        given=${!key}
        case "$key" in
          *_root) [ -n "$given" ] && given=$(cd "$given" 2>/dev/null && pwd || echo "$given") ;;
        esac
        if [ "$given" != "$saved" ]; then
          echo "$0: --$key $given contradicts $file ($key=$saved, written by stage 0); re-run from --stage 0 to prepare another setup" >&2
          exit 1
        fi ;;
    esac
    printf -v "$key" '%s' "$saved"
  done
}

setup_save() {
  local file=$1 key
  shift
  for key in "$@"; do echo "$key=${!key}"; done > "$file.tmp"
  mv "$file.tmp" "$file"
}
