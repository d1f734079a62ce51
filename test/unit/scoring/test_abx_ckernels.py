"""ABX's C kernels (speechkit.scoring.abx.kernels_c): numba's bits, the library's build and its refusal of a stale
build, and the ``c`` backend. The DTW kernel's tests against torch and the brute force are in test_abx.py (run for
both kernel sets)."""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest

from speechkit.scoring.abx import abx_error, build_kernels, dispatch
from speechkit.scoring.abx import kernels_c as C

from test_abx import MODES, synthetic  # test/unit/scoring is on sys.path (rootdir imports), as in test_abx_report

needs_c = pytest.mark.skipif(not C.available(), reason=f"needs the C kernels: {C.why_not()}")
needs_cc = pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")


@needs_c
def test_sort_is_numpys_order():
    """The count kernel's sort against np.sort: ties, -0.0 and NaN (last, as numpy), around the insertion sort's
    size (16) and well above."""
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 15, 16, 17, 40, 1000, 4097):
        for kind in ("normal", "few values", "constant", "nan"):
            v = {"normal": rng.normal(size=n), "few values": rng.integers(0, 3, size=n).astype(float),
                 "constant": np.full(n, 1.5), "nan": rng.normal(size=n)}[kind]
            if kind == "nan" and n:
                v[rng.random(n) < 0.2] = np.nan
                v[rng.random(n) < 0.2] = -0.0
            w = v.copy()
            C.sort_doubles(w)
            assert np.array_equal(np.sort(v), w, equal_nan=True), (n, kind)


def _count_inputs(rng, n_groups=40, within=False):
    """Random cell groups over a few random contexts, distances with ties (and a NaN), as abx_error lays them out."""
    widths = rng.integers(2, 12, size=5)
    ctx_off = np.concatenate([[0], np.cumsum(widths * widths)[:-1]]).astype(np.int64)
    dflat = rng.integers(0, 4, size=int((widths * widths).sum())).astype(float)
    dflat[rng.integers(0, len(dflat))] = np.nan
    g_ctx = rng.integers(0, 5, size=n_groups)
    parts = {k: [] for k in "abx"}
    for g in range(n_groups):
        w = widths[g_ctx[g]]
        for k in "abx":
            parts[k].append(rng.integers(0, w, size=int(rng.integers(1, 7))).astype(np.int64))
    ptr = {k: np.concatenate([[0], np.cumsum([len(p) for p in parts[k]])]).astype(np.int64) for k in "abx"}
    pool = {k: np.concatenate(parts[k]) for k in "abx"}
    n_cells = 3 * n_groups
    x_cell = rng.integers(0, n_cells, size=len(pool["x"])).astype(np.int64)
    return (dflat, ctx_off[g_ctx].astype(np.int64), widths[g_ctx].astype(np.int64), ptr["a"], pool["a"], ptr["b"],
            pool["b"], ptr["x"], pool["x"], x_cell, within), n_cells


@needs_c
@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba")
@pytest.mark.parametrize("within", [False, True])
def test_count_cells_matches_numba(within):
    from speechkit.scoring.abx import kernels_numba as N

    rng = np.random.default_rng(3)
    for _ in range(20):
        args, n_cells = _count_inputs(rng, within=within)
        out_c = [np.zeros(n_cells, dtype=np.int64) for _ in range(2)]
        out_n = [np.zeros(n_cells, dtype=np.int64) for _ in range(2)]
        C.count_cells(0, 40, *args, *out_c)
        C.count_cells(40, 40, *args, *out_c)  # an empty range adds nothing
        N.count_cells(0, 40, *args, *out_n)
        assert out_c[0].tolist() == out_n[0].tolist() and out_c[1].tolist() == out_n[1].tolist()
        assert out_c[0].sum() > 0 and out_c[1].sum() > 0  # ties happen (4 distinct values)


@needs_c
def test_dtw_refuses_bad_arrays():
    f, z = np.zeros(4), np.zeros(1, dtype=np.int64)
    one = np.ones(1, dtype=np.int64)
    out = (np.empty(1), np.empty(1, dtype=np.int64), np.empty(1, dtype=np.int64))
    with pytest.raises(ValueError, match="outside flat"):
        C.dtw_strided(f, z, 2 * one, one, 2 * one, 3 * one, *out)  # entry [1, 2] at 4, past flat's 4 values
    with pytest.raises(ValueError, match="differ in length"):
        C.dtw_strided(f, z, one, one, one, one, np.empty(2), *out[1:])
    with pytest.raises(Exception, match="array must have data type int64|argument"):
        C.dtw_strided(f, z.astype(np.int32), one, one, one, one, *out)  # ctypes' type check
    C.dtw_strided(f, z, 2 * one, one, 2 * one, 2 * one, *out)
    assert out[0][0] == 0.0 and out[1][0] == 2


