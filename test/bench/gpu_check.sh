#!/usr/bin/env bash
# Issue 22's GPU checks in one pass (docs/gpu_checks.md): the CUDA unit tests, the Triton DTW tests, the RNN-T
# loss table (speechkit / auto / torchaudio on CUDA), the ABX phase profile (CUDA and all cores, 1.55 G triplets) and
# the ABX tables (speechkit vs fastabx: synthetic in all four conditions; the TIMIT sample, all cores and CUDA).
# Run from the repository root on a machine with a GPU; each step has its own time limit and log under $OUT.
#
#   PYTHON=python3 PEERS_PYTHON=tools/venv-peers/bin/python OUT=gpu_check_out test/bench/gpu_check.sh [quick]
#
# PYTHON runs speechkit (its dependencies importable, torchaudio for the loss rows); PEERS_PYTHON runs fastabx
# (default: PYTHON). "quick" skips the ABX table's large no-context task.
set -u
py=${PYTHON:-python3}
peers=${PEERS_PYTHON:-$py}
out=${OUT:-gpu_check_out}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$(pwd)
"$py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || { echo "$0: no CUDA device for $py" >&2; exit 1; }
"$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee "$out/device.txt"
# ABX's C kernels (what tools/install.sh builds); without a compiler ABX runs numba's kernels
"$py" -m speechkit.scoring._abx_ckernels --build | tee "$out/abx_ckernels.txt" || echo "ABX C kernels not built: numba's run"
status=0
step() {  # step NAME SECONDS CMD...: run with a time limit, log to $out/NAME.log, remember a failure
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  [ "$rc" = 0 ] || { echo "== $name: exit $rc"; status=1; }
}
step pytest_cuda 900 "$py" -m pytest -q -m cuda -p no:cacheprovider \
  test/unit/scoring/test_abx.py test/unit/nn/test_rnnt_loss.py test/unit/train/test_checkpoint.py
step pytest_triton 300 "$py" -m pytest -q -p no:cacheprovider test/unit/scoring/test_abx.py -k triton
step bench_rnnt_loss 900 "$py" test/bench/bench_rnnt_loss.py --device cuda --python "$py" \
  --impls speechkit,auto,torchaudio --shapes 8,200,50,256 32,400,80,512 16,1000,150,1024
step profile_abx_cuda 300 "$py" test/bench/profile_abx.py --device cuda --repeats 2 --seconds 5
step profile_abx_cpu 300 "$py" test/bench/profile_abx.py --device cpu --repeats 1 --seconds 5
step bench_abx_synth 1200 "$py" test/bench/bench_abx.py --tasks synth-ctx-across,synth-any-within,synth-any-across \
  --synth-any-seconds 2.5 --conditions cuda,all,idle2,busy2 --peers-python "$peers" --workdir "$out/abx_data"
tasks=timit-ctx-across,timit-ctx-within,timit-any-within
[ "${1:-}" = quick ] || tasks=$tasks,timit-any-across
step bench_abx 1800 "$py" test/bench/bench_abx.py --tasks "$tasks" --conditions all,cuda --peers-python "$peers" \
  --check-float64 --workdir "$out/abx_data"
exit $status
