"""The inverter task: code tables, code/spectrogram alignment of crops, checks, codebook init, training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from speechkit.tasks import get_task, load_model
from speechkit.tasks.inverter import CodeSpecDataset, InverterTask, load_vqvae_codebook
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, write_table

import zs_helpers as zs  # test/unit/tasks/zs_helpers.py (test/unit/conftest.py)


K = 8
R = 4


def make_voice(root: Path, n_utts: int = 10, seed: int = 0, conf: dict | None = None,
               frame_offset: int = 0) -> tuple[Path, Path, np.ndarray]:
    """Codes and spectrograms where each code has its own spectrum (repeated R frames): learnable exactly."""
    rng = np.random.default_rng(seed)
    spectra = rng.uniform(0.5, 3.0, size=(K, zs.SPEC_BINS)).astype(np.float32)
    codes, specs = {}, {}
    for i in range(n_utts):
        c = rng.integers(0, K, size=8 + i)
        codes[f"v1_u{i:02d}"] = c
        spec = np.repeat(spectra[c], R, axis=0)
        specs[f"v1_u{i:02d}"] = np.concatenate([spec, np.repeat(spec[-1:], frame_offset, axis=0)])
    feats_dir = zs.write_feats_dir(root / "spec", {u: len(s) for u, s in specs.items()}, cmvn=False, feats=specs,
                                   conf=conf if conf is not None else zs.SPEC_CONF)
    write_table(root / "codes", {u: " ".join(map(str, c)) for u, c in codes.items()})
    return root / "codes", feats_dir, spectra


def overrides(codes: Path, feats_dir: Path, **extra) -> list[str]:
    o = {"data.codes": str(codes), "data.feats_dir": str(feats_dir), "data.num_valid": 2,
         "model.codebook_size": K, "model.input_dim": 4, "model.output_dim": zs.SPEC_BINS, "model.upsample_ratio": R,
         "model.model_dim": 16, "model.conv_kernel_sizes": "[1,3]", "model.conv_layers": 1,
         "model.transformer_layers": 1, "model.attention_heads": 2, "model.ff_dim": 16, "model.dropout": 0.0,
         "trainer.max_epochs": 30, "trainer.batch_size": 4, "trainer.lr": 1e-2, "trainer.num_threads": 1,
         "trainer.device": "cpu", "trainer.log_interval": 5}
    o.update(extra)
    return [f"{k}={v}" for k, v in o.items()]


def test_registered():
    assert isinstance(get_task("inverter"), InverterTask)


def test_crops_keep_codes_and_frames_aligned():
    """Frame s of an item must belong to code s // r of the same item, wherever the window starts."""
    r, n = 3, 11
    codes = torch.arange(n)
    spec = torch.arange(n * r + 2, dtype=torch.float32)[:, None].expand(-1, 2) // r  # frame s holds s // r
    spec = torch.minimum(spec, torch.tensor(float(n - 1)))  # the 2 extra frames belong to the last code
    ds = CodeSpecDataset(["u"], [codes], [spec], [0], ratio=r, crop_codes=4)
    torch.manual_seed(0)
    seen_end = False
    for _ in range(40):
        it = ds[0]
        c, s = it["codes"], it["spec"][:, 0]
        assert len(c) == 4
        expect = c[torch.minimum(torch.arange(len(s)) // r, torch.tensor(len(c) - 1))].float()
        torch.testing.assert_close(s, expect)
        seen_end |= int(c[-1]) == n - 1
        assert len(s) == 4 * r + (2 if int(c[-1]) == n - 1 else 0)
    assert seen_end
    assert ds.lengths() == [12]


def test_training_learns_the_code_spectra_and_records_the_frontend(tmp_path):
    codes, feats_dir, spectra = make_voice(tmp_path)
    task, cfg, best = zs.train("inverter", overrides(codes, feats_dir), tmp_path / "exp")
    records = [json.loads(x) for x in (tmp_path / "exp/metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in records if r["kind"] == "epoch"]
    first, last = epochs[0], min(epochs, key=lambda r: r["valid/loss"])
    assert last["valid/loss"] < 0.2 * first["valid/loss"]
    assert last["valid/spectral_convergence"] < 0.2
    assert yaml.safe_load((tmp_path / "exp/frontend.yaml").read_text()) == zs.SPEC_CONF
    t = get_task("inverter")
    t.init_from_vqvae = False
    model, _ = load_model(tmp_path / "exp", t)
    with torch.no_grad():
        pred, _ = model(torch.tensor([[3, 5, 3]]), torch.tensor([3]))
    np.testing.assert_allclose(pred[0, ::R].numpy(), spectra[[3, 5, 3]], rtol=0.25, atol=0.2)


def test_codebook_from_the_vqvae_is_copied_and_frozen(tmp_path):
    train_dir = zs.write_feats_dir(tmp_path / "train", zs.two_speaker_lengths(3), seed=1)
    zs.train("vqvae", zs.vqvae_overrides(train_dir, None, **{"trainer.best_metric": "train/loss",
                                                             "trainer.max_epochs": 1}), tmp_path / "vq")
    codebook = load_vqvae_codebook(tmp_path / "vq")
    assert codebook.shape == (K, 4)
    codes, feats_dir, _ = make_voice(tmp_path / "voice", n_utts=6)
    zs.train("inverter", overrides(codes, feats_dir, **{"data.vqvae_dir": tmp_path / "vq", "trainer.max_epochs": 2}),
             tmp_path / "inv")
    t = get_task("inverter")
    t.init_from_vqvae = False
    model, _ = load_model(tmp_path / "inv", t)
    torch.testing.assert_close(model.code_embedding.weight, codebook)  # frozen: unchanged by training
    bad = load_config(InverterTask.Config, None, overrides(codes, feats_dir, **{"data.vqvae_dir": tmp_path / "vq",
                                                                                "model.input_dim": 5}))
    with pytest.raises(ConfigError, match=r"'model.input_dim': 5, but the VQ-VAE in .* has 4; set model.input_dim=4"):
        InverterTask().build_model(bad)


def test_bad_inputs_are_named(tmp_path):
    codes, feats_dir, _ = make_voice(tmp_path / "a", frame_offset=2 * R)  # two codes' worth too many frames
    cfg = load_config(InverterTask.Config, None, overrides(codes, feats_dir))
    task = InverterTask()
    task.build_model(cfg)
    with pytest.raises(DataError, match=r"utterance 'v1_u00': 40 spectrogram frames do not match its 8 codes"):
        task.build_datasets(cfg)
    log_conf = dict(zs.SPEC_CONF, log=True)
    codes, feats_dir, _ = make_voice(tmp_path / "b", conf=log_conf)
    cfg = load_config(InverterTask.Config, None, overrides(codes, feats_dir))
    with pytest.raises(DataError, match="linear magnitude spectrograms"):
        task.build_datasets(cfg)
    codes, feats_dir, _ = make_voice(tmp_path / "c")
    cfg = load_config(InverterTask.Config, None, overrides(codes, feats_dir, **{"model.output_dim": 10}))
    with pytest.raises(ConfigError, match=r"'model.output_dim': 10, but the spectrograms .* have 9 bins"):
        task.build_datasets(cfg)
    (tmp_path / "other").write_text("zz_1 1 2 3\n")
    cfg = load_config(InverterTask.Config, None, overrides(tmp_path / "other", feats_dir))
    with pytest.raises(DataError, match="no utterance in common"):
        task.build_datasets(cfg)
