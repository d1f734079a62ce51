#!/usr/bin/env bash
# Kaldi's utils/subset_data_dir.sh, implemented by speechkit-subset-data-dir (same options; see `speechkit-subset-data-dir --help`).
# Usage: utils/subset_data_dir.sh [--first N|--last N|--utt-list F|--spk-list F|N] [--seed S] <src-dir> <dest-dir>
set -euo pipefail
if ! command -v speechkit-subset-data-dir >/dev/null 2>&1; then
  # not on PATH (path.sh not sourced): use the toolkit's venv next to this script's real location
  PATH="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-subset-data-dir >/dev/null 2>&1 || { echo "$0: speechkit-subset-data-dir not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec speechkit-subset-data-dir "$@"
