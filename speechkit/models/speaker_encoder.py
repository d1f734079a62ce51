"""Frozen GE2E speaker encoder (the d-vector model whose weights ship inside ``resemblyzer``).

The model is Wan et al.'s GE2E encoder ("Generalized End-to-End Loss for Speaker Verification",
ICASSP 2018) as trained by Resemblyzer: 3 LSTM layers of 256 units over 40-channel mel frames
(25 ms windows, 10 ms hop, 16 kHz), a linear layer, ReLU and L2 normalisation -> a 256-dim
embedding. The weights (``resemblyzer/pretrained.pt``) are part of the installed wheel, so
loading needs no network; the model runs on the CPU, in eval mode, with gradients off.

Pipeline of :meth:`SpeakerEncoder.embed` (Resemblyzer's own ``preprocess_wav`` + ``embed_utterance``):

1. resample to 16 kHz with soxr (``HQ``, what librosa's default ``soxr_hq`` uses) unless already 16 kHz;
2. raise the level to -30 dBFS RMS if below (``normalize_volume(..., increase_only=True)``);
3. VAD trimming (``trim_long_silences``: WebRTC VAD mode 3 on 30 ms windows, smoothed over 8
   windows, voiced regions dilated by 6 windows): silences longer than ~0.2 s are cut out;
4. the trimmed audio must last at least ``min_speech`` seconds (default 0.5 s), else
   :class:`UtteranceTooShortError` (callers count and skip such utterances);
5. the audio is cut into 1.6 s partial utterances (160 frames) every 1/1.3 s (zero-padding the
   last one), each partial is embedded, and the utterance embedding is the L2-normalised mean of
   the partial embeddings.

The speaker vector of the paper (Hemati & Borth 2021, section 3) is the mean of a speaker's
utterance embeddings: :func:`speechkit.data.speakers.mean_embedding` (re-normalised to unit length
by default, as Resemblyzer's ``embed_speaker``); :mod:`speechkit.data.speakers` also reads and writes
the embedding tables.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import soxr
import torch

from speechkit.utils.fileio import DataError

# resemblyzer is imported where used (_import_resemblyzer): it loads scipy and webrtcvad, and its imports warn.

logger = logging.getLogger(__name__)

__all__ = ["SpeakerEncoder", "UtteranceTooShortError", "EMBEDDING_DIM", "SAMPLE_RATE", "DEFAULT_MIN_SPEECH",
           "weights_path"]

#: Dimension of the embedding (``model_embedding_size`` of Resemblyzer).
EMBEDDING_DIM = 256
#: The encoder's input rate in Hz.
SAMPLE_RATE = 16000
#: Default minimum speech duration after VAD trimming, in seconds.
DEFAULT_MIN_SPEECH = 0.5


def _import_resemblyzer():
    # webrtcvad imports pkg_resources and resemblyzer scipy.ndimage.morphology: both warn on import.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import resemblyzer
        from resemblyzer import audio, hparams
        from resemblyzer.voice_encoder import VoiceEncoder
    return resemblyzer, audio, hparams, VoiceEncoder


def weights_path() -> Path:
    """Path of the pretrained GE2E weights inside the installed ``resemblyzer`` package."""
    resemblyzer, *_ = _import_resemblyzer()
    return Path(resemblyzer.__file__).resolve().parent / "pretrained.pt"


class UtteranceTooShortError(DataError):
    """An utterance has less speech than the encoder's minimum after VAD trimming.

    Attributes:
        speech_seconds: speech left after trimming (seconds; 0 for silence).
        min_speech: the minimum that was required (seconds).
        key: the utterance id if the caller gave one, else ``None``.
    """

    def __init__(self, speech_seconds: float, min_speech: float, key: str | None = None):
        self.speech_seconds = float(speech_seconds)
        self.min_speech = float(min_speech)
        self.key = key
        who = f"'{key}': " if key else ""
        super().__init__(f"{who}{speech_seconds:.2f} s of speech after VAD trimming, "
                         f"less than the speaker encoder's minimum of {min_speech:.2f} s")

    def __reduce__(self):  # picklable across worker processes despite the extra arguments
        return (type(self), (self.speech_seconds, self.min_speech, self.key))


class SpeakerEncoder:
    """The frozen GE2E encoder of Resemblyzer with its preprocessing (see the module docstring).

    Args:
        min_speech: minimum speech duration in seconds after trimming; shorter utterances raise
            :class:`UtteranceTooShortError`. 0 accepts anything non-silent.
        trim_silence: apply Resemblyzer's VAD trimming (step 3); without it the whole signal counts
            as speech (use for already-trimmed audio).
        normalize_volume: apply the -30 dBFS level raise (step 2).
        rate: partial utterances per second (Resemblyzer's default 1.3).
        min_coverage: a last partial covering less than this fraction of 1.6 s is dropped (0.75).
        batch_partials: partial utterances per forward pass in :meth:`embed_batch`.

    The model itself is :attr:`model` (``resemblyzer.VoiceEncoder``, CPU, eval, frozen).
    """

    sample_rate: int = SAMPLE_RATE
    dim: int = EMBEDDING_DIM

    def __init__(self, *, min_speech: float = DEFAULT_MIN_SPEECH, trim_silence: bool = True,
                 normalize_volume: bool = True, rate: float = 1.3, min_coverage: float = 0.75,
                 batch_partials: int = 64):
        if min_speech < 0:
            raise ValueError(f"min_speech must be >= 0 seconds, got {min_speech}")
        if batch_partials < 1:
            raise ValueError(f"batch_partials must be >= 1, got {batch_partials}")
        _, self._audio, self._hp, VoiceEncoder = _import_resemblyzer()
        self.min_speech = float(min_speech)
        self.trim_silence = trim_silence
        self.normalize_volume = normalize_volume
        self.rate = rate
        self.min_coverage = min_coverage
        self.batch_partials = batch_partials
        path = weights_path()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: resemblyzer's pretrained GE2E weights are missing "
                                    "(reinstall resemblyzer)")
        self.model = VoiceEncoder(device="cpu", verbose=False, weights_fpath=path)
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    # ------------------------------------------------------------------ preprocessing
    def preprocess(self, wav: np.ndarray, sr: int, key: str | None = None) -> np.ndarray:
        """Steps 1-4: 16 kHz, level-normalised, VAD-trimmed float32 audio ``(samples,)``.

        Args:
            wav: mono audio ``(samples,)`` in [-1, 1] (any float or int16 dtype).
            sr: its sample rate in Hz.
            key: utterance id for error messages.

        Raises:
            ValueError: not 1-D, non-finite samples or a non-positive rate.
            UtteranceTooShortError: less than ``min_speech`` seconds left (silence included).
        """
        who = f"'{key}': " if key else ""
        x = np.asarray(wav)
        if x.ndim != 1:
            raise ValueError(f"{who}speaker encoder input must be mono (samples,), got shape {x.shape}")
        if int(sr) <= 0:
            raise ValueError(f"{who}sample rate must be positive, got {sr}")
        x = x.astype(np.float32) / 32768.0 if x.dtype == np.int16 else x.astype(np.float32)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{who}audio contains NaN or infinity")
        if int(sr) != SAMPLE_RATE and len(x):
            x = soxr.resample(x, int(sr), SAMPLE_RATE, quality="HQ").astype(np.float32)
        if len(x) == 0 or not np.any(x):
            raise UtteranceTooShortError(0.0, self.min_speech, key)
        if self.normalize_volume:
            x = self._audio.normalize_volume(x, self._hp.audio_norm_target_dBFS, increase_only=True)
        if self.trim_silence:
            x = self._audio.trim_long_silences(x)
        x = np.asarray(x, dtype=np.float32)
        seconds = len(x) / SAMPLE_RATE
        if len(x) == 0 or seconds < self.min_speech:
            raise UtteranceTooShortError(seconds, self.min_speech, key)
        return x

    def _partial_mels(self, x: np.ndarray) -> np.ndarray:
        """``(n_partials, 160, 40)`` mel frames of the partial utterances of preprocessed audio."""
        wav_slices, mel_slices = self.model.compute_partial_slices(len(x), self.rate, self.min_coverage)
        if wav_slices[-1].stop >= len(x):
            x = np.pad(x, (0, wav_slices[-1].stop - len(x)))
        mel = self._audio.wav_to_mel_spectrogram(x)
        return np.stack([mel[s] for s in mel_slices]).astype(np.float32)

    @torch.no_grad()
    def _forward(self, mels: np.ndarray) -> np.ndarray:
        out = [self.model(torch.from_numpy(mels[i:i + self.batch_partials])).numpy()
               for i in range(0, len(mels), self.batch_partials)]
        return np.concatenate(out, axis=0)

    @staticmethod
    def _pool(partials: np.ndarray) -> np.ndarray:
        e = partials.mean(axis=0)
        return (e / np.linalg.norm(e)).astype(np.float32)

    # ------------------------------------------------------------------ embedding
    def embed(self, wav: np.ndarray, sr: int, key: str | None = None) -> np.ndarray:
        """The utterance embedding: float32 ``(256,)``, unit L2 norm, non-negative entries.

        Args:
            wav: mono audio ``(samples,)`` at ``sr`` Hz.
            sr: sample rate in Hz (resampled to 16 kHz).
            key: utterance id for error messages.

        Raises:
            UtteranceTooShortError: less than ``min_speech`` s of speech after trimming.
            ValueError: bad shape/values (see :meth:`preprocess`).
        """
        x = self.preprocess(wav, sr, key)
        return self._pool(self._forward(self._partial_mels(x)))

    def embed_batch(self, wavs: Sequence[np.ndarray], sr: int | Sequence[int],
                    keys: Sequence[str] | None = None) -> list[np.ndarray | None]:
        """Embed several utterances, their partials batched through the LSTM together.

        Gives the same vectors as :meth:`embed` one by one (up to float rounding).

        Args:
            wavs: mono audio arrays.
            sr: one sample rate for all, or one per utterance (Hz).
            keys: utterance ids for error messages.

        Returns:
            One float32 ``(256,)`` embedding per input, ``None`` where the utterance was too short
            (the caller counts those; the reason is logged at debug level).

        Raises:
            ValueError: bad shape/values, or lengths of ``sr``/``keys`` differing from ``wavs``.
        """
        n = len(wavs)
        srs = [int(sr)] * n if np.isscalar(sr) else [int(s) for s in sr]
        if len(srs) != n or (keys is not None and len(keys) != n):
            raise ValueError(f"embed_batch: {n} waveforms but {len(srs)} sample rates / "
                             f"{n if keys is None else len(keys)} keys")
        mels, owner = [], []
        for i, (w, s) in enumerate(zip(wavs, srs)):
            try:
                x = self.preprocess(w, s, keys[i] if keys is not None else None)
            except UtteranceTooShortError as e:
                logger.debug("%s", e)
                continue
            m = self._partial_mels(x)
            mels.append(m)
            owner.extend([i] * len(m))
        out: list[np.ndarray | None] = [None] * n
        if not mels:
            return out
        partials = self._forward(np.concatenate(mels, axis=0))
        owner_arr = np.asarray(owner)
        for i in np.unique(owner_arr):
            out[int(i)] = self._pool(partials[owner_arr == i])
        return out
