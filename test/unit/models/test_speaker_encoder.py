"""The frozen GE2E speaker encoder: offline loading, agreement with Resemblyzer's own pipeline,
resampling, the minimum-speech rule, batching and the speaker vector."""
from __future__ import annotations

import pickle
import shutil
import socket
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.models.speaker_encoder import EMBEDDING_DIM, SpeakerEncoder, UtteranceTooShortError, weights_path
from speechkit.utils.fileio import DataError

SENTENCES = ["The quick brown fox jumps over the lazy dog near the river bank.",
             "She sells sea shells by the sea shore every single summer morning.",
             "Please call Stella and ask her to bring these things with her from the store."]


def _say(path, text, voice):
    subprocess.run(["espeak-ng", "-w", str(path), "-v", voice, text], check=True)
    x, sr = sf.read(path, dtype="float32")
    return x, sr


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """{voice: [(samples, sr), ...]} for two espeak-ng voices (22.05 kHz)."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng not installed")
    root = tmp_path_factory.mktemp("speech")
    return {v: [_say(root / f"{v}{i}.wav", t, v) for i, t in enumerate(SENTENCES)] for v in ("en", "en+f4")}


@pytest.fixture(scope="module")
def encoder():
    return SpeakerEncoder()


def test_weights_ship_with_resemblyzer_and_load_without_network(monkeypatch):
    path = weights_path()  # imports resemblyzer with its import-time warnings silenced
    import resemblyzer

    assert path.is_file() and path.parent == Path(resemblyzer.__file__).resolve().parent

    def no_network(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    enc = SpeakerEncoder()
    assert all(not p.requires_grad for p in enc.model.parameters())
    assert not enc.model.training


def test_embedding_equals_resemblyzers_pipeline(speech, encoder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from resemblyzer import VoiceEncoder, preprocess_wav
    ref_model = VoiceEncoder("cpu", verbose=False)
    for x, sr in speech["en"][:2]:
        e = encoder.embed(x, sr)
        ref = ref_model.embed_utterance(preprocess_wav(x, source_sr=sr))
        assert e.shape == (EMBEDDING_DIM,) and e.dtype == np.float32
        np.testing.assert_allclose(e, ref, atol=1e-5)
        assert np.linalg.norm(e) == pytest.approx(1.0, abs=1e-5) and (e >= 0).all()


def test_resampling_from_other_rates(speech, encoder):
    import soxr

    x, sr = speech["en"][0]
    e = encoder.embed(x, sr)
    x16 = soxr.resample(x, sr, 16000, quality="HQ")
    np.testing.assert_allclose(encoder.embed(x16, 16000), e, atol=1e-6)  # resampling = soxr HQ
    x44 = soxr.resample(x, sr, 44100, quality="HQ")
    assert float(encoder.embed(x44, 44100) @ e) > 0.99
    e_int16 = encoder.embed((x * 32767).astype(np.int16), sr)
    assert float(e_int16 @ e) > 0.999


def test_same_voice_closer_than_other_voice(speech, encoder):
    a = [encoder.embed(x, sr) for x, sr in speech["en"]]
    b = [encoder.embed(x, sr) for x, sr in speech["en+f4"]]
    within = min(float(a[i] @ a[j]) for i in range(3) for j in range(i + 1, 3))
    across = max(float(u @ v) for u in a for v in b)
    assert within > across


def test_too_short_utterances(speech, encoder):
    x, sr = speech["en"][0]
    with pytest.raises(UtteranceTooShortError) as e:
        encoder.embed(np.zeros(sr, np.float32), sr, key="spk_silence")
    assert e.value.speech_seconds == 0.0 and "spk_silence" in str(e.value)
    assert isinstance(e.value, DataError)
    short = x[: int(0.25 * sr)]
    with pytest.raises(UtteranceTooShortError) as e:
        encoder.embed(short, sr)
    assert 0 <= e.value.speech_seconds < 0.5 and e.value.min_speech == 0.5
    # without VAD trimming, padding with silence makes the same speech long enough
    padded = np.concatenate([short, np.zeros(sr, np.float32)])
    assert SpeakerEncoder(trim_silence=False).embed(padded, sr).shape == (EMBEDDING_DIM,)
    with pytest.raises(UtteranceTooShortError):
        encoder.embed(padded, sr)                    # the VAD cuts the silence off again
    assert SpeakerEncoder(min_speech=0.0).embed(short, sr).shape == (EMBEDDING_DIM,)
    err = pickle.loads(pickle.dumps(UtteranceTooShortError(0.2, 0.5, "u1")))
    assert (err.speech_seconds, err.min_speech, err.key) == (0.2, 0.5, "u1")


def test_bad_input(encoder):
    with pytest.raises(ValueError, match="mono"):
        encoder.embed(np.zeros((100, 2), np.float32), 16000)
    with pytest.raises(ValueError, match="NaN"):
        encoder.embed(np.full(16000, np.nan, np.float32), 16000)
    with pytest.raises(ValueError, match="min_speech"):
        SpeakerEncoder(min_speech=-1)


def test_batch_equals_single(speech, encoder):
    wavs = [x for x, _ in speech["en"]] + [np.zeros(1000, np.float32)] + [x for x, _ in speech["en+f4"][:1]]
    sr = speech["en"][0][1]
    out = SpeakerEncoder(batch_partials=3).embed_batch(wavs, sr)
    assert out[3] is None
    for w, e in zip(wavs[:3] + wavs[4:], out[:3] + out[4:]):
        np.testing.assert_allclose(e, encoder.embed(w, sr), atol=1e-5)
    with pytest.raises(ValueError, match="sample rates"):
        encoder.embed_batch(wavs, [sr])
