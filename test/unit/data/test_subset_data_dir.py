"""speechkit.data.subset_data_dir and speechkit-subset-data-dir (Kaldi's subset_data_dir.sh)."""
from __future__ import annotations

import pytest
from test_datadir import ddir  # noqa: F401  (the data dir fixture: tests are not a package)

from speechkit.bin import subset_data_dir as subset_cli
from speechkit.data.datadir import DataDir
from speechkit.data.subset_data_dir import subset_data_dir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


@pytest.mark.parametrize("argv,expect", [
    (["--first", "3"], ["spkA_u00", "spkA_u01", "spkA_u02"]),
    (["--last", "2"], ["spkD_u00", "spkD_u01"]),
])
def test_subset_cli_first_last(ddir, tmp_path, argv, expect):
    out = tmp_path / "sub"
    assert subset_cli.main([*argv, str(ddir), str(out)]) == 0
    assert DataDir.load(out).utts == expect
    assert validate(out, no_feats=True) == []
    # Kaldi's argument order: --first SRC N DEST
    out2 = tmp_path / "sub2"
    assert subset_cli.main([argv[0], str(ddir), argv[1], str(out2)]) == 0
    assert DataDir.load(out2).utts == expect


def test_subset_lists_and_random(ddir, tmp_path):
    (tmp_path / "utts").write_text("spkC_u02 x\nspkB_u00\n")
    assert subset_cli.main(["--utt-list", str(tmp_path / "utts"), str(ddir), str(tmp_path / "u")]) == 0
    assert DataDir.load(tmp_path / "u").utts == ["spkB_u00", "spkC_u02"]
    (tmp_path / "spks").write_text("spkD\nspkA\n")
    assert subset_cli.main(["--spk-list", str(tmp_path / "spks"), str(ddir), str(tmp_path / "s")]) == 0
    assert set(DataDir.load(tmp_path / "s").utt2spk.values()) == {"spkA", "spkD"}
    assert len(DataDir.load(tmp_path / "s")) == 5
    # random: reproducible with the seed, N SRC DEST or SRC N DEST
    assert subset_cli.main(["4", str(ddir), str(tmp_path / "r1")]) == 0
    assert subset_cli.main([str(ddir), "4", str(tmp_path / "r2")]) == 0
    assert subset_cli.main(["--seed", "1", "4", str(ddir), str(tmp_path / "r3")]) == 0
    r1, r2, r3 = (DataDir.load(tmp_path / r).utts for r in ("r1", "r2", "r3"))
    assert r1 == r2 and len(r1) == 4 and r1 != r3
    for r in ("u", "s", "r1", "r3"):
        assert validate(tmp_path / r, no_feats=True) == []


def test_subset_errors(ddir, tmp_path):
    with pytest.raises(DataError, match="cannot take 11 utterances, there are only 10"):
        subset_data_dir(ddir, tmp_path / "x", first=11)
    with pytest.raises(ValueError, match="exactly one"):
        subset_data_dir(ddir, tmp_path / "x", first=1, last=1)
    assert subset_cli.main(["--first", "11", str(ddir), str(tmp_path / "x")]) == 1
    assert subset_cli.main(["--first", "2", str(ddir), str(ddir)]) == 1
    with pytest.raises(SystemExit):
        subset_cli.main([str(ddir), str(tmp_path / "x")])  # no mode
    assert not (tmp_path / "x").exists()


def test_subset_copies_frame_shift(ddir, tmp_path):
    (ddir / "frame_shift").write_text("0.01\n")
    subset_data_dir(ddir, tmp_path / "x", first=2)
    assert (tmp_path / "x" / "frame_shift").read_text() == "0.01\n"
