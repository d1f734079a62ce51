"""The CPU kernels of :mod:`speechkit.scoring.abx` compiled from C (``kernels_c.c``), loaded with ctypes.

The same two kernels as :mod:`speechkit.scoring.abx.kernels_numba` (numba), the same computations in the same order,
so the same bits: :func:`dtw_strided` (and its padded-batch form :func:`dtw_block`) and :func:`count_cells`, with
the same arguments. What differs is the start: loading this library takes about a millisecond, where numba's
first kernel call in a process costs 0.3-0.45 s (its typing and lowering registries, and the scipy import it
makes to find a BLAS) and importing numba another 0.3 s. ``backend="auto"`` uses these kernels where the library
is built and current, numba's otherwise; ``backend="c"`` requires them.

The library is built next to this file by ``tools/install.sh``, or by hand::

    python -m speechkit.scoring.abx.build_kernels --build [--cc gcc]

with ``-O2 -ffp-contract=off`` (no fused multiply-add, no reassociation: IEEE arithmetic in source order). It
records the sha256 of the source it was built from; a library built from another version of the source is not
loaded (:func:`load` says why in the log), so an edit of the C file never runs stale code.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from speechkit.scoring.abx.kernel_threads import padded_dtw, run_tasks

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels_c.c")
LIBRARY = Path(__file__).with_name("libspeechkit_abx.so")  # not "<module>.so": Python would import that
CFLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-std=c99")

def source_hash() -> str:
    """sha256 (hex) of ``kernels_c.c`` as it is now (read again when the file changes)."""
    return _sha256(str(SOURCE), _identity(SOURCE))


@functools.lru_cache(maxsize=8)
def _sha256(path: str, identity: tuple[int, int, int, int] | None) -> str:
    """sha256 (hex) of the file ``path`` (its ``identity``: a key of this cache, not read)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build(cc: str | None = None, out: Path = LIBRARY) -> Path:
    """Compile ``kernels_c.c`` into the shared library ``out`` (written atomically: a failed build leaves an
    existing library as it was) and check that it loads and matches the source. Returns ``out``.

    Raises:
        RuntimeError: no C compiler (``cc``, ``$CC``, ``gcc`` or ``clang``), ``out``'s folder not writable, the
            compiler's error (its output quoted), or a library that does not load.
    """
    cc = cc or os.environ.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None or shutil.which(cc) is None:
        raise RuntimeError(f"no C compiler found (tried {cc or 'cc, gcc, clang'}; set CC)")
    out = Path(out)
    try:
        fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=out.parent)
    except OSError as e:
        raise RuntimeError(f"cannot write the library next to {out}: {e}") from None
    os.close(fd)
    try:
        want = source_hash()
        cmd = [cc, *CFLAGS, f'-DSK_SOURCE_HASH="{want}"', str(SOURCE), "-o", tmp, "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.strip()}")
        lib, why = _open(Path(os.path.abspath(tmp)), want)
        if lib is None:
            raise RuntimeError(why)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


