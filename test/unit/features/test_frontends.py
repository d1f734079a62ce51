"""Frontends: numerics vs librosa / a hand-computed Kaldi frame, shapes, batching, config errors."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from speechkit.features.frontends import (
    build_frontend, dct_matrix, frontend_from_file, load_frontend_conf, mel_filterbank,
)
from speechkit.utils.cli import ConfigError

SR = 16000
# Stated tolerance of the torch MFCC(+deltas) against librosa (float32 STFT vs librosa's float64
# FFT rounded to complex64): |ours - librosa| <= ATOL + RTOL * |librosa|.
MFCC_ATOL, MFCC_RTOL = 2e-3, 1e-4


def _synthetic(seconds: float, seed: int = 0) -> np.ndarray:
    """A chirp with harmonics, noise, and a stretch of near-silence (exercises top_db)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    f = 100 + 300 * t / seconds
    phase = 2 * np.pi * np.cumsum(f) / SR
    x = sum(np.sin(h * phase) / h for h in range(1, 8)) * 0.2 + 0.01 * rng.standard_normal(len(t))
    x[len(x) // 3: len(x) // 2] *= 1e-4
    return x.astype(np.float32)


def _signals(shared=None) -> list[np.ndarray]:
    sigs = [_synthetic(1.3, 0), _synthetic(0.52, 1)]
    if shared is not None:
        import soundfile as sf

        for p in sorted((shared / "timit_sample").glob("*/sa2.wav"))[:2]:
            sigs.append(sf.read(p, dtype="float32")[0])
    return sigs


@pytest.fixture(scope="module")
def librosa():
    return pytest.importorskip("librosa")


def _librosa_mfcc39(librosa, y):
    m = librosa.feature.mfcc(y=y, sr=SR, n_mfcc=13, n_fft=400, hop_length=160, win_length=None,
                             window="hann", center=True, pad_mode="constant", power=2.0, n_mels=128,
                             fmin=0.0, fmax=None, htk=False, mel_norm="slaney", dct_type=2,
                             norm="ortho", lifter=0)
    return np.concatenate([m, librosa.feature.delta(m, width=9, order=1),
                           librosa.feature.delta(m, width=9, order=2)]).T


@pytest.mark.parametrize("kw", [dict(sr=16000, n_fft=400, n_mels=128), dict(sr=16000, n_fft=512, n_mels=80),
                                dict(sr=22050, n_fft=1024, n_mels=40, fmin=50.0, fmax=7000.0, htk=True, norm=None)])
def test_mel_filterbank_matches_librosa(librosa, kw):
    sr, n_fft, n_mels = kw.pop("sr"), kw.pop("n_fft"), kw.pop("n_mels")
    ours = mel_filterbank(sr, n_fft, n_mels, kw.get("fmin", 0.0), kw.get("fmax"), kw.get("htk", False),
                          kw.get("norm", "slaney"))
    ref = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, **kw)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-8)


def test_dct_matrix_matches_scipy():
    import scipy.fft

    ref = scipy.fft.dct(np.eye(128), type=2, norm="ortho", axis=0)[:13]
    np.testing.assert_allclose(dct_matrix(128, 13), ref, atol=1e-12)


def test_mfcc_matches_librosa(librosa, repo_root, request):
    shared = request.getfixturevalue("shared_data") if (repo_root.parent / "shared" / "data").is_dir() else None
    fe = frontend_from_file(repo_root / "conf" / "mfcc.yaml")
    assert (fe.dim, fe.frame_shift, fe.frame_length) == (39, 0.01, 0.025)
    for y in _signals(shared):
        ref = _librosa_mfcc39(librosa, y)
        got = fe(y)
        assert got.dtype == np.float32 and got.shape == ref.shape == (fe.num_frames(len(y)), 39)
        np.testing.assert_allclose(got, ref, atol=MFCC_ATOL, rtol=MFCC_RTOL)


