#!/usr/bin/env bash
# Packs what a lent GPU machine lacks for test/bench/gpu_check.sh into one git-ignored folder (default gpu_carry/),
# small enough to travel with the working tree (a call carries 64 MiB in all): the machine has Python 3.12, torch
# with CUDA, numpy, pytest and numba, but no network, no kaldiio / soundfile (speechkit's tests import them), no
# fastabx (the ABX peer), and not ../shared (the TIMIT task's data).
#
#   ./tools/install.sh && ./tools/install_peers.sh      # once: the versions below are read from these venvs
#   test/bench/gpu_carry.sh [DIR]                        # ~2 minutes; prints the size and what to carry
#   # on the GPU machine, from the repository root:
#   CARRY=gpu_carry test/bench/gpu_check.sh budget       # see gpu_check.sh
#
# What it writes: DIR/wheels/ (cp312 manylinux wheels, no dependencies resolved there: installed with
# --no-deps), DIR/polars_runtime.tar.xz (polars' 50 MB runtime wheel, unpacked and xz-compressed: ~33 MB),
# DIR/abx_data.tar.xz (bench_abx.py's TIMIT features and items, made here), DIR/libspeechkit_abx.so (the ABX C
# kernels built here: loaded there only if that machine cannot build its own and the source is the same).
# Wheels are downloaded from the package registry (pip download), pinned to the versions installed here.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:-$repo/gpu_carry}
py=$repo/tools/venv/bin/python
peers=$repo/tools/venv-peers/bin/python
for p in "$py" "$peers"; do
  [ -x "$p" ] || { echo "$0: $p missing (run ./tools/install.sh and ./tools/install_peers.sh)" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# replaced only if empty or made by this script (its marker): never a folder of someone else's files
if [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/.gpu_carry" ]; then
  echo "$0: $dir is not empty and was not made by gpu_carry.sh: give an empty or new folder" >&2; exit 1
fi
case "$dir/" in  # inside the repository only where git ignores it (never committed by accident)
  "$repo"/*) (cd "$repo" && git check-ignore -q "$dir/x") || { echo "$0: $dir is not git-ignored" >&2; exit 1; } ;;
esac
version() { "$1" -c "import importlib.metadata as m; print(m.version('$2'))"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wheels"
specs=()
for name in fastabx polars polars-runtime-32 torchdtw; do specs+=("$name==$(version "$peers" "$name")"); done
for name in kaldiio soundfile cffi pycparser; do specs+=("$name==$(version "$py" "$name")"); done
echo "gpu_carry.sh: downloading ${specs[*]}"
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/wheels" "${specs[@]}"
# polars' runtime: a 50 MB wheel, carried unpacked and xz-compressed (what pip install --target would write)
rt=("$tmp"/wheels/polars_runtime_32-*.whl)
mkdir "$tmp/rt"
"$py" -m zipfile -e "${rt[0]}" "$tmp/rt"
rm "${rt[0]}"
tar -C "$tmp/rt" -cJf "$tmp/polars_runtime.tar.xz" .
# the TIMIT ABX task's features and items (bench_abx.py --prepare-only; the synthetic tasks are made there)
PYTHONPATH=$repo "$py" "$repo/test/bench/bench_abx.py" --tasks timit-any-across --prepare-only --workdir "$tmp/abx_data"
tar -C "$tmp/abx_data" -cJf "$tmp/abx_data.tar.xz" .
touch "$tmp/.gpu_carry"
if "$py" -m speechkit.scoring.abx.build_kernels --build >/dev/null; then
  cp "$repo/speechkit/scoring/abx/libspeechkit_abx.so" "$tmp/"
else
  echo "gpu_carry.sh: the ABX C library does not build here: not carried (the GPU machine builds its own or uses numba)" >&2
fi
rm -rf "$dir"
mkdir -p "$dir"
mv "$tmp/wheels" "$tmp/polars_runtime.tar.xz" "$tmp/abx_data.tar.xz" "$tmp/.gpu_carry" "$dir/"
[ -f "$tmp/libspeechkit_abx.so" ] && mv "$tmp/libspeechkit_abx.so" "$dir/"
size=$(du -sm "$dir" | cut -f1)
echo "gpu_carry.sh: $dir, $size MiB:"
ls -l "$dir" "$dir/wheels" | sed 's/^/  /'
[ "$size" -le 56 ] || echo "gpu_carry.sh: warning: over 56 MiB, with the working tree it may not fit a 64 MiB carry" >&2
echo "carry: [\"$(realpath --relative-to="$repo" "$dir")\"]   then: CARRY=$(realpath --relative-to="$repo" "$dir") test/bench/gpu_check.sh budget"
