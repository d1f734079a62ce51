"""Feature dirs as users have them (issue 39, item 6): a leading timestamp column (ZeroSpeech 2017's
'time f1 f2 ...' lines), <utt>.npy files, and items naming several missing files."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.bin import score_abx as score_abx_cli
from speechkit.bin import score_bitrate as score_bitrate_cli
from speechkit.scoring.abx_items import Item, write_item_file
from speechkit.scoring.feature_dir import FeatureDir, first_column_step, load_item_features
from speechkit.utils.fileio import DataError


def _corpus(seed=3, n_spk=3, frames=40, dim=4):
    """Random features of 3 speakers x 2 utterances and ABX items over them (phones a/b/c, contexts x/y)."""
    rng = np.random.default_rng(seed)
    feats, items = {}, []
    for s in range(n_spk):
        for u in range(2):
            f = f"s{s}_u{u}"
            feats[f] = rng.normal(size=(frames, dim))
            t = 0.0
            while t < (frames - 2) * 0.01:
                d = int(rng.integers(2, 6)) * 0.01
                items.append(Item(f, round(t, 4), round(t + d, 4), str(rng.choice(["a", "b", "c"])),
                                  (str(rng.choice(["x", "y"])), "z"), f"s{s}", len(items) + 2))
                t += d
    return feats, items


def _write(d, feats, times=None, fmt="%.17g"):
    """<utt>.txt files; ``times(n)`` gives a first column to prepend."""
    d.mkdir()
    for utt, m in feats.items():
        np.savetxt(d / f"{utt}.txt", m if times is None else np.c_[times(len(m)), m], fmt=fmt)
    return d


def _item_file(path, items):
    write_item_file(path, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items])
    return path


def _last(capsys):
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_first_column_step():
    t = (np.arange(10) + 0.5) * 10.0
    assert first_column_step(np.c_[t, np.ones(10)]) == pytest.approx(10.0)
    assert first_column_step(np.c_[np.round(t / 1000 + 0.0075, 3), np.ones(10)]) == pytest.approx(0.01, rel=0.1)
    assert first_column_step(np.c_[t[::-1], np.ones(10)]) is None  # decreasing
    bumpy = t.copy()
    bumpy[5] += 4.0
    assert first_column_step(np.c_[bumpy, np.ones(10)]) is None  # not a constant step
    assert first_column_step(np.ones((1, 3))) is None


def test_score_abx_strips_a_timestamp_column(tmp_path, capsys):
    """Scored as a feature, a time column changed the ABX error (30.37 -> 39.82 % in the issue)."""
    feats, items = _corpus()
    item = _item_file(tmp_path / "abx.item", items)
    plain = _write(tmp_path / "plain", feats)
    ms = _write(tmp_path / "ms", feats, lambda n: (np.arange(n) + 0.5) * 10.0)  # centres in ms
    sec = _write(tmp_path / "sec", feats, lambda n: np.arange(n) * 0.02 + 0.0125, fmt="%.4f")  # 20 ms, 4 digits

    assert score_abx_cli.main([str(plain), str(item)]) == 0
    want = _last(capsys)
    assert score_abx_cli.main([str(ms), str(item)]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip().splitlines()[-1] == want
    assert f"WARNING speechkit.scoring.feature_dir: {ms}: the first column of every frame is its time" in cap.err
    assert "a step of 10 ms = the frame shift 0.01 s" in cap.err
    assert score_abx_cli.main([str(ms), str(item), "--timestamps", "yes", "--frame-shift", "0.01"]) == 0
    assert _last(capsys) == want
    assert score_abx_cli.main([str(ms), str(item), "--timestamps", "no"]) == 0
    assert _last(capsys) != want  # the old behaviour, now asked for

    # seconds, rounded, 20 ms: the step is the frame shift (the features' own at 20 ms)
    assert score_abx_cli.main([str(plain), str(item), "--frame-shift", "0.02"]) == 0
    want20 = _last(capsys)
    assert score_abx_cli.main([str(sec), str(item)]) == 0
    assert _last(capsys) == want20
    # a frame shift that the step is not, in s or ms: refused, naming the file and both numbers
    assert score_abx_cli.main([str(ms), str(item), "--frame-shift", "0.02"]) == 1
    err = capsys.readouterr().err
    assert "s0_u0.txt: the first column steps by 10" in err and "0.02" in err
    assert err.rstrip().endswith("say --timestamps no if it is a feature, or give the right --frame-shift")


def test_timestamps_refusals(tmp_path):
    feats, _ = _corpus()
    d = _write(tmp_path / "mixed", feats, lambda n: (np.arange(n) + 0.5) * 10.0)
    np.savetxt(d / "s2_u1.txt", feats["s2_u1"])  # one file without the column
    with pytest.raises(DataError, match=r"looks like timestamps in 5 of 6 files .* not in 1 .*s2_u1.txt"):
        FeatureDir(d).load_all()
    with pytest.raises(DataError, match=r"s2_u1.txt: the first column is not strictly increasing"):
        FeatureDir(d, timestamps="yes").load_all()
    assert FeatureDir(d, timestamps="no").load("s0_u0").shape == (40, 5)
    plain = _write(tmp_path / "plain", feats)
    with pytest.raises(DataError, match=r"not strictly increasing at a constant step: not timestamps \(timestamps=yes\)$"):
        FeatureDir(plain, timestamps="yes").load_all()  # the library names its parameter
    assert FeatureDir(plain).load_all()["s0_u0"].shape == (40, 4)  # auto: features as they are
    late = _write(tmp_path / "late", feats, lambda n: 1.0 + np.arange(n) * 0.01)
    with pytest.raises(DataError, match=r"timestamps start at 1 s.*not supported"):
        FeatureDir(late).load_all()
    with pytest.raises(ValueError, match="^timestamps must be one of auto, yes, no"):
        FeatureDir(plain, timestamps="maybe")


def test_score_bitrate_strips_a_timestamp_column(tmp_path, capsys):
    codes = {f"u{i}": np.eye(3)[np.random.default_rng(i).integers(0, 3, 30)] for i in range(3)}
    plain = _write(tmp_path / "plain", codes)
    stamped = _write(tmp_path / "stamped", codes, lambda n: (np.arange(n) + 0.5) * 40.0)  # 40 ms units
    assert score_bitrate_cli.main([str(plain), "--frame-shift", "0.04"]) == 0
    want = capsys.readouterr().out
    assert score_bitrate_cli.main([str(stamped)]) == 0  # the 40 ms step is the frame shift
    assert capsys.readouterr().out == want
    assert score_bitrate_cli.main([str(stamped), "--timestamps", "no"]) == 0
    out = capsys.readouterr().out  # the time makes symbols of one code: 68 instead of 3, and 10 ms frames
    assert "symbols: 3," in want and "duration: 3.60 s" in want
    assert "symbols: 68," in out and "duration: 0.90 s" in out


def test_npy_feature_dir(tmp_path, capsys):
    feats, items = _corpus()
    item = _item_file(tmp_path / "abx.item", items)
    npy = tmp_path / "npy"
    npy.mkdir()
    for utt, m in feats.items():
        np.save(npy / f"{utt}.npy", m.astype(np.float32))
    assert score_abx_cli.main([str(_write(tmp_path / "txt", {u: m.astype(np.float32) for u, m in feats.items()})),
                               str(item)]) == 0
    want = _last(capsys)
    assert FeatureDir(npy).kind == "npy"
    assert score_abx_cli.main([str(npy), str(item)]) == 0
    assert _last(capsys) == want
    np.save(npy / "s0_u0.npy", np.array([[1.0, np.nan]]))
    with pytest.raises(DataError, match=r"s0_u0.npy: NaN or Inf in frame 0"):
        FeatureDir(npy).load("s0_u0")
    (npy / "s0_u1.txt").write_text("1 2\n")
    with pytest.raises(DataError, match=r"both <utt>.txt \(1\) and <utt>.npy \(6\) feature files"):
        FeatureDir(npy)


def test_missing_files_are_all_counted(tmp_path):
    """The error named only the first of several missing files."""
    feats, items = _corpus()
    d = _write(tmp_path / "feats", {u: m for u, m in feats.items() if u.startswith("s0")})
    with pytest.raises(DataError) as e:
        load_item_features(d, items, "abx.item")
    msg = str(e.value)
    first = next(i for i in items if i.file == "s1_u0")
    assert msg.startswith(f"abx.item:{first.line}: item names 's1_u0', which is not in {d / 's1_u0.txt'}")
    assert "4 of the 6 files the items name are missing: 's1_u0' (line" in msg and "'s2_u1' (line" in msg


def test_score_bitrate_names_every_missing_file(tmp_path, capsys):
    d = _write(tmp_path / "f", {"u1": np.ones((3, 2))})
    (tmp_path / "list").write_text("u1\nu2\nu3\n")
    assert score_bitrate_cli.main([str(d), "--file-list", str(tmp_path / "list")]) == 1
    err = capsys.readouterr().err
    assert "'u2' is not in" in err and "2 of the 3 files are not in FEATURE_DIR: u2, u3" in err
    (tmp_path / "dur").write_text("u9 1.0\n")
    assert score_bitrate_cli.main([str(d), "--durations", str(tmp_path / "dur")]) == 1
    assert "no duration for 'u1'" in capsys.readouterr().err


def test_a_frame_counter_column_is_not_taken_for_ms_timestamps(tmp_path, capsys):
    """A first column counting frames (0 1 2 ... or 1 2 3 ...: a frame index) read as timestamps in ms: a 1 ms
    frame shift, so score-bitrate reported 10 times the bitrate with exit 0 (a warning only) and score-abx failed
    on an item 'beyond' each file. Without a known frame shift it is refused, asking which it is."""
    feats, _ = _corpus()
    for first in (0, 1):
        d = _write(tmp_path / f"index{first}", feats, times=lambda n: np.arange(n) + first, fmt="%g")
        assert score_bitrate_cli.main([str(d)]) == 1
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"speechkit-score-bitrate: error: {d}/s0_u0.txt: the first column counts frames "
                              f"({first} {first + 1} {first + 2} ..., as in every file)")
        with pytest.raises(DataError, match="counts frames"):
            FeatureDir(d).load_all()
        assert FeatureDir(d, timestamps="no").load_all()["s0_u0"].shape == (40, 5)  # said: a feature
        fd = FeatureDir(d, frame_shift=0.001)  # said: times in ms at 1 ms
        assert fd.load_all()["s0_u0"].shape == (40, 4) and fd.resolved_frame_shift() == 0.001
    ms = _write(tmp_path / "ms", feats, times=lambda n: (np.arange(n) + 0.5) * 10, fmt="%g")  # real ms times
    assert FeatureDir(ms).load_all()["s0_u0"].shape == (40, 4)
