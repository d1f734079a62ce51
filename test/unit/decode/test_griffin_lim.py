"""Torch Griffin-Lim against librosa.griffinlim, and reconstruction of a known signal's magnitude."""
import numpy as np
import pytest
import torch

librosa = pytest.importorskip("librosa")

from speechkit.decode.griffin_lim import griffin_lim, istft, make_window, spectral_convergence, stft  # noqa: E402

N_FFT, HOP = 512, 128


def signal(seconds: float = 0.4, sr: int = 16000) -> np.ndarray:
    """Two decaying harmonics, a chirp and a little noise (float64)."""
    t = np.arange(int(seconds * sr)) / sr
    rng = np.random.default_rng(0)
    return (0.5 * np.sin(2 * np.pi * 220 * t) + 0.3 * np.exp(-3 * t) * np.sin(2 * np.pi * 660 * t + 0.3)
            + 0.2 * np.sin(2 * np.pi * (300 + 1500 * t) * t) + 0.02 * rng.standard_normal(t.size))


def test_stft_and_istft_match_librosa():
    y = signal()
    ours = stft(torch.from_numpy(y), N_FFT, HOP).numpy()
    ref = librosa.stft(y, n_fft=N_FFT, hop_length=HOP)
    assert np.allclose(ours, ref, atol=1e-9)
    assert np.allclose(istft(torch.from_numpy(ref), N_FFT, HOP).numpy(), librosa.istft(ref, hop_length=HOP),
                       atol=1e-9)
    w = make_window("hann", 400, dtype=torch.float64).numpy()
    assert np.allclose(w, librosa.filters.get_window("hann", 400, fftbins=True))


@pytest.mark.parametrize("n_iter,momentum", [(1, 0.99), (16, 0.99), (16, 0.0)])
def test_matches_librosa_with_the_same_zero_phase_init(n_iter, momentum):
    S = np.abs(librosa.stft(signal(), n_fft=N_FFT, hop_length=HOP))
    ref = librosa.griffinlim(S, n_iter=n_iter, hop_length=HOP, n_fft=N_FFT, momentum=momentum, init=None)
    ours = griffin_lim(torch.from_numpy(S), N_FFT, HOP, n_iter=n_iter, momentum=momentum, init=None).numpy()
    assert ours.shape == ref.shape
    assert np.max(np.abs(ours - ref)) < 1e-8 * np.max(np.abs(ref))


def test_matches_librosa_with_the_same_random_phases_and_win_length():
    S = np.abs(librosa.stft(signal(), n_fft=N_FFT, hop_length=100, win_length=400))
    # librosa draws its initial phases as 2 pi * rng.random(S.shape) from the generator it is given
    phases = 2 * np.pi * np.random.default_rng(7).random(S.shape)
    ref = librosa.griffinlim(S, n_iter=10, hop_length=100, win_length=400, n_fft=N_FFT,
                             random_state=np.random.default_rng(7))
    ours = griffin_lim(torch.from_numpy(S), N_FFT, 100, 400, n_iter=10, init=torch.from_numpy(phases)).numpy()
    assert np.max(np.abs(ours - ref)) < 1e-8 * np.max(np.abs(ref))


def test_reconstructs_a_known_magnitude():
    """60 fast-GL iterations bring the spectral convergence of this signal below 0.1 (librosa: the same)."""
    y = torch.from_numpy(signal()).float()
    S = stft(y, N_FFT, HOP).abs()
    out = griffin_lim(S, N_FFT, HOP, n_iter=60, seed=0)
    assert out.dtype == torch.float32 and out.shape == (HOP * (S.size(1) - 1),)
    sc = spectral_convergence(S, stft(out, N_FFT, HOP).abs()).item()
    ref = librosa.griffinlim(S.numpy(), n_iter=60, hop_length=HOP, n_fft=N_FFT, random_state=0)
    sc_ref = spectral_convergence(S, stft(torch.from_numpy(ref), N_FFT, HOP).abs()).item()
    assert sc < 0.1 and abs(sc - sc_ref) < 0.02, (sc, sc_ref)
    # more iterations help; zero iterations (random phase) is far off
    sc0 = spectral_convergence(S, stft(griffin_lim(S, N_FFT, HOP, n_iter=0, seed=0), N_FFT, HOP).abs()).item()
    assert sc0 > 3 * sc


def test_batched_equals_one_by_one_and_seed_is_reproducible():
    y = torch.from_numpy(signal()).float()
    S = torch.stack([stft(y, N_FFT, HOP).abs(), stft(0.5 * y.flip(0), N_FFT, HOP).abs()])
    phases = 2 * np.pi * torch.rand(S.shape, generator=torch.Generator().manual_seed(0))
    batch = griffin_lim(S, N_FFT, HOP, n_iter=5, init=phases)
    for b in range(2):
        assert torch.allclose(batch[b], griffin_lim(S[b], N_FFT, HOP, n_iter=5, init=phases[b]), atol=1e-5)
    assert torch.equal(griffin_lim(S[0], N_FFT, HOP, n_iter=3, seed=1), griffin_lim(S[0], N_FFT, HOP, n_iter=3, seed=1))
    assert griffin_lim(S[0], N_FFT, HOP, n_iter=2, length=5000).shape == (5000,)


def test_bad_input():
    with pytest.raises(ValueError, match="F = n_fft // 2 \\+ 1 = 257"):
        griffin_lim(torch.ones(100, 10), N_FFT, HOP)
    with pytest.raises(ValueError, match="momentum"):
        griffin_lim(torch.ones(257, 10), N_FFT, HOP, momentum=-1)
    with pytest.raises(ValueError, match="init"):
        griffin_lim(torch.ones(257, 10), N_FFT, HOP, init="zeros")
    with pytest.raises(ValueError, match="window"):
        griffin_lim(torch.ones(257, 10), N_FFT, HOP, window="kaiser")
    with pytest.raises(ValueError, match="shapes differ"):
        spectral_convergence(torch.ones(3), torch.ones(4))
