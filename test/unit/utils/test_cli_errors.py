"""Errors a person can read (issue 12): an unwritable output is one line and exit 1, never a
traceback, and no result is printed before its files are known to be written."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from speechkit.bin import compute_cmvn_stats, compute_feats, fix_data_dir, score_wer, train
from speechkit.data.datadir import DataDir
from speechkit.utils.cli import ConfigError, run_main
from speechkit.utils.fileio import atomic_write, ensure_writable_dir

ROOT = os.geteuid() == 0


def _one_error_line(err: str, prog: str, path) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip() and " INFO " not in ln and " WARNING " not in ln]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: cannot write {path}"), err
    assert "Traceback" not in err


def test_run_main_turns_os_errors_into_one_line(capsys):
    def body():
        raise PermissionError(errno.EACCES, "Permission denied", "/x/y")
    assert run_main("speechkit-x", body) == 1
    assert capsys.readouterr().err == "speechkit-x: error: /x/y: Permission denied\n"


def test_atomic_write_and_ensure_writable_dir_name_the_path(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=f"cannot write {tmp_path}/file: Not a directory"):
        with atomic_write(tmp_path / "file" / "out") as f:
            f.write("x")
    with pytest.raises(OSError, match=f"cannot write {tmp_path}/file: Not a directory"):
        ensure_writable_dir(tmp_path / "file")
    assert ensure_writable_dir(tmp_path / "new" / "dir") == tmp_path / "new" / "dir"


@pytest.mark.skipif(ROOT, reason="root may write anywhere")
def test_permission_denied(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    with pytest.raises(OSError, match=f"cannot write {ro}: Permission denied"):
        ensure_writable_dir(ro)


def _data(tmp_path: Path) -> Path:
    return DataDir(wav_scp={"s-a": "/x.wav"}, utt2spk={"s-a": "s"}, text={"s-a": "hi"}).write(tmp_path / "d")


def test_compute_feats_log_dir_that_is_a_file(tmp_path, repo_root, capsys):
    data = _data(tmp_path)
    (tmp_path / "log").write_text("")
    rc = compute_feats.main(["--config", str(repo_root / "conf" / "mfcc.yaml"), str(data), str(tmp_path / "log")])
    assert rc == 1
    _one_error_line(capsys.readouterr().err, "speechkit-compute-feats", tmp_path / "log")


def test_compute_cmvn_stats_dir_that_is_a_file(tmp_path, capsys):
    data = _data(tmp_path)
    (tmp_path / "c").write_text("")
    assert compute_cmvn_stats.main(["--per-speaker", str(data), str(tmp_path / "c")]) == 1
    _one_error_line(capsys.readouterr().err, "speechkit-compute-cmvn-stats", tmp_path / "c")


def test_score_wer_prints_nothing_before_the_json_is_written(tmp_path, capsys):
    (tmp_path / "ref").write_text("u1 a b c\n")
    (tmp_path / "hyp").write_text("u1 a x c\n")
    (tmp_path / "blocker").write_text("")
    rc = score_wer.main([str(tmp_path / "ref"), str(tmp_path / "hyp"), "--json", str(tmp_path / "blocker" / "wer.json")])
    out, err = capsys.readouterr()
    assert rc == 1 and "%WER" not in out
    _one_error_line(err, "speechkit-score-wer", tmp_path / "blocker")


def test_train_exp_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "exp").write_text("")
    rc = train.main(["vqvae", "--exp-dir", str(tmp_path / "exp")])
    assert rc == 1
    _one_error_line(capsys.readouterr().err, "speechkit-train", tmp_path / "exp")


def test_fix_data_dir_unwritable_backup(tmp_path, capsys):
    data = _data(tmp_path)
    (data / "text").write_text("s-a hi\nzz extra\n")
    (data / ".backup").write_text("")             # a file where the backup dir goes
    assert fix_data_dir.main([str(data)]) == 1
    _one_error_line(capsys.readouterr().err, "speechkit-fix-data-dir", data / ".backup")


def test_split_overrides_own_options_values_and_flags():
    from speechkit.utils.cli import split_overrides

    own, ov = split_overrides(["task", "--exp_dir", "--odd-dir-name", "--verbose", "--model.dim", "-3",
                               "--trainer.lr=0.1", "x"], {"--exp-dir", "--verbose"}, flags={"--verbose"})
    assert own == ["task", "--exp_dir", "--odd-dir-name", "--verbose", "x"]
    assert ov == ["model.dim=-3", "trainer.lr=0.1"]
    with pytest.raises(ConfigError, match="override --model.dim needs a value"):
        split_overrides(["--model.dim"], set())


def test_bounded_argparse_types_name_the_option(capsys):
    """positive_int / nonnegative_int / nonnegative_float: argparse exits 2 naming the option and the value."""
    import argparse

    from speechkit.utils.cli import nonnegative_float, nonnegative_int, positive_float, positive_int
    parser = argparse.ArgumentParser(prog="speechkit-x")
    parser.add_argument("--nj", type=positive_int, default=1)
    parser.add_argument("--keep", type=nonnegative_int, default=0)
    parser.add_argument("--weight", type=nonnegative_float, default=0.0)
    parser.add_argument("--shift", type=positive_float, default=0.01)
    args = parser.parse_args(["--nj", "2", "--keep", "0", "--weight", "0", "--shift", "0.005"])
    assert (args.nj, args.keep, args.weight, args.shift) == (2, 0, 0.0, 0.005)
    for argv, msg in ((["--nj", "0"], "argument --nj: must be >= 1, got 0"),
                      (["--nj", "x"], "argument --nj: expected an integer, got 'x'"),
                      (["--keep", "-1"], "argument --keep: must be >= 0, got -1"),
                      (["--weight", "-0.5"], "argument --weight: must be >= 0, got -0.5"),
                      (["--weight", "nan"], "argument --weight: must be a finite number, got 'nan'"),
                      (["--shift", "0"], "argument --shift: must be > 0, got 0.0"),
                      (["--shift", "inf"], "argument --shift: must be a finite number, got 'inf'"),
                      (["--shift", "x"], "argument --shift: expected a number, got 'x'")):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        assert e.value.code == 2
        assert msg in capsys.readouterr().err
