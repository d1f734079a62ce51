#!/usr/bin/env bash
# Kaldi's utils/copy_data_dir.sh, implemented by speechkit.bin.copy_data_dir (see --help).
# Usage: utils/copy_data_dir.sh [--utt-prefix P] [--spk-prefix P] [--utt-suffix S] [--spk-suffix S] <src-dir> <dest-dir>
set -euo pipefail
py=python3
if ! python3 -c "import speechkit" >/dev/null 2>&1; then
  # path.sh not sourced: use the toolkit's venv next to this script's real location
  py="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin/python"
  [ -x "$py" ] || { echo "$0: speechkit not installed (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec "$py" -m speechkit.bin.copy_data_dir "$@"