def test_mfcc_options_match_librosa(librosa):
    y = _synthetic(0.8, 3)
    fe = build_frontend({"type": "mfcc", "n_mfcc": 20, "n_mels": 40, "fmin": 20.0, "fmax": 7600.0,
                         "htk": True, "lifter": 22.0, "top_db": None, "delta_order": 0})
    # librosa.feature.mfcc applies top_db=80 inside; pass the dB spectrogram ourselves to disable it
    S = librosa.power_to_db(librosa.feature.melspectrogram(y=y, sr=SR, n_fft=400, hop_length=160, n_mels=40,
                                                           fmin=20.0, fmax=7600.0, htk=True), top_db=None)
    ref = librosa.feature.mfcc(S=S, n_mfcc=20, lifter=22).T
    np.testing.assert_allclose(fe(y), ref, atol=MFCC_ATOL, rtol=MFCC_RTOL)


def test_batch_equals_single():
    ys = [_synthetic(s, i) for i, s in enumerate([0.3, 1.1, 0.05, 0.71])]
    for conf in ({"type": "mfcc"}, {"type": "logmel"}, {"type": "spectrogram", "log": True}):
        fe = build_frontend(conf)
        for b, y in zip(fe.compute_batch(ys), ys):
            np.testing.assert_allclose(b, fe(y), rtol=1e-5, atol=1e-5)
    assert build_frontend({"type": "mfcc"}).compute_batch([]) == []


def test_logmel_matches_librosa(librosa, repo_root):
    fe = frontend_from_file(repo_root / "conf" / "logmel.yaml")
    assert fe.dim == 80
    for y in _signals():
        S = librosa.feature.melspectrogram(y=y, sr=SR, n_fft=400, hop_length=160, n_mels=80)
        np.testing.assert_allclose(fe(y), np.log(np.maximum(S, 1e-10)).T, atol=2e-3, rtol=1e-4)


def test_spectrogram_matches_librosa_and_exposes_stft_params(librosa, repo_root):
    fe = frontend_from_file(repo_root / "conf" / "spectrogram.yaml")
    p = fe.stft_params()
    assert p == {"n_fft": 512, "hop_length": 160, "win_length": 400, "window": "hann", "center": True}
    y = _synthetic(0.9)
    ref = np.abs(librosa.stft(y, n_fft=p["n_fft"], hop_length=p["hop_length"], win_length=p["win_length"],
                              window=p["window"], center=p["center"], pad_mode="constant")).T
    got = fe(y)
    assert got.shape == ref.shape == (fe.num_frames(len(y)), 257)
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-4)
    # frames line up with the MFCC frames (same hop and centring)
    assert got.shape[0] == build_frontend({"type": "mfcc"})(y).shape[0]
    logfe = build_frontend({"type": "spectrogram", "log": True, "log_floor": 1e-5})
    np.testing.assert_allclose(logfe(y), np.log(np.maximum(ref, 1e-5)), atol=1e-3)


def test_reflect_padding_matches_librosa(librosa):
    y = _synthetic(0.4)
    fe = build_frontend({"type": "logmel", "pad_mode": "reflect", "n_mels": 40})
    S = librosa.feature.melspectrogram(y=y, sr=SR, n_fft=400, hop_length=160, n_mels=40, pad_mode="reflect")
    np.testing.assert_allclose(fe(y), np.log(np.maximum(S, 1e-10)).T, atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 159, 160, 161, 400, 4321])
def test_num_frames_matches_output(n):
    y = _synthetic(1.0)[:n]
    for conf in ({"type": "mfcc"}, {"type": "logmel"}, {"type": "spectrogram"}, {"type": "fbank", "snip_edges": False}):
        fe = build_frontend(conf)
        if fe.num_frames(n) == 0:
            with pytest.raises(ValueError, match="give no frames"):
                fe(y)
        else:
            assert fe(y).shape == (fe.num_frames(n), fe.dim), conf


def _kaldi_fbank_frame(x: np.ndarray, t: int, num_bins: int = 80) -> np.ndarray:
    """One frame of Kaldi's compute-fbank-feats, written from feature-window.cc / mel-computations.cc."""
    w = x[t * 160: t * 160 + 400].astype(np.float64) * 32768.0
    w = w - w.mean()                                            # remove_dc_offset
    w = np.concatenate([[w[0] - 0.97 * w[0]], w[1:] - 0.97 * w[:-1]])  # pre-emphasis
    i = np.arange(400)
    w = w * (0.5 - 0.5 * np.cos(2 * np.pi * i / 399)) ** 0.85   # povey window
    power = np.abs(np.fft.rfft(w, 512)) ** 2                    # padded to 512, power spectrum
    mel = lambda f: 1127.0 * np.log(1 + f / 700.0)  # noqa: E731
    lo, hi = mel(20.0), mel(8000.0)
    delta = (hi - lo) / (num_bins + 1)
    out = np.zeros(num_bins)
    for b in range(num_bins):
        left, center, right = lo + b * delta, lo + (b + 1) * delta, lo + (b + 2) * delta
        for k in range(256):  # Kaldi's bins exclude Nyquist
            m = mel(k * 16000 / 512)
            if left < m < right:
                out[b] += power[k] * ((m - left) / (center - left) if m <= center else (right - m) / (right - center))
    return np.log(np.maximum(out, np.finfo(np.float32).eps))


