# Sourced by every recipe's run.sh (egs/<recipe>/path.sh is a link to this file).
# Activates the toolkit environment and fixes the settings that make results reproducible.
MAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export MAIN_ROOT

if [ -f "$MAIN_ROOT/tools/venv/bin/activate" ]; then
  # shellcheck disable=SC1091
  . "$MAIN_ROOT/tools/venv/bin/activate"
elif ! command -v speechkit-train >/dev/null 2>&1; then
  echo "path.sh: no environment: run $MAIN_ROOT/tools/install.sh first" >&2
  return 1 2>/dev/null || exit 1
fi

export LC_ALL=C                      # Kaldi sort order for every data-dir file
export PYTHONUNBUFFERED=1            # logs appear as they are written
export PYTHONIOENCODING=UTF-8
# One thread per job by default: --nj jobs and the trainer's num_threads set parallelism explicitly.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$HOME/.cache/speechkit/numba}   # librosa JIT, compiled once
export MPLBACKEND=Agg
