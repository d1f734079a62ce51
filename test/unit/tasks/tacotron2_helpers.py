"""The tiny speaker-conditioned Tacotron 2 of the tacotron2 task tests and the continual-driver tests.

Not a test module: test/unit/conftest.py registers it (``from tacotron2_helpers import TINY, ...``).
"""
from __future__ import annotations

import numpy as np

#: log-mel bins and speaker-vector size of the tiny model's data.
N_MELS, SPK_DIM = 6, 4
#: The phones the data draw from.
PHONES = ["a", "b", "tʃ", "oʊ", "ə"]
#: speechkit-train overrides of a tiny model and a CPU trainer.
TINY = ["model.embed_dim=16", "model.encoder_conv_layers=1", "model.encoder_conv_channels=16",
        "model.encoder_lstm_units=8", "model.attention_dim=8", "model.attention_filters=4",
        "model.attention_kernel=5", "model.prenet_dim=8", "model.decoder_lstm_units=16", "model.postnet_layers=2",
        "model.postnet_channels=8", f"model.n_mels={N_MELS}", "model.reduction_factor=2",
        "trainer.batch_size=2", "trainer.device=cpu", "trainer.log_interval=1", "trainer.lr=3e-3"]


def speaker_vector(spk: str) -> np.ndarray:
    """A unit-norm SPK_DIM vector seeded by the speaker id (the same vector on every call)."""
    v = np.random.default_rng(sum(spk.encode())).normal(size=SPK_DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)
