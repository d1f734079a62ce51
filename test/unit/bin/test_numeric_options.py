"""Out-of-range numeric options are argparse errors naming the option (exit 2), before anything is
read or written (issue 23 item 18): a zero, negative, NaN or infinite value where it means nothing."""
from __future__ import annotations

import pytest

from speechkit.bin import compute_feats, make_abx_items, prepare_corpus, score_bitrate, train, validate_data_dir


def _refused(capsys, main, argv, message):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].endswith(f"error: {message}"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("option, value, message", [
    ("--num-threads", "0", "must be >= 1, got 0"),  # was torch's RuntimeError traceback
    ("--max-jobs", "0", "must be >= 1, got 0"),  # was taken as the default
    ("--batch-seconds", "0", "must be > 0, got 0.0"),
    ("--batch-seconds", "nan", "must be a finite number, got 'nan'"),
    ("--nj", "0", "must be >= 1, got 0"),
    ("--job", "0", "must be >= 1, got 0"),
])
def test_compute_feats(tmp_path, capsys, repo_root, option, value, message):
    data = tmp_path / "data"
    _refused(capsys, compute_feats.main, ["--config", str(repo_root / "conf" / "mfcc.yaml"), option, value,
                                          str(data), str(tmp_path / "log"), str(tmp_path / "feats")],
             f"argument {option}: {message}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value, message", [
    ("nan", "must be a finite number, got 'nan'"),  # was taken: no item is shorter than NaN
    ("inf", "must be a finite number, got 'inf'"),  # was taken: every item dropped
    ("-1", "must be >= 0, got -1.0"),
])
def test_make_abx_items_min_duration(tmp_path, capsys, value, message):
    _refused(capsys, make_abx_items.main, [str(tmp_path / "ali"), str(tmp_path / "out.item"), "--min-duration", value],
             f"argument --min-duration: {message}")
    assert not (tmp_path / "out.item").exists()


@pytest.mark.parametrize("value, message", [("inf", "must be a finite number, got 'inf'"),  # was a bitrate of 0
                                            ("0", "must be > 0, got 0.0")])
def test_score_bitrate_frame_shift(tmp_path, capsys, value, message):
    _refused(capsys, score_bitrate.main, [str(tmp_path), "--frame-shift", value, "--json", str(tmp_path / "b.json")],
             f"argument --frame-shift: {message}")
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("value", ["0", "-16000"])
def test_validate_data_dir_sample_rate(tmp_path, capsys, value):
    """Was one 'has 16000 Hz, config expects 0 Hz' problem per recording."""
    _refused(capsys, validate_data_dir.main, ["--check-audio", "--sample-rate", value, str(tmp_path)],
             f"argument --sample-rate: must be >= 1, got {int(value)}")


def test_train_process_counts(tmp_path, capsys):
    """--nproc 0 / --ngpu -1 were already one-line errors naming the option (exit 1): kept."""
    for argv, message in ((["--nproc", "0"], "--nproc must be >= 1, got 0"),
                          (["--ngpu", "-1"], "--ngpu must be >= 0, got -1")):
        assert train.main([*argv, "salad", "--exp-dir", str(tmp_path / "exp")]) == 1
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"speechkit-train: error: {message}"
    assert not (tmp_path / "exp").exists()


def test_prepare_corpus_sample_rate(tmp_path, capsys):
    """Was refused only after the mini corpus had been synthesized into CORPUS_DIR."""
    (tmp_path / "corpus").mkdir()
    _refused(capsys, prepare_corpus.main,
             ["mini", str(tmp_path / "corpus"), str(tmp_path / "out"), "--sample-rate", "0"],
             "argument --sample-rate: must be >= 1, got 0")
    assert list((tmp_path / "corpus").iterdir()) == [] and not (tmp_path / "out").exists()
