#!/usr/bin/env bash
# Kaldi's utils/split_data.sh, implemented by speechkit-split-data-dir (same options; see `speechkit-split-data-dir --help`).
# Usage: utils/split_data.sh [--per-utt] <data-dir> <num-to-split>
set -euo pipefail
if ! command -v speechkit-split-data-dir >/dev/null 2>&1; then
  # not on PATH (path.sh not sourced): use the toolkit's venv next to this script's real location
  PATH="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-split-data-dir >/dev/null 2>&1 || { echo "$0: speechkit-split-data-dir not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec speechkit-split-data-dir "$@"
