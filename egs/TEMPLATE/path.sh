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
# Threads. SPEECHKIT_CORES: the cores a recipe spreads over what it runs at once (run.sh's
# --num_threads auto, utils/recipe_common.sh's `threads`; docs/scale_out.md, "Threads"): an
# OMP_NUM_THREADS the user exported before the first path.sh (`OMP_NUM_THREADS=4 ./run.sh`: 4
# cores), else every CPU this process may run on (nproc: the affinity mask, a Slurm job's CPUs).
# Set once: a run.sh started by a script that sourced path.sh keeps it.
if [ -z "${SPEECHKIT_CORES:-}" ]; then
  SPEECHKIT_CORES=${OMP_NUM_THREADS:-$(OMP_NUM_THREADS='' OMP_THREAD_LIMIT='' nproc 2>/dev/null ||
                                       getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
  export SPEECHKIT_CORES
fi
# Then one thread for whatever is not given a thread count: each stage sets its jobs' threads
# (trainer.num_threads, --num-threads, or OMP_NUM_THREADS for that one command).
export OMP_NUM_THREADS=1
export MKL_NUM_THREADS=1
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$HOME/.cache/speechkit/numba}   # librosa JIT, compiled once
export MPLBACKEND=Agg
