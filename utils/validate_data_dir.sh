#!/usr/bin/env bash
# Kaldi's utils/validate_data_dir.sh, implemented by speechkit-validate-data-dir (same options; see `speechkit-validate-data-dir --help`).
# Usage: utils/validate_data_dir.sh [--no-feats] [--no-text] [--no-wav] [--no-spk-sort] <data-dir>
set -euo pipefail
if ! command -v speechkit-validate-data-dir >/dev/null 2>&1; then
  # not on PATH (path.sh not sourced): use the toolkit's venv next to this script's real location
  PATH="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-validate-data-dir >/dev/null 2>&1 || { echo "$0: speechkit-validate-data-dir not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec speechkit-validate-data-dir "$@"
