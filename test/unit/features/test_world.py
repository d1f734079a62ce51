"""WORLD features: F0 against a known contour, analysis -> synthesis -> analysis round trips."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.features.frontends import build_frontend
from speechkit.features.world import (
    WorldLayout, feature_streams, interpolate_log_f0, read_world_layout, stream_layout, world_streams, world_synthesize,
)
from speechkit.utils.fileio import DataError

SR = 16000


def _harmonic(seconds: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Harmonic signal (1/h amplitudes, 40 harmonics) whose F0 glides 120 -> 180 Hz; returns (x, f0)."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = 120 + 60 * t / seconds
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(np.where(h * f0 < SR / 2, 1.0 / h, 0.0) * np.sin(h * phase) for h in range(1, 40))
    return (0.3 * x / np.abs(x).max()).astype(np.float32), f0


def _mcd_db(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mel-cepstral distortion per frame, c1.. only (Kubichek 1993): 10/ln10 sqrt(2 sum (a-b)^2)."""
    return 10.0 / np.log(10) * np.sqrt(2 * ((a - b) ** 2).sum(axis=1))


def _round_trip(fe, x):
    s = world_streams(fe.config)
    f = fe(x)
    y = world_synthesize(f, fe.sample_rate, fe.config)
    assert y.dtype == np.float32 and abs(len(y) - len(x)) <= fe.sample_rate * fe.frame_shift * 2
    y = np.pad(y, (0, max(0, len(x) - len(y))))[: len(x)]
    g = fe(y)
    assert g.shape == f.shape
    voiced = (f[:, s["vuv"]][:, 0] > 0.5) & (g[:, s["vuv"]][:, 0] > 0.5)
    f0a, f0b = np.exp(f[voiced, s["lf0"]][:, 0]), np.exp(g[voiced, s["lf0"]][:, 0])
    return f, g, voiced, np.abs(f0a - f0b) / f0a


@pytest.mark.parametrize("method", ["dio", "harvest"])
def test_f0_of_known_contour_and_round_trip(method):
    x, f0_true = _harmonic()
    fe = build_frontend({"type": "world", "f0_method": method})
    f, g, voiced, f0_err = _round_trip(fe, x)
    assert f.shape == (fe.num_frames(len(x)), 43) == (201, fe.dim)
    s = world_streams(fe.config)
    times = np.arange(len(f)) * fe.frame_shift
    truth = np.interp(times, np.arange(len(x)) / SR, f0_true)
    est = np.exp(f[:, s["lf0"]][:, 0])
    vuv = f[:, s["vuv"]][:, 0]
    assert vuv.mean() > 0.95
    assert np.median(np.abs(est - truth) / truth) < 0.005
    assert voiced.mean() > 0.95 and np.median(f0_err) < 0.005 and np.percentile(f0_err, 90) < 0.02


def test_round_trip_on_real_speech(shared_data):
    import soundfile as sf

    x = sf.read(shared_data / "timit_sample" / "dr1-fvmh0" / "sa2.wav", dtype="float32")[0]
    fe = build_frontend({"type": "world", "f0_method": "dio"})
    f, g, voiced, f0_err = _round_trip(fe, x)
    mcd = _mcd_db(f[voiced, 1:40], g[voiced, 1:40])
    # measured: F0 median 0.3 %, MCD ~2.2 dB on frames voiced in both analyses
    assert voiced.mean() > 0.5
    assert np.median(f0_err) < 0.02
    assert mcd.mean() < 4.0


def test_interpolate_log_f0_by_hand():
    f0 = np.array([0, 100, 0, 0, 400, 0.0])
    lf0, vuv = interpolate_log_f0(f0)
    np.testing.assert_array_equal(vuv, [0, 1, 0, 0, 1, 0])
    l100, l400 = np.log(100), np.log(400)
    np.testing.assert_allclose(lf0, [l100, l100, l100 + (l400 - l100) / 3, l100 + 2 * (l400 - l100) / 3, l400, l400])
    lf0, vuv = interpolate_log_f0(np.zeros(4))
    assert not lf0.any() and not vuv.any()


def test_streams_and_dims_depend_on_sample_rate():
    fe = build_frontend({"type": "world", "sample_rate": 22050, "mcep_dim": 60})
    s = world_streams(fe.config)
    assert fe.dim == 60 + 2 + 2 and s["bap"] == slice(62, 64) and s["lf0"] == slice(60, 61)
    assert fe.config.resolved_alpha == pytest.approx(0.455)


def test_synthesize_errors():
    fe = build_frontend({"type": "world"})
    with pytest.raises(ValueError, match=r"\(frames, 43\)"):
        world_synthesize(np.zeros((10, 42)), SR, fe.config)
    with pytest.raises(ValueError, match="sr 22050"):
        world_synthesize(np.zeros((10, 43)), 22050, fe.to_dict())
    with pytest.raises(ValueError, match="NaN"):
        world_synthesize(np.full((10, 43), np.nan), SR, fe)


def test_layout_of_a_feature_dir(tmp_path):
    lay, src = read_world_layout(tmp_path)
    assert (lay, src) == (WorldLayout(40, 1), "default (no feats.yaml)")
    assert (lay.dim, lay.mcep, lay.lf0, lay.vuv) == (43, slice(0, 40), 40, 41)
    (tmp_path / "feats.yaml").write_text("type: world\nsample_rate: 48000\nmcep_dim: 50\nf0_ceil: 800\n")
    assert read_world_layout(tmp_path) == (WorldLayout(50, 5), str(tmp_path / "feats.yaml"))
    assert feature_streams(tmp_path) == {"mcep": slice(0, 50), "lf0": slice(50, 51), "vuv": slice(51, 52),
                                         "bap": slice(52, None)}
    (tmp_path / "feats.yaml").write_text("type: fbank\n")
    with pytest.raises(DataError, match="not WORLD features"):
        read_world_layout(tmp_path)
    with pytest.raises(DataError, match="not WORLD features"):
        feature_streams(tmp_path)


def test_stream_layout_bap_runs_to_the_end():
    s = stream_layout(40)
    assert s == feature_streams(None) == {"mcep": slice(0, 40), "lf0": slice(40, 41), "vuv": slice(41, 42),
                                          "bap": slice(42, None)}
    w = world_streams({"sample_rate": 16000, "mcep_dim": 40})
    assert {k: w[k] for k in ("mcep", "lf0", "vuv")} == {k: s[k] for k in ("mcep", "lf0", "vuv")}
    assert w["bap"] == slice(42, 43)
