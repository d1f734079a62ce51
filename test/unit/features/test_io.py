"""speechkit.features.io: the scp of an ark written elsewhere, the files an scp reads, the one scp reader."""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest

from speechkit.features.io import FeatureReader, ScpReader, ark_scp_writer, scp_files
from speechkit.utils.fileio import DataError


def test_scp_ark_names_the_final_location_of_an_ark_written_elsewhere(tmp_path):
    tmp, final = tmp_path / ".out.tmp", tmp_path / "out"
    with ark_scp_writer(tmp / "feats.ark", tmp / "feats.scp", scp_ark=final / "feats.ark") as w:
        w("u1", np.ones((2, 3), np.float32))
    assert (tmp / "feats.scp").read_text().startswith(f"u1 {final / 'feats.ark'}:")
    tmp.rename(final)
    np.testing.assert_array_equal(kaldiio.load_scp(str(final / "feats.scp"))["u1"], np.ones((2, 3)))


def test_scp_files_lists_each_file_once_without_offsets_and_commands(tmp_path):
    scp = tmp_path / "x.scp"
    scp.write_text("a /d/y.ark:12\nb /d/y.ark:99\nc z.ark:3[0:2]\nd sox a.wav -t wav - |\ne plain.wav\n")
    assert scp_files(scp) == [Path("/d/y.ark"), Path("z.ark"), Path("plain.wav")]


# ------------------------------------------------------------------ ScpReader: the one reader of an scp of matrices

def _scp(tmp_path, mats: dict, name="feats") -> Path:
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / name}.ark,{tmp_path / name}.scp") as w:
        for k, m in mats.items():
            w(k, m)
    return tmp_path / f"{name}.scp"


def test_scp_reader_reads_each_entry_as_stored_and_checks_it(tmp_path):
    good = np.arange(6, dtype=np.float32).reshape(3, 2)
    scp = _scp(tmp_path, {"b": good, "a": np.arange(4, dtype=np.float32), "c": np.zeros((0, 2), np.float32),
                          "d": np.array([[1, 2], [3, np.inf]], np.float32), "e": good.astype(np.float64)})
    r = ScpReader(scp, what="features")
    assert r.utts == r.keys() == list(r) == ["a", "b", "c", "d", "e"] and len(r) == 5 and "b" in r
    assert list(r.table) == ["b", "a", "c", "d", "e"] and r.source("b") == f"{scp}[b]"
    assert r.read("b").dtype == np.float32 and r.read("e").dtype == np.float64  # as stored
    np.testing.assert_array_equal(r.read("b"), good)
    assert r.load("b").dtype == np.float64 and np.array_equal(r.load("b"), good)
    assert r.matrix("a", vector_as_column=True).shape == (4, 1)
    with pytest.raises(DataError, match=rf"{scp}: 'a': expected a \(frames, dim\) matrix, got shape \(4,\)"):
        r.matrix("a")
    assert r.matrix("c").shape == (0, 2)
    with pytest.raises(DataError, match=r"'c': expected a non-empty \(frames, dim\) matrix, got shape \(0, 2\)"):
        r.load("c")
    with pytest.raises(DataError, match=r"'b': 2 columns, expected 3 \(model.output_dim\)"):
        r.matrix("b", dim=3, dim_of="model.output_dim")
    assert np.isinf(r.matrix("d")).any()  # finite only when asked
    with pytest.raises(DataError, match=rf"{scp}: 'd': NaN or Inf in frame 1"):
        r.matrix("d", finite=True)
    m = r.matrix("b", np.float32, copy=True)
    m[0, 0] = 7.0  # a copy is writable
    with pytest.raises(DataError, match=rf"{scp}: no features for 'zz'"):
        r.read("zz")
    (tmp_path / "feats.ark").unlink()
    with pytest.raises(DataError, match=rf"{scp}: 'b': cannot read {tmp_path / 'feats.ark'}:\d+"):
        r.read("b")
    with pytest.raises(FileNotFoundError, match="nope.scp: no labels here"):
        ScpReader(tmp_path / "nope.scp", missing="no labels here")


def test_scp_reader_parses_as_every_table_reader_does(tmp_path, caplog):
    """One parser (read_table): a byte-order mark is dropped with a warning, so the first entry is found
    (kaldiio.load_scp kept it in the first key: FeatureReader could not read it), and a duplicate key is an
    error naming its line (kaldiio.load_scp kept the last one)."""
    mats = {"u1": np.ones((2, 3), np.float32), "u2": np.zeros((4, 3), np.float32)}
    scp = _scp(tmp_path, mats)
    data = tmp_path / "data"
    data.mkdir()
    (data / "feats.scp").write_bytes(b"\xef\xbb\xbf" + scp.read_bytes())
    with caplog.at_level("WARNING"):
        np.testing.assert_array_equal(FeatureReader(data)["u1"], mats["u1"])
    assert "byte-order mark" in caplog.text
    lines = scp.read_text().splitlines()
    (data / "feats.scp").write_text("\n".join(lines + lines[:1]) + "\n")
    for read, path in ((FeatureReader, data), (ScpReader, data / "feats.scp")):
        with pytest.raises(DataError, match=r"feats.scp:3: duplicate key 'u1' \(first on line 1\)"):
            read(path)
