#!/usr/bin/env bash
# Install everything speechkit needs, idempotently: a second run only checks.
#
#   ./tools/install.sh              # venv in tools/venv + Debian packages (espeak-ng, sox, slurm-wlm, munge)
#   ./tools/install.sh --no-system  # skip apt-get (e.g. no root); missing system packages are then reported
#
# Environment: PYTHON (default python3.11 or python3), SPEECHKIT_VENV (default tools/venv).
set -euo pipefail

system=true
for arg in "$@"; do
  case "$arg" in
    --no-system) system=false ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "$0: unknown option '$arg'" >&2; exit 1 ;;
  esac
done

tools_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$tools_dir")
venv=${SPEECHKIT_VENV:-$tools_dir/venv}
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
torch_version=2.13.0

# ---- Debian packages -------------------------------------------------------------------------
debs=(espeak-ng libespeak-ng1 sox slurm-wlm munge)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if $system && command -v apt-get >/dev/null; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "install.sh: apt-get install ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "install.sh: WARNING: Debian packages not installed: ${missing[*]}" >&2
    echo "install.sh: espeak-ng is required for the mini corpus and G2P; slurm-wlm/munge only for the Slurm tests." >&2
  fi
fi

# ---- Python virtualenv -----------------------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  echo "install.sh: creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# torch first and pinned: an unpinned resolver would pull the multi-GB CUDA build.
if ! "$venv/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  "${pip[@]}" install "torch==$torch_version"
fi
"${pip[@]}" install "setuptools<81" wheel
constraints="$tools_dir/constraints.txt"
echo "torch==$torch_version" > "$constraints.tmp" && echo "setuptools<81" >> "$constraints.tmp" && mv "$constraints.tmp" "$constraints"
# installed, and from this checkout (run from / so that the checkout's own folder is not what imports)
installed_from=$(cd / && "$venv/bin/python" -c "import os, speechkit; print(os.path.dirname(os.path.dirname(speechkit.__file__)))" 2>/dev/null || true)
if [ "$installed_from" != "$(cd "$root" && pwd -P)" ] \
   || [ "$root/setup.py" -nt "$venv/.speechkit-installed" ]; then
  "${pip[@]}" install -c "$constraints" -e "$root[test]"
  touch "$venv/.speechkit-installed"
fi
# ABX's C kernels (speechkit/scoring/abx/libspeechkit_abx.so, rebuilt when their source changed): without a C
# compiler ABX uses the numba kernels instead (the same scores; numba's start costs ~0.4 s per process)
if ! "$venv/bin/python" -m speechkit.scoring.abx.build_kernels >/dev/null 2>&1; then
  "$venv/bin/python" -m speechkit.scoring.abx.build_kernels --build \
    || echo "install.sh: warning: ABX's C kernels did not build (above); ABX uses numba's" >&2
fi

# ---- check -----------------------------------------------------------------------------------
"$venv/bin/python" - <<'PY'
import importlib, sys
mods = ["torch", "kaldiio", "sentencepiece", "librosa", "yaml", "numpy", "tqdm", "soundfile", "pyworld",
        "pysptk", "resemblyzer", "phonemizer", "jiwer", "matplotlib", "pytest", "kaldi_native_fbank", "speechkit"]
bad = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:  # report every broken module, not just the first
        bad.append(f"{m}: {e}")
if bad:
    sys.exit("install.sh: broken imports:\n  " + "\n  ".join(bad))
import torch
print(f"install.sh: OK (python {sys.version.split()[0]}, torch {torch.__version__})")
PY