class CKernels:
    """The kernels of one loaded library (what :func:`load` returns): the functions of
    :mod:`speechkit.scoring.abx.kernels_numba` with the same arguments, outputs and bits, as methods."""

    run_tasks = staticmethod(run_tasks)  # the pool both kernel sets use

    def __init__(self, lib: ctypes.CDLL):
        i64, f64 = np.ctypeslib.ndpointer(np.int64, flags="C"), np.ctypeslib.ndpointer(np.float64, flags="C")
        lib.sk_dtw_strided.argtypes = [f64, i64, i64, i64, i64, i64, ctypes.c_int64, f64, i64, i64]
        lib.sk_dtw_strided.restype = ctypes.c_int
        lib.sk_count_cells.argtypes = [ctypes.c_int64, ctypes.c_int64, f64] + [i64] * 9 + [ctypes.c_int64, i64, i64]
        lib.sk_count_cells.restype = ctypes.c_int
        lib.sk_sort_doubles.argtypes = [f64, ctypes.c_int64]
        lib.sk_sort_doubles.restype = None
        self.lib = lib

    def dtw_strided(self, flat, base, row_stride, col_stride, n_rows, n_cols, total, len_rc, len_cr) -> None:
        """:func:`speechkit.scoring.abx.kernels_numba.dtw_strided` (same arguments, same outputs, the same bits).
        Every array C-contiguous: ``flat``, ``total`` float64, the others int64 (ctypes raises ``ArgumentError``
        otherwise).

        Raises:
            ValueError: the per-pair arrays differ in length, or a pair's entries lie outside ``flat``.
            MemoryError: no memory for the two rows of work.
        """
        bsz = len(base)
        if not all(len(a) == bsz for a in (row_stride, col_stride, n_rows, n_cols, total, len_rc, len_cr)):
            raise ValueError("dtw_strided: the per-pair arrays differ in length")
        if bsz == 0:
            return
        if (n_rows < 1).any() or (n_cols < 1).any():
            raise ValueError("dtw_strided: a token of no frame")
        last = base + (n_rows - 1) * row_stride + (n_cols - 1) * col_stride
        if base.min() < 0 or last.max() >= len(flat) or (last < 0).any():
            raise ValueError("dtw_strided: a pair's frame distances lie outside flat")
        _check("dtw_strided", self.lib.sk_dtw_strided(flat, base, row_stride, col_stride, n_rows, n_cols, bsz,
                                                       total, len_rc, len_cr))

    def dtw_block(self, dist, n_rows, n_cols, total, len_rc, len_cr) -> None:
        """:meth:`dtw_strided` of a padded batch: ``dist`` (B, N, M) float64, C-contiguous; same outputs."""
        padded_dtw(self.dtw_strided, dist, n_rows, n_cols, total, len_rc, len_cr)

    def count_cells(self, g0, g1, dflat, ctx_off, ctx_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr, x_pool, x_cell,
                    within, wins, ties) -> None:
        """:func:`speechkit.scoring.abx.kernels_numba.count_cells` (same arguments; adds to ``wins`` and ``ties``).
        Arrays C-contiguous, ``dflat`` float64, the others int64; the indices are trusted (abx_error builds them).

        Raises:
            MemoryError: no memory for the sort buffer.
        """
        if g1 <= g0:
            return
        _check("count_cells", self.lib.sk_count_cells(g0, g1, dflat, ctx_off, ctx_w, a_ptr, a_pool, b_ptr, b_pool,
                                                       x_ptr, x_pool, x_cell, int(bool(within)), wins, ties))

    def sort_doubles(self, values: np.ndarray) -> None:
        """Sort a C-contiguous float64 array in place with the kernel's sort (NaN last, as numpy): for tests."""
        self.lib.sk_sort_doubles(values, len(values))

    @staticmethod
    def warm_up_in_background() -> None:
        """Nothing to warm up (numba's kernels load in a thread; these are loaded): None, which abx_error skips."""
        return None


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """``(device, inode, size, mtime in ns)`` of ``path``, None where it does not exist: a rebuilt library is
    another file (:func:`build` replaces it)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _loaded(path: str, identity: tuple[int, int, int, int] | None, want: str) -> tuple[CKernels | None, str]:
    """``(kernels, "")`` of the library at ``path`` (the file ``identity``: a key of this cache, not read) where it
    loads and was built from the source of sha256 ``want``, else ``(None, why)``, the reason logged at debug level.
    One load per library file and source version in a process."""
    if identity is None:
        lib, why = None, f"{path} is not built (python -m speechkit.scoring.abx.build_kernels --build)"
    else:
        lib, why = _open(Path(path), want)
    if lib is None:
        logger.debug("ABX C kernels not used: %s", why)
        return None, why
    return CKernels(lib), ""


def load() -> CKernels | None:
    """The kernels of the library next to this file (:data:`LIBRARY`), or None where it is missing, does not
    load, or was built from another version of the source (the reason in :func:`why_not`)."""
    return _loaded(str(LIBRARY), _identity(LIBRARY), source_hash())[0]


def _open(path: Path, want: str) -> tuple[ctypes.CDLL | None, str]:
    """``(library, "")`` where ``path`` loads and was built from the source of sha256 ``want``, else
    ``(None, why)``."""
    try:
        lib = ctypes.CDLL(str(path))
        lib.sk_source_hash.restype = ctypes.c_char_p
        built_from = lib.sk_source_hash().decode()
    except (OSError, AttributeError) as e:
        return None, f"{path} does not load ({e})"
    if built_from != want:
        return None, f"{path} was built from another version of {SOURCE.name}: rebuild it"
    return lib, ""


def why_not() -> str:
    """Why :func:`load` returns None ("" where it loads)."""
    return _loaded(str(LIBRARY), _identity(LIBRARY), source_hash())[1]


def available() -> bool:
    """Whether :func:`load` gives the kernels."""
    return load() is not None


def _check(name: str, rc: int) -> None:
    if rc != 0:
        raise MemoryError(f"{name}: out of memory for its work buffers")


def _kernels() -> CKernels:
    kernels = load()
    if kernels is None:
        raise RuntimeError(f"the ABX C kernels are not available: {why_not()}")
    return kernels


# the kernels as module functions, as kernels_numba has them (each call looks the library up: abx_error uses the
# CKernels object of load() instead)
def dtw_strided(flat, base, row_stride, col_stride, n_rows, n_cols, total, len_rc, len_cr) -> None:
    """:meth:`CKernels.dtw_strided` of :func:`load`'s kernels (RuntimeError where there are none)."""
    _kernels().dtw_strided(flat, base, row_stride, col_stride, n_rows, n_cols, total, len_rc, len_cr)


def dtw_block(dist, n_rows, n_cols, total, len_rc, len_cr) -> None:
    """:meth:`CKernels.dtw_block` of :func:`load`'s kernels (RuntimeError where there are none)."""
    _kernels().dtw_block(dist, n_rows, n_cols, total, len_rc, len_cr)


def count_cells(g0, g1, dflat, ctx_off, ctx_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr, x_pool, x_cell, within, wins,
                ties) -> None:
    """:meth:`CKernels.count_cells` of :func:`load`'s kernels (RuntimeError where there are none)."""
    _kernels().count_cells(g0, g1, dflat, ctx_off, ctx_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr, x_pool, x_cell,
                           within, wins, ties)


def sort_doubles(values: np.ndarray) -> None:
    """:meth:`CKernels.sort_doubles` of :func:`load`'s kernels (RuntimeError where there are none): for tests."""
    _kernels().sort_doubles(values)
