#!/usr/bin/env bash
# The benchmark-only virtualenv of speechkit's peers (never needed to use or test speechkit):
#   fastabx (Python >= 3.12, torch >= 2.10) for test/bench/bench_abx.py --peer, and torchaudio for
#   test/bench/bench_rnnt_loss.py on a CUDA machine.
#
#   ./tools/install_peers.sh          # tools/venv-peers (override with SPEECHKIT_PEERS_VENV)
#
# Environment: PYTHON312 (default: a working python3.12 on PATH, else pyenv's), TORCH_VERSION (default 2.11.0: PyPI's wheel, a
# CUDA build of several GB that also runs on a CPU-only machine). Idempotent: a second run only checks.
set -euo pipefail
tools_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${SPEECHKIT_PEERS_VENV:-$tools_dir/venv-peers}
python=${PYTHON312:-}
if [ -z "$python" ]; then   # python3.12 on PATH (a pyenv shim may exist and still fail), else pyenv's own
  for cand in "$(command -v python3.12 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
    if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      python=$cand; break
    fi
  done
fi
torch_version=${TORCH_VERSION:-2.11.0}
[ -n "$python" ] || { echo "$0: needs python3.12 (fastabx requires Python >= 3.12); set PYTHON312" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "install_peers.sh: creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
if ! "$venv/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  "${pip[@]}" install "torch==$torch_version"
fi
"${pip[@]}" install -c <(echo "torch==$torch_version") fastabx "torchaudio==$torch_version" numpy
# what speechkit's ABX tests import, to run them here (the Triton interpreter tests; the sm_90 compile test)
"${pip[@]}" install pytest scipy pyyaml kaldiio soundfile
"$venv/bin/python" - <<'PY'
import importlib, torch
import fastabx
print(f"install_peers.sh: OK (torch {torch.__version__}, fastabx {importlib.metadata.version('fastabx')}, "
      f"CUDA {'yes' if torch.cuda.is_available() else 'no'})")
PY
