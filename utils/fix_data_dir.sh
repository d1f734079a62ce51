#!/usr/bin/env bash
# Kaldi's utils/fix_data_dir.sh, implemented by speechkit-fix-data-dir (same options; see `speechkit-fix-data-dir --help`).
# Usage: utils/fix_data_dir.sh <data-dir>
set -euo pipefail
if ! command -v speechkit-fix-data-dir >/dev/null 2>&1; then
  # not on PATH (path.sh not sourced): use the toolkit's venv next to this script's real location
  PATH="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-fix-data-dir >/dev/null 2>&1 || { echo "$0: speechkit-fix-data-dir not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec speechkit-fix-data-dir "$@"
