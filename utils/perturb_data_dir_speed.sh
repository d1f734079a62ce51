#!/usr/bin/env bash
# Kaldi's utils/data/perturb_data_dir_speed.sh, implemented by speechkit.bin.perturb_data_dir_speed (see --help).
# Usage: utils/perturb_data_dir_speed.sh <factor> <src-dir> <dest-dir>
#   e.g. utils/perturb_data_dir_speed.sh 0.9 data/train data/train_sp0.9
#   wav.scp entries become 'sox ... speed <factor> |' pipes; ids get the prefix sp<factor>-; durations / factor.
set -euo pipefail
py=python3
if ! python3 -c "import speechkit" >/dev/null 2>&1; then
  # path.sh not sourced: use the toolkit's venv next to this script's real location
  py="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin/python"
  [ -x "$py" ] || { echo "$0: speechkit not installed (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec "$py" -m speechkit.bin.perturb_data_dir_speed "$@"
