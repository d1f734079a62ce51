"""A tiny multilingual ASR setup on disk for the rnnt task and speechkit-asr-decode tests.

Two languages with disjoint alphabets ('aa': a-e, 'bb': v-z), 16-dim random "log-mel" features
written as Kaldi ark/scp, global CMVN stats, and char_wb units built from the training text.

Not a test module: test/unit/conftest.py registers it and builds its ``rnnt_env`` fixture with
:func:`make_rnnt_env`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from speechkit.features.cmvn import accumulate_stats
from speechkit.features.io import FeatureReader, ark_scp_writer
from speechkit.text.units import MultilingualUnits
from speechkit.utils.fileio import write_table

DIM = 16


def _word(rng, alphabet, n):
    return "".join(rng.choice(list(alphabet), n))


def write_data_dir(path: Path, utts: dict[str, tuple[str, str, int]], seed: int = 0) -> None:
    """``utts``: id -> (language, transcript, frames); writes feats.scp/ark, text, utt2lang, utt2spk, ..."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(utts):
            lang, _, n = utts[u]
            shift = 1.0 if lang == "aa" else -1.0
            w(u, (rng.normal(size=(n, DIM)) + shift).astype(np.float32))
    write_table(path / "text", {u: t for u, (_, t, _) in utts.items()})
    write_table(path / "utt2lang", {u: lang for u, (lang, _, _) in utts.items()})
    write_table(path / "utt2spk", {u: u.split("_")[0] for u in utts})
    write_table(path / "utt2num_frames", {u: n for u, (_, _, n) in utts.items()})
    (path / "frame_shift").write_text("0.01\n")


def make_rnnt_env(tmp_path: Path) -> dict:
    """Builds data/{train,dev}, data/lang under ``tmp_path`` and returns a dict of paths and a config
    override list (relative to ``tmp_path``, the tests' working dir)."""
    rng = np.random.default_rng(1)
    train = {}
    for i in range(12):
        for lang, alpha in (("aa", "abcde"), ("bb", "vwxyz")):
            n_words = 1 + i % 3
            text = " ".join(_word(rng, alpha, 2 + (i + k) % 3) for k in range(n_words))
            frames = 40 + 7 * i + (10 if lang == "bb" else 0)
            train[f"s{i % 3}_{lang}_{i:02d}"] = (lang, text, frames)
    write_data_dir(tmp_path / "data/train", train, seed=2)
    dev = {
        "s9_aa_01": ("aa", "abc de", 60),
        "s9_bb_01": ("bb", "vwx yz", 70),
        "s9_aa_02": ("aa", "QQQ", 60),            # no in-vocabulary symbol
        "s9_bb_02": ("bb", "vw", 5),              # shorter than one stacked frame (8)
        "s9_aa_03": ("aa", "abcdeabcdeabcde", 30),  # 15 labels > 1 per frame x 8 frames
    }
    write_data_dir(tmp_path / "data/dev", dev, seed=3)
    r = FeatureReader(tmp_path / "data/train")
    stats = accumulate_stats(r[u] for u in r.keys())
    with ark_scp_writer(tmp_path / "data/train/cmvn.ark", tmp_path / "data/train/cmvn.scp") as w:
        w("global", stats)
    by_lang: dict[str, list[str]] = {}
    for lang, text, _ in train.values():
        by_lang.setdefault(lang, []).append(text)
    MultilingualUnits.build(by_lang, "char_wb").save(tmp_path / "data/lang")
    overrides = [
        "data.train_dir=data/train", "data.valid_dir=data/dev", "data.units_dir=data/lang",
        "model.input_dim=128", "model.encoder_layers=1", "model.encoder_hidden=24", "model.encoder_proj=0",
        "model.pred_layers=1", "model.pred_hidden=16", "model.pred_proj=0", "model.embed_dim=8",
        "model.joint_dim=16", "trainer.batch_frames=400", "trainer.num_threads=1", "trainer.device=cpu",
        "trainer.log_interval=1", "trainer.warmup_steps=0", "trainer.scheduler=none",
    ]
    return {"root": tmp_path, "train": train, "dev": dev, "overrides": overrides}
