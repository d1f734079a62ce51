"""CMVN stats (Kaldi format) by hand, apply-cmvn semantics, FeatureReader, the CLI."""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest

from speechkit.bin import compute_cmvn_stats as cli
from speechkit.data.datadir import DataDir
from speechkit.features.cmvn import accumulate_stats, apply_cmvn
from speechkit.features.cmvn_stats import compute_cmvn_stats
from speechkit.features.io import FeatureReader, ark_scp_writer, load_cmvn_stats
from speechkit.utils.fileio import DataError


def test_stats_by_hand():
    x = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 0.0]])
    expected = np.array([[9.0, -2.0, 3.0], [35.0, 20.0, 0.0]])
    np.testing.assert_array_equal(accumulate_stats(x), expected)
    # additive: stats of a union = sum of stats
    np.testing.assert_array_equal(accumulate_stats([x[:1], x[1:]]), expected)
    assert accumulate_stats([], dim=4).shape == (2, 5)
    with pytest.raises(ValueError, match="dimension"):
        accumulate_stats([x, np.zeros((2, 3))])


def test_apply_cmvn_matches_kaldi_definition():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(50, 4)).astype(np.float32)
    stats = accumulate_stats(x)
    y = apply_cmvn(x, stats)
    # Kaldi ApplyCmvn: mean = s0/n, var = s1/n - mean^2, y = (x - mean) / sqrt(var) (population var)
    np.testing.assert_allclose(y, (x - x.mean(0)) / x.std(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(apply_cmvn(x, stats, norm_vars=False), x - x.mean(0), atol=1e-5)
    assert y.dtype == np.float32
    # constant dimension: variance floored at 1e-20 (Kaldi), no NaN
    c = np.ones((5, 2), np.float32)
    assert np.isfinite(apply_cmvn(c, accumulate_stats(c))).all()
    with pytest.raises(ValueError, match="dimension 4"):
        apply_cmvn(np.zeros((3, 5), np.float32), stats)
    with pytest.raises(ValueError, match="insufficient"):
        apply_cmvn(x, np.zeros((2, 5)))


def _feature_dir(root: Path, utts: dict[str, tuple[str, np.ndarray]]) -> Path:
    """A data dir whose feats.scp holds the given matrices (utt -> (speaker, matrix))."""
    d = DataDir(utt2spk={u: s for u, (s, _) in utts.items()})
    path = d.write(root / "data")
    with ark_scp_writer(root / "feats.ark", path / "feats.scp") as w:
        for u in sorted(utts):
            w(u, utts[u][1])
    return path


@pytest.fixture
def feats_dir(tmp_path):
    rng = np.random.default_rng(1)
    utts = {f"a-{i}": ("a", rng.normal(1.0, 2.0, (10 + i, 3)).astype(np.float32)) for i in range(3)}
    utts |= {f"b-{i}": ("b", rng.normal(-5.0, 0.5, (7 + i, 3)).astype(np.float32)) for i in range(2)}
    return _feature_dir(tmp_path, utts), utts


def test_per_speaker_and_global_stats_and_reader(tmp_path, feats_dir):
    path, utts = feats_dir
    scp = compute_cmvn_stats(path, tmp_path / "cmvn", per_speaker=True)
    assert scp == path / "cmvn.scp"
    stats = load_cmvn_stats(scp)
    assert set(stats) == {"a", "b"}
    a = np.concatenate([m for u, (s, m) in sorted(utts.items()) if s == "a"]).astype(np.float64)
    np.testing.assert_allclose(stats["a"][0, :3], a.sum(0), rtol=1e-10)
    np.testing.assert_allclose(stats["a"][1, :3], (a ** 2).sum(0), rtol=1e-10)
    assert stats["a"][0, 3] == len(a) and stats["a"][1, 3] == 0
    assert kaldiio.load_mat(DataDir.load(path).cmvn_scp["a"]).dtype == np.float64  # Kaldi double stats

    r = FeatureReader(path, cmvn="speaker")
    assert r.keys() == sorted(utts) and len(r) == 5 and r.dim == 3 and "a-0" in r
    y = np.concatenate([r[u] for u in r if u.startswith("a")])
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(0), 1, atol=1e-5)
    assert r.num_frames("b-1") == 8  # no utt2num_frames: from the matrix
    # global from per-speaker stats = sum of them = global stats computed directly
    g1 = FeatureReader(path, cmvn="global")["b-0"]
    assert compute_cmvn_stats(path, tmp_path / "cmvn") == path / "cmvn_global.ark"  # not in cmvn.scp
    assert set(load_cmvn_stats(path / "cmvn.scp")) == {"a", "b"}
    g2 = FeatureReader(path, cmvn="global")["b-0"]
    np.testing.assert_allclose(g1, g2, rtol=1e-6)
    allf = np.concatenate([m for _, m in utts.values()]).astype(np.float64)
    np.testing.assert_allclose(g2, (utts["b-0"][1] - allf.mean(0)) / allf.std(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(FeatureReader(path)["b-0"], utts["b-0"][1])
    (path / "cmvn.scp").unlink()
    with pytest.raises(DataError, match="global stats only"):
        FeatureReader(path, cmvn="speaker")


def test_reader_errors(tmp_path, feats_dir):
    path, utts = feats_dir
    r = FeatureReader(path)
    with pytest.raises(DataError, match="feats.scp: no features for 'zz'"):
        r["zz"]
    (tmp_path / "feats.ark").unlink()
    with pytest.raises(DataError, match="'a-0': cannot read"):
        FeatureReader(path)["a-0"]
    with pytest.raises(FileNotFoundError, match="cmvn.scp"):
        FeatureReader(path, cmvn="global")
    with pytest.raises(FileNotFoundError, match="feats.scp"):
        FeatureReader(tmp_path)
    with pytest.raises(ValueError, match="cmvn must be"):
        FeatureReader(path, cmvn="utt")


def test_reader_missing_speaker_stats(tmp_path, feats_dir):
    path, _ = feats_dir
    compute_cmvn_stats(path, per_speaker=True)
    lines = [ln for ln in (path / "cmvn.scp").read_text().splitlines() if not ln.startswith("b ")]
    (path / "cmvn.scp").write_text("\n".join(lines) + "\n")
    r = FeatureReader(path, cmvn="speaker")
    r["a-0"]
    with pytest.raises(DataError, match="no stats for speaker 'b' .utterance 'b-0'"):
        r["b-0"]


def test_cli(tmp_path, feats_dir, capsys):
    path, _ = feats_dir
    assert cli.main(["--per-speaker", str(path), str(tmp_path / "c")]) == 0
    assert len(list((tmp_path / "c").glob("cmvn_data_*.ark"))) == 1   # data dir name + hash of its path
    assert set(DataDir.load(path).cmvn_scp) == {"a", "b"}
    (path / "feats.scp").write_text("a-0 " + (path / "feats.scp").read_text().split(" ", 1)[1].splitlines()[0] + "\n")
    assert cli.main([str(path)]) == 1
    assert "no features for 4 utterance(s)" in capsys.readouterr().err


def test_a_recompute_never_changes_what_an_older_cmvn_scp_reads(tmp_path, feats_dir):
    """The per-speaker ark is named by its content: after the features change and the stats are
    recomputed, the backed-up or copied cmvn.scp still reads the stats it was made with."""
    import kaldiio

    from speechkit.data.copy_data_dir import copy_data_dir

    path, _ = feats_dir
    compute_cmvn_stats(path, per_speaker=True)
    copy_data_dir(path, tmp_path / "copy")
    old = {k: np.array(v) for k, v in kaldiio.load_scp(str(tmp_path / "copy" / "cmvn.scp")).items()}
    # other features for speaker a: its stats change
    d = DataDir.load(path)
    keep = {u: loc for u, loc in d.feats_scp.items() if not u.startswith("a-")}
    first_b = next(iter(keep.values()))
    d.feats_scp = {u: (first_b if u.startswith("a-") else loc) for u, loc in d.feats_scp.items()}
    d.write(path)
    compute_cmvn_stats(path, per_speaker=True)
    new = kaldiio.load_scp(str(path / "cmvn.scp"))
    assert not np.array_equal(np.array(new["a"]), old["a"])
    again = kaldiio.load_scp(str(tmp_path / "copy" / "cmvn.scp"))
    assert all(np.array_equal(np.array(again[k]), v) for k, v in old.items())
    assert len(list((path / "data").glob("cmvn_*.ark"))) == 2


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("per_speaker", [True, False])
@pytest.mark.parametrize("where, why", [("data", "is"), (".", "contains")])
def test_cli_refuses_a_cmvn_dir_that_is_or_contains_the_data_dir(tmp_path, feats_dir, capsys, monkeypatch,
                                                                  per_speaker, where, why):
    """`--per-speaker data data` put cmvn_data_*.ark among the data dir's tables, and `data .` was
    accepted too: now an error naming CMVN_DIR and DATA_DIR, before anything is written."""
    path, _ = feats_dir
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    assert cli.main([*(["--per-speaker"] if per_speaker else []), "data", where]) == 1
    err = capsys.readouterr().err
    assert f"CMVN_DIR {where} {why} DATA_DIR data" in err, err
    assert _tree(tmp_path) == before


def test_cmvn_dir_inside_the_data_dir_is_still_allowed(tmp_path, feats_dir):
    """The default CMVN_DIR is DATA_DIR/data (Kaldi's layout); naming it, or another dir inside the
    data dir, is not an overlap."""
    path, _ = feats_dir
    assert compute_cmvn_stats(path, path / "data", per_speaker=True) == path / "cmvn.scp"
    assert len(list((path / "data").glob("cmvn_*.ark"))) == 1
    assert cli.main(["--per-speaker", str(path), str(path / "cmvn")]) == 0
    assert set(DataDir.load(path).cmvn_scp) == {"a", "b"}


@pytest.mark.parametrize("per_speaker", [True, False])
def test_an_empty_data_dir_is_an_error_naming_it(tmp_path, capsys, per_speaker):
    """--per-speaker on a data dir with an empty utt2spk exited 0 and wrote an empty cmvn.scp (and
    an empty ark in DATA_DIR/data); global stats were already an error. Now both name the data dir
    and write nothing."""
    path = tmp_path / "empty"
    path.mkdir()
    (path / "utt2spk").write_text("")
    (path / "feats.scp").write_text("")
    assert cli.main([*(["--per-speaker"] if per_speaker else []), str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: no utterances (utt2spk is empty)" in err, err
    assert sorted(p.name for p in path.iterdir()) == ["feats.scp", "utt2spk"]


def test_help_says_where_global_stats_go(capsys):
    """--help said global stats go to cmvn.scp under the key `global` in CMVN_DIR/cmvn_<data>.ark;
    they go to DATA_DIR/cmvn_global.ark (cmvn.scp is keyed by speaker only)."""
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    assert "by the single key `global`" not in out
    assert "global (default) one matrix in DATA_DIR/cmvn_global.ark" in out
    assert "may not be DATA_DIR or contain it" in out
