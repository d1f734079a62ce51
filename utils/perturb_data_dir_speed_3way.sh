#!/usr/bin/env bash
# Kaldi's utils/data/perturb_data_dir_speed_3way.sh, implemented by speechkit.bin.perturb_data_dir_speed --3way.
# Usage: utils/perturb_data_dir_speed_3way.sh [--always-include-prefix true|false] <src-dir> <dest-dir>
#   <dest-dir> = <src-dir> + its speed 0.9 and 1.1 copies (ids sp0.9-*, sp1.1-*; the source's with
#   --always-include-prefix true get sp1.0-).
set -euo pipefail
py=python3
if ! python3 -c "import speechkit" >/dev/null 2>&1; then
  py="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tools/venv/bin/python"
  [ -x "$py" ] || { echo "$0: speechkit not installed (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi
exec "$py" -m speechkit.bin.perturb_data_dir_speed --3way "$@"