def test_fbank_matches_hand_computed_kaldi_frames(repo_root):
    fe = frontend_from_file(repo_root / "conf" / "fbank.yaml")
    y = _synthetic(0.5)
    got = fe(y)
    assert got.shape == (1 + (len(y) - 400) // 160, 80) == (fe.num_frames(len(y)), fe.dim)
    assert fe.frame_shift == 0.01 and fe.frame_length == 0.025
    for t in (0, 17, got.shape[0] - 1):
        np.testing.assert_allclose(got[t], _kaldi_fbank_frame(y, t), atol=2e-3, rtol=1e-4)
    np.testing.assert_array_equal(fe(y), got)  # dither 0: deterministic


def test_fbank_too_short_is_an_error():
    with pytest.raises(ValueError, match="give no frames .shorter than one 25 ms frame"):
        build_frontend({"type": "fbank"})(np.zeros(300, np.float32))


def test_kaldi_mfcc_with_deltas():
    y = _synthetic(0.5)
    base = build_frontend({"type": "kaldi_mfcc"})
    fe = build_frontend({"type": "kaldi_mfcc", "delta_order": 2})
    a, b = base(y), fe(y)
    assert a.shape[1] == 13 and b.shape == (a.shape[0], 39) and fe.dim == 39
    np.testing.assert_allclose(b[:, :13], a)
    # c0 is log energy of the DC-removed, scaled frame (use_energy, raw_energy)
    w = y[160 * 5: 160 * 5 + 400].astype(np.float64) * 32768
    assert a[5, 0] == pytest.approx(math.log(np.sum((w - w.mean()) ** 2)), abs=1e-3)


def test_kaldi_mel_config_is_one_definition():
    """fbank and kaldi_mfcc take the mel-bank/energy options from KaldiMelConfig; feats.yaml keeps its key order."""
    import kaldi_native_fbank as knf

    from speechkit.features.frontends import FbankConfig, KaldiFrameConfig, KaldiMelConfig, KaldiMfccConfig

    frame = ["type", "sample_rate", *(f.name for f in dataclasses.fields(KaldiFrameConfig) if f.name != "sample_rate")]
    assert list(build_frontend({"type": "fbank"}).to_dict()) == frame + [
        "num_mel_bins", "use_energy", "energy_floor", "raw_energy", "htk_compat", "use_log_fbank", "use_power"]
    assert list(build_frontend({"type": "kaldi_mfcc"}).to_dict()) == frame + [
        "num_mel_bins", "num_ceps", "use_energy", "energy_floor", "raw_energy", "cepstral_lifter", "htk_compat",
        "delta_order", "delta_window"]
    assert (FbankConfig().num_mel_bins, FbankConfig().use_energy) == (80, False)
    assert (KaldiMfccConfig().num_mel_bins, KaldiMfccConfig().use_energy) == (23, True)
    shared = {"num_mel_bins": 30, "use_energy": True, "energy_floor": 1.5, "raw_energy": False, "htk_compat": True,
              "frame_shift_ms": 12.5}
    for cls, opts, own in ((FbankConfig, knf.FbankOptions(), {"use_log_fbank": False, "use_power": False}),
                           (KaldiMfccConfig, knf.MfccOptions(), {"num_ceps": 10, "cepstral_lifter": 0.0})):
        assert issubclass(cls, KaldiMelConfig)
        cls(**shared, **own).apply(opts)
        assert opts.mel_opts.num_bins == 30 and opts.frame_opts.frame_shift_ms == 12.5
        assert (opts.use_energy, opts.energy_floor, opts.raw_energy, opts.htk_compat) == (True, 1.5, False, True)
        assert all(getattr(opts, k) == v for k, v in own.items())
    with pytest.raises(ConfigError, match="key 'num_mel_bins' must be positive"):
        build_frontend({"type": "kaldi_mfcc", "num_mel_bins": 0})


def test_input_errors():
    fe = build_frontend({"type": "mfcc"})
    with pytest.raises(ValueError, match="1-D"):
        fe(np.zeros((2, 100), np.float32))
    with pytest.raises(ValueError, match="empty"):
        fe(np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        fe(np.array([0.0, np.nan] * 100, np.float32))
    assert fe(torch.zeros(800)).shape == (6, 39)  # tensors accepted too


def test_config_errors_name_key_and_file(tmp_path):
    bad = tmp_path / "mfcc.yaml"
    bad.write_text("type: mfcc\nn_mel: 40\n")
    with pytest.raises(ConfigError, match=r"mfcc.yaml: unknown key 'n_mel' .*did you mean 'n_mels'"):
        frontend_from_file(bad)
    cases = [
        ({"type": "mfcc", "n_mels": "80"}, "key 'n_mels' must be an integer"),
        ({"type": "mfcc", "n_mels": 80.0}, "key 'n_mels' must be an integer"),
        ({"type": "mfcc", "htk": "yes"}, "key 'htk' must be true or false"),
        ({"type": "mfcc", "window": "hanning"}, "key 'window' must be one of"),
        ({"type": "mfcc", "n_mfcc": 200}, "key 'n_mfcc' must be in 1..n_mels"),
        ({"type": "mfcc", "fmax": 9000.0}, "key 'fmax'"),
        ({"type": "mfcc", "delta_width": 8}, "key 'delta_width'"),
        ({"type": "spectrogram", "win_length": 1024}, "key 'win_length'"),
        ({"type": "mfcc", "sample_rate": 0}, "key 'sample_rate'"),
        ({"type": "mfc"}, "unknown frontend 'mfc' .*did you mean 'mfcc'"),
        ({"n_mels": 80}, "missing key 'type'"),
        ({"type": "fbank", "high_freq": 9000.0}, "key 'high_freq'"),
    ]
    for conf, msg in cases:
        with pytest.raises(ConfigError, match=msg):
            build_frontend(conf, source="x.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_frontend_conf(tmp_path / "list.yaml")


def test_yaml_float_quirk_and_int_for_float():
    # PyYAML reads 1e-10 (no dot) as a string; accepted for float keys. Ints are fine for floats.
    fe = build_frontend({"type": "mfcc", "amin": "1e-10", "fmin": 0, "top_db": 80})
    assert fe.config.amin == 1e-10 and isinstance(fe.config.fmin, float)


def test_every_conf_file_builds_and_round_trips(repo_root):
    for name in ("mfcc", "logmel", "spectrogram", "fbank", "world"):
        fe = frontend_from_file(repo_root / "conf" / f"{name}.yaml")
        assert fe.name == name
        again = build_frontend(fe.to_dict())
        assert again.to_dict() == fe.to_dict() and again.dim == fe.dim


def test_frontends_pickle():
    # DataLoader workers receive the frontend by pickling; the sparse mel matrix is rebuilt lazily
    import pickle

    y = _synthetic(0.3)
    for conf in ({"type": "mfcc"}, {"type": "logmel"}, {"type": "fbank"}, {"type": "world", "f0_method": "dio"}):
        fe = build_frontend(conf)
        ref = fe(y)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(fe))(y), ref)


def test_stft_params_drive_griffin_lim():
    # the contract with the vocoder: griffin_lim(spec.T, **stft_params()) inverts the spectrogram
    gl = pytest.importorskip("speechkit.decode.griffin_lim")
    fe = build_frontend({"type": "spectrogram"})
    y = _synthetic(0.5)
    mag = fe(y)
    wav = gl.griffin_lim(torch.from_numpy(mag.T.copy()), n_iter=32, seed=0, length=len(y), **fe.stft_params())
    rebuilt = fe(wav.numpy())
    sc = np.linalg.norm(rebuilt - mag) / np.linalg.norm(mag)  # spectral convergence
    assert rebuilt.shape == mag.shape and sc < 0.3