@needs_c
@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba")
@pytest.mark.parametrize("distance,kind", [("cosine", "cont"), ("kl", "pos"), ("hamming", "onehot")])
def test_c_and_numba_backends_give_the_same_bits(distance, kind):
    """backend c against numba, tiles and batches as abx_error makes them: the same scores to the bit."""
    feats, items = synthetic(9, kind=kind, n_spk=3, n_utt=2, dur=0.5)
    for mode in MODES:
        for convention in ("zr2019", "zr2021"):
            kw = dict(mode=mode, distance=distance, convention=convention, num_threads=2, max_batch_elements=3000)
            a = abx_error(feats, items, backend="numba", **kw)
            b = abx_error(feats, items, backend="c", **kw)
            assert (a.error, a.n_triplets, a.n_cells) == (b.error, b.n_triplets, b.n_cells)
            assert [p.error for p in a.by_phone_pair] == [p.error for p in b.by_phone_pair]


@needs_c
def test_auto_prefers_the_c_kernels(monkeypatch):
    """Under auto a task past the small-task limits runs the C kernels, and never imports numba's."""
    seen = []
    real = dispatch.load_kernels
    monkeypatch.setattr(dispatch, "load_kernels", lambda backend: seen.append(real(backend)) or seen[-1])
    monkeypatch.setattr(dispatch, "NUMBA_MIN_PAIRS", 0)
    monkeypatch.setattr(dispatch, "NUMBA_MIN_TRIPLETS", 0)
    feats, items = synthetic(9, n_spk=3, n_utt=2, dur=0.5)
    abx_error(feats, items)
    assert seen == [C.load()] and isinstance(seen[0], C.CKernels)


def test_backend_c_without_the_library_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(C, "LIBRARY", tmp_path / "libspeechkit_abx.so")  # not built there
    feats, items = synthetic(9, n_spk=3, n_utt=2, dur=0.3)
    assert C.load() is None and "build_kernels --build" in C.why_not()
    with pytest.raises(ValueError, match="backend 'c': .*libspeechkit_abx.so is not built"):
        abx_error(feats, items, backend="c")
    with pytest.raises(ValueError, match="backend 'c' runs on the CPU"):
        abx_error(feats, items, backend="c", device="cuda")
    if importlib.util.find_spec("numba") is not None:  # auto falls back to numba's kernels: the same score
        monkeypatch.setattr(dispatch, "NUMBA_MIN_PAIRS", 0)
        monkeypatch.setattr(dispatch, "NUMBA_MIN_TRIPLETS", 0)
        assert abx_error(feats, items).error == abx_error(feats, items, backend="numba").error


@needs_cc
def test_build_writes_a_library_that_reports_its_source(tmp_path):
    out = C.build(out=tmp_path / "lib.so")
    import ctypes

    lib = ctypes.CDLL(str(out))
    lib.sk_source_hash.restype = ctypes.c_char_p
    assert lib.sk_source_hash().decode() == C.source_hash()
    assert [p.name for p in tmp_path.iterdir()] == ["lib.so"]  # no temporary file left


@needs_cc
def test_a_library_built_after_a_failed_load_is_loaded(tmp_path, monkeypatch):
    """load() is a cache keyed by the library file and the source's sha256, with no module state to reset: a
    library missing at one call and put in place before the next (by another process: tools/install.sh) is loaded
    then. The module dict of the old _abx_ckernels kept the first answer for the life of the process."""
    (tmp_path / "elsewhere").mkdir()
    built = C.build(out=tmp_path / "elsewhere" / "lib.so")  # what the other process will put in place
    monkeypatch.setattr(C, "LIBRARY", tmp_path / "libspeechkit_abx.so")
    assert C.load() is None and "is not built" in C.why_not()
    os.replace(built, C.LIBRARY)
    assert isinstance(C.load(), C.CKernels) and C.why_not() == "" and C.load() is C.load()


def test_failed_build_leaves_the_library_as_it_was(tmp_path):
    out = tmp_path / "lib.so"
    out.write_bytes(b"the previous build")
    with pytest.raises(RuntimeError, match="failed"):
        C.build(cc=shutil.which("false") or "false", out=out)
    assert out.read_bytes() == b"the previous build" and [p.name for p in tmp_path.iterdir()] == ["lib.so"]
    with pytest.raises(RuntimeError, match="no C compiler"):
        C.build(cc="no-such-compiler-anywhere", out=out)
    with pytest.raises(RuntimeError, match="cannot write the library next to"):
        C.build(cc=shutil.which("false") or "false", out=tmp_path / "no-such-folder" / "lib.so")


@needs_c
def test_a_library_built_from_another_source_is_not_loaded(monkeypatch):
    """The library records the sha256 of the source it was built from: after an edit of the C file it is refused
    (and auto falls back to numba's kernels) until rebuilt."""
    monkeypatch.setattr(C, "source_hash", lambda: "0" * 64)
    assert C.load() is None and "another version" in C.why_not()
    assert build_kernels.main([]) == 1


@needs_c
def test_cli_reports_a_usable_library(capsys):
    assert build_kernels.main([]) == 0
    assert "usable" in capsys.readouterr().out
