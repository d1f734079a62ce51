"""ZeroSpeech 2019 bitrate: hand-worked cases, an independent reference, the CLI."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from speechkit.bin import score_bitrate as cli
from speechkit.scoring.bitrate import bitrate, entropy_bits, read_durations, read_file_list
from speechkit.utils.fileio import DataError


def four_symbols():
    # 8 frames: a x4, b x2, c x1, d x1 -> p = 1/2, 1/4, 1/8, 1/8
    # H = 1/2*1 + 1/4*2 + 2 * 1/8*3 = 1.75 bits; N = 8
    a, b, c, d = [1, 0], [0, 1], [1, 1], [0, 0]
    return {"u_1": np.array([a, b, a, c], float), "u_2": np.array([a, d, b, a], float)}


def test_four_symbols_by_hand():
    res = bitrate(four_symbols(), frame_shift=0.01)  # D = 8 * 0.01 s
    assert res.entropy == pytest.approx(1.75, abs=1e-12)
    assert res.n_frames == 8 and res.n_symbols == 4 and res.duration == pytest.approx(0.08)
    assert res.bitrate == pytest.approx(175.0, abs=1e-9)
    res = bitrate(four_symbols(), durations={"u_1": 0.05, "u_2": 0.05})  # N / D = 80 /s
    assert res.bitrate == pytest.approx(140.0, abs=1e-9) and res.duration_source == "durations"
    assert res.summary() == "bitrate: 140.00 bits/s"


def test_pooled_over_files_not_averaged():
    # each file alone has H = 0 (one symbol), pooled H = 1 bit
    feats = {"u_1": np.zeros((4, 1)), "u_2": np.ones((4, 1))}
    assert bitrate(feats, frame_shift=0.02).bitrate == pytest.approx(50.0)


def test_matches_independent_reference_on_random_codes():
    rng = np.random.default_rng(0)
    feats = {f"u_{k}": np.eye(16)[rng.integers(0, 16, rng.integers(5, 60))] for k in range(7)}
    durs = {u: len(m) * 0.01 + 0.013 for u, m in feats.items()}
    # ZeroSpeech's reader: every line a tuple of floats, counted in a dict
    counts = Counter(tuple(map(float, row)) for m in feats.values() for row in m)
    n = sum(counts.values())
    h = -sum(c / n * math.log(c / n, 2) for c in counts.values())
    assert bitrate(feats, durs).bitrate == pytest.approx(n * h / sum(durs.values()), rel=1e-12)
    assert entropy_bits(np.array(list(counts.values()))) == pytest.approx(h, rel=1e-12)


def test_negative_zero_is_the_same_symbol():
    feats = {"u_1": np.array([[0.0, 1.0], [-0.0, 1.0]])}
    assert bitrate(feats).n_symbols == 1


def test_errors():
    with pytest.raises(DataError, match="no duration for 'u_2'"):
        bitrate(four_symbols(), durations={"u_1": 1.0})
    with pytest.raises(DataError, match="NaN or Inf"):
        bitrate({"u_1": np.array([[np.nan]])})
    with pytest.raises(DataError, match="different dimensions"):
        bitrate({"u_1": np.zeros((2, 1)), "u_2": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="no feature files"):
        bitrate({})


def test_read_lists(tmp_path):
    f = tmp_path / "list"
    f.write_text("u_1.txt 1.5\nu_2 2.0\n")
    assert read_file_list(f) == (["u_1", "u_2"], {"u_1": 1.5, "u_2": 2.0})
    f.write_text("u_1\nu_2\n")
    assert read_file_list(f) == (["u_1", "u_2"], None)
    f.write_text("u_1 1.0\nu_2\n")
    with pytest.raises(DataError, match=r"list:2: some lines give a duration"):
        read_file_list(f)
    f.write_text("u_1 1.0\nu_1 2.0\n")
    with pytest.raises(DataError, match=r"list:2: duplicate"):
        read_file_list(f)
    f.write_text("u_1 -1\n")
    with pytest.raises(DataError, match=r"utt2dur|list:1: bad duration"):
        read_durations(f)


def _txt_dir(path, feats):
    path.mkdir()
    for u, m in feats.items():
        (path / f"{u}.txt").write_text("".join(" ".join(str(int(v)) for v in row) + "\n" for row in m))


def test_cli(tmp_path, capsys):
    _txt_dir(tmp_path / "f", four_symbols())
    assert cli.main([str(tmp_path / "f"), "--json", str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "bitrate: 175.00 bits/s"
    assert json.loads((tmp_path / "b.json").read_text())["n_symbols"] == 4
    (tmp_path / "utt2dur").write_text("u_1 0.05\nu_2 0.05\n")
    assert cli.main([str(tmp_path / "f"), "--durations", str(tmp_path / "utt2dur")]) == 0
    assert capsys.readouterr().out.strip().endswith("bitrate: 140.00 bits/s")
    (tmp_path / "f" / "frame_shift").write_text("0.02\n")
    (tmp_path / "list").write_text("u_1\n")  # 4 frames: a a b c -> H = 1.5; D = 4 * 0.02
    assert cli.main([str(tmp_path / "f"), "--file-list", str(tmp_path / "list")]) == 0
    assert capsys.readouterr().out.strip().endswith("bitrate: 75.00 bits/s")
    (tmp_path / "list").write_text("u_1.txt 0.1\nu_3.txt 0.1\n")
    assert cli.main([str(tmp_path / "f"), "--file-list", str(tmp_path / "list")]) == 1
    assert "'u_3' is not in" in capsys.readouterr().err
    (tmp_path / "f" / "u_2.txt").write_text("1 0\n1\n")
    assert cli.main([str(tmp_path / "f")]) == 1
    assert "u_2.txt:2: 1 numbers, expected 2" in capsys.readouterr().err
