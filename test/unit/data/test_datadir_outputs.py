"""Issue 23, outputs never overlap inputs: the data-dir tools (copy, subset, combine) refuse a
destination that is, contains or lies inside a source."""
from __future__ import annotations

from pathlib import Path

import pytest

from speechkit.bin import combine_data_dirs as combine_cli
from speechkit.bin import copy_data_dir as copy_cli
from speechkit.bin import subset_data_dir as subset_cli
from speechkit.data.datadir import DataDir


def _dir(path: Path, spk: str, n: int = 3) -> Path:
    utts = [f"{spk}_u{i}" for i in range(n)]
    DataDir(wav_scp={u: f"/corpus/{u}.wav" for u in utts}, utt2spk={u: spk for u in utts},
            text={u: "a b" for u in utts}).write(path)
    return path


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def src(tmp_path) -> Path:
    return _dir(tmp_path / "data" / "train", "spkA")


@pytest.mark.parametrize("tool", ["copy", "subset", "combine"])
@pytest.mark.parametrize("dest, why", [("data/train", "is"), ("data/train/sub", "lies inside"), ("data", "contains")])
def test_a_destination_overlapping_the_source_is_refused_and_nothing_written(src, tmp_path, capsys, tool, dest, why):
    """copy and combine wrote their tables into data/ (or data/train/sub) beside or inside the
    source; now every overlap is an error naming both, and nothing is written."""
    before = _tree(tmp_path)
    out = tmp_path / dest
    argv = {"copy": (copy_cli, [str(src), str(out)]), "subset": (subset_cli, ["--first", "2", str(src), str(out)]),
            "combine": (combine_cli, [str(out), str(src)])}
    cli, args = argv[tool]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert f"destination {out} {why} " in err and str(src) in err
    assert _tree(tmp_path) == before


def test_subset_destination_holding_its_list_is_refused(src, tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "utts").write_text("spkA_u1\n")
    assert subset_cli.main(["--utt-list", str(tmp_path / "sub" / "utts"), str(src), str(tmp_path / "sub")]) == 1
    assert "contains --utt-list" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["utts"]


def _run(tool: str, src, out, other) -> int:
    """copy-data-dir SRC OUT, subset-data-dir --first 2 SRC OUT, or combine-data-dirs OUT SRC OTHER."""
    if tool == "copy":
        return copy_cli.main([str(src), str(out)])
    if tool == "subset":
        return subset_cli.main(["--first", "2", str(src), str(out)])
    return combine_cli.main([str(out), str(src), str(other)])


@pytest.mark.parametrize("tool", ["copy", "subset", "combine"])
def test_an_existing_destination_keeps_what_other_tools_added(src, tmp_path, tool):
    """Data dirs are incremental (the recipes copy a dir, then compute features into it): an
    existing destination gets the new tables, stale tables are removed, features stay."""
    other = _dir(tmp_path / "other", "spkB")
    out = tmp_path / "out"
    _dir(out, "spkC")
    (out / "utt2lang").write_text("spkC_u0 en\n")
    (out / "data").mkdir()
    (out / "data" / "raw.1.ark").write_bytes(b"features")
    assert _run(tool, src, out, other) == 0
    assert set(DataDir.load(out).utt2spk.values()) == ({"spkA", "spkB"} if tool == "combine" else {"spkA"})
    assert not (out / "utt2lang").exists() and (out / "data" / "raw.1.ark").read_bytes() == b"features"


@pytest.mark.parametrize("tool", ["copy", "subset", "combine"])
def test_an_existing_destination_loses_the_extras_the_source_lacks(src, tmp_path, tool):
    """copy/subset/combine into a dir that had global CMVN stats (speechkit-compute-cmvn-stats on an
    earlier, smaller subset) kept that cmvn_global.ark: the dir then held 6 utterances and the stats
    of 3, and validate-data-dir passed. An extra file the source lacks is stale, like a stale table,
    and is removed; the source's own extras are still copied."""
    (src / "frame_shift").write_text("0.01\n")
    other = _dir(tmp_path / "other", "spkB")
    (other / "frame_shift").write_text("0.01\n")
    out = tmp_path / "out"
    _dir(out, "spkC")
    (out / "cmvn_global.ark").write_bytes(b"stats of other utterances")
    (out / "feats.yaml").write_text("type: mfcc\n")
    (out / "frame_shift").write_text("0.02\n")
    assert _run(tool, src, out, other) == 0
    assert not (out / "cmvn_global.ark").exists()
    assert not (out / "feats.yaml").exists()
    assert (out / "frame_shift").read_text() == "0.01\n"


def test_combine_removes_an_extra_the_sources_disagree_on(src, tmp_path):
    """"not copying it" (the sources' cmvn_global.ark differ) left the destination's old one in place."""
    other = _dir(tmp_path / "other", "spkB")
    (src / "cmvn_global.ark").write_bytes(b"stats A")
    (other / "cmvn_global.ark").write_bytes(b"stats B")
    out = tmp_path / "out"
    _dir(out, "spkC")
    (out / "cmvn_global.ark").write_bytes(b"stale stats")
    assert combine_cli.main([str(out), str(src), str(other)]) == 0
    assert not (out / "cmvn_global.ark").exists()
    (other / "cmvn_global.ark").write_bytes(b"stats A")
    assert combine_cli.main([str(out), str(src), str(other)]) == 0
    assert (out / "cmvn_global.ark").read_bytes() == b"stats A"
