#!/usr/bin/env bash
# Issue 22's GPU checks in one pass (docs/gpu_checks.md): the CUDA unit tests, the Triton DTW tests, the RNN-T
# loss table (speechkit / auto / torchaudio on CUDA), the ABX phase profile (CUDA and all cores, 1.55 G triplets) and
# the ABX tables (speechkit vs fastabx: synthetic in all four conditions; the TIMIT sample, all cores and CUDA).
# Run from the repository root on a machine with a GPU; each step has its own time limit and log under $OUT.
#
#   PYTHON=python3 PEERS_PYTHON=tools/venv-peers/bin/python OUT=gpu_check_out test/bench/gpu_check.sh [quick|budget]
#
# PYTHON runs speechkit (its dependencies importable, torchaudio for the loss rows); PEERS_PYTHON runs fastabx
# (default: PYTHON). "quick" skips the ABX table's large no-context task. "budget" (about 8 minutes on an H200) runs
# only the ABX rows, the ABX phase profiles and the CUDA unit tests, the small tasks first and repeated (their times vary between runs): what
# fits one call of a lent machine's 15 minutes. CARRY=DIR (test/bench/gpu_carry.sh's folder) first installs its wheels
# into a scratch folder put on PYTHONPATH (fastabx then runs under PYTHON), unpacks its TIMIT task data, and takes its
# ABX C library where this machine cannot build one.
set -u
py=${PYTHON:-python3}
peers=${PEERS_PYTHON:-$py}
out=${OUT:-gpu_check_out}
mode=${1:-full}
case "$mode" in full|quick|budget) ;; *) echo "$0: unknown mode '$mode' (quick or budget)" >&2; exit 2 ;; esac
mkdir -p "$out"
workdir=${ABX_WORKDIR:-/tmp/speechkit-bench-abx}  # not under $OUT: a lent machine sends $OUT back
if [ -n "${CARRY:-}" ]; then  # what test/bench/gpu_carry.sh packed: wheels, polars' runtime, the TIMIT task's data
  site=${CARRY_SITE:-/tmp/speechkit_carry_site}
  mkdir -p "$site" "$workdir"
  { "$py" -m pip install -q --disable-pip-version-check --no-index --no-deps --target "$site" "$CARRY"/wheels/*.whl &&
    tar -C "$site" -xJf "$CARRY/polars_runtime.tar.xz" && tar -C "$workdir" -xJf "$CARRY/abx_data.tar.xz"; } ||
    { echo "$0: could not unpack $CARRY (made by test/bench/gpu_carry.sh?)" >&2; exit 1; }
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  peers=${PEERS_PYTHON:-$py}
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$(pwd)
if [ -z "${GPU_CHECK_NO_CUDA:-}" ]; then  # GPU_CHECK_NO_CUDA=1: a dry run of this script on a CPU-only machine
  "$py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || { echo "$0: no CUDA device for $py" >&2; exit 1; }
fi
"$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available()
  else 'no CUDA device')" | tee "$out/device.txt"
# ABX's C kernels (what tools/install.sh builds); without a compiler ABX runs numba's kernels
if ! "$py" -m speechkit.scoring.abx.build_kernels --build > "$out/abx_ckernels.txt" 2>&1; then
  if [ -n "${CARRY:-}" ] && [ -f "$CARRY/libspeechkit_abx.so" ]; then  # loaded only if built from this source
    cp "$CARRY/libspeechkit_abx.so" speechkit/scoring/abx/ && echo "ABX C kernels: the carried library" >> "$out/abx_ckernels.txt"
  fi
fi
"$py" -c "from speechkit.scoring.abx import kernels_c as c; print('ABX CPU kernels:', 'C' if c.available() else
  'numba (' + c.why_not() + ')')" | tee -a "$out/abx_ckernels.txt"
cuda_tests=(-m pytest -q -m cuda -p no:cacheprovider test/unit/scoring/test_abx.py test/unit/nn/test_rnnt_loss.py
            test/unit/train/test_checkpoint.py)
triton_tests=(-m pytest -q -p no:cacheprovider test/unit/scoring/test_abx.py -k triton)
large_profile=(test/bench/profile_abx.py --seconds 5)  # the 1.55 G-triplet task: add --device and --repeats
status=0
step() {  # step NAME SECONDS CMD...: run with a time limit, log to $out/NAME.log, remember a failure
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  [ "$rc" = 0 ] || { echo "== $name: exit $rc"; status=1; }
}
if [ "$mode" = budget ]; then  # the ABX rows first, the small tasks repeated; the unit tests between
  bench=("$py" test/bench/bench_abx.py --peers-python "$peers" --workdir "$workdir" --synth-any-seconds 2.5)
  step abx_synth_ctx 150 "${bench[@]}" --tasks synth-ctx-across --conditions cuda,all,idle2,busy2 --repeats 3
  step abx_synth_within 150 "${bench[@]}" --tasks synth-any-within --conditions cuda,all,idle2,busy2 --repeats 2
  # the by-context task phase by phase, on 2 CPUs and on all (the row that was slower on an H200 than here)
  step profile_abx_ctx 60 taskset -c 0,1 "$py" test/bench/profile_abx.py --context within --seconds 5 --threads 2 \
    --repeats 3
  step profile_abx_ctx_all 60 "$py" test/bench/profile_abx.py --context within --seconds 5 --repeats 3
  step pytest_cuda 120 "$py" "${cuda_tests[@]}"
  step pytest_triton 90 "$py" "${triton_tests[@]}"
  step abx_synth_across 200 "${bench[@]}" --tasks synth-any-across --conditions cuda,all,idle2
  step abx_timit 150 "${bench[@]}" --tasks timit-ctx-across,timit-any-within,timit-any-across --conditions all,cuda
  # the large task (1.55 G triplets) phase by phase: the CUDA path against all cores ("several times faster")
  step profile_abx_cuda 120 "$py" "${large_profile[@]}" --device cuda --repeats 2
  step profile_abx_cpu 120 "$py" "${large_profile[@]}" --device cpu --repeats 1
  exit $status
fi
step pytest_cuda 900 "$py" "${cuda_tests[@]}"
step pytest_triton 300 "$py" "${triton_tests[@]}"
step bench_rnnt_loss 900 "$py" test/bench/bench_rnnt_loss.py --device cuda --python "$py" \
  --impls speechkit,auto,torchaudio --shapes 8,200,50,256 32,400,80,512 16,1000,150,1024
step profile_abx_cuda 300 "$py" "${large_profile[@]}" --device cuda --repeats 2
step profile_abx_cpu 300 "$py" "${large_profile[@]}" --device cpu --repeats 1
step bench_abx_synth 1200 "$py" test/bench/bench_abx.py --tasks synth-ctx-across,synth-any-within,synth-any-across \
  --synth-any-seconds 2.5 --conditions cuda,all,idle2,busy2 --peers-python "$peers" --workdir "$workdir"
tasks=timit-ctx-across,timit-ctx-within,timit-any-within
[ "$mode" = quick ] || tasks=$tasks,timit-any-across
step bench_abx 1800 "$py" test/bench/bench_abx.py --tasks "$tasks" --conditions all,cuda --peers-python "$peers" \
  --check-float64 --workdir "$workdir"
exit $status
