#!/usr/bin/env bash
# Kaldi's utils/combine_data.sh, implemented by speechkit-combine-data-dirs (same options; see `speechkit-combine-data-dirs --help`).
# Usage: utils/combine_data.sh <dest-dir> <src-dir1> <src-dir2> ...
set -euo pipefail
if ! command -v speechkit-combine-data-dirs >/dev/null 2>&1; then
  # not on PATH (path.sh not sourced): use the toolkit's venv next to this script's real location
  PATH="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-combine-data-dirs >/dev/null 2>&1 || { echo "$0: speechkit-combine-data-dirs not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec speechkit-combine-data-dirs "$@"
