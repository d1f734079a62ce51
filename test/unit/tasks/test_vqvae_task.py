"""The vqvae task: data loading and checks, crops, validation statistics, training through the Trainer."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from speechkit.features.cmvn import accumulate_stats, apply_cmvn
from speechkit.features.io import FeatureReader, load_features
from speechkit.tasks import get_task, load_model
from speechkit.tasks.vqvae import FeatureDataset, VQVAETask, pad_batch, speaker_table
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, read_table

import zs_helpers as zs  # test/unit/tasks/zs_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("vqvae_task")
    train_dir = zs.write_feats_dir(root / "train", zs.two_speaker_lengths(6), seed=1)
    valid_dir = zs.write_feats_dir(root / "valid", {"s1_v1": 33, "s3_v1": 17}, seed=2)  # s3: unseen speaker
    task, cfg, best = zs.train("vqvae", zs.vqvae_overrides(train_dir, valid_dir), root / "exp")
    return {"root": root, "train": train_dir, "valid": valid_dir, "cfg": cfg, "best": best, "exp": root / "exp"}


def test_registered():
    assert isinstance(get_task("vqvae"), VQVAETask)


def test_speaker_table_c_order():
    assert speaker_table({"u1": "b", "u2": "B", "u3": "a", "u4": "b"}) == {"B": 0, "a": 1, "b": 2}


def test_load_features_applies_speaker_cmvn(tmp_path):
    d = zs.write_feats_dir(tmp_path / "d", {"s1_a": 10, "s1_b": 12, "s2_a": 9})
    utts, feats = load_features(d, "speaker")
    assert utts == ["s1_a", "s1_b", "s2_a"]
    raw = FeatureReader(d)
    stats = accumulate_stats([raw["s1_a"], raw["s1_b"]])  # independent: speaker s1's stats by hand
    np.testing.assert_allclose(feats[1].numpy(), apply_cmvn(raw["s1_b"], stats), rtol=1e-5, atol=1e-5)
    # each speaker's frames have zero mean and unit variance
    s1 = torch.cat(feats[:2])
    np.testing.assert_allclose(s1.mean(0).numpy(), 0, atol=1e-4)
    np.testing.assert_allclose(s1.std(0, unbiased=False).numpy(), 1, atol=1e-4)


def test_nan_features_name_the_utterance(tmp_path):
    bad = np.ones((12, zs.DIM), np.float32)
    bad[7, 2] = np.nan
    d = zs.write_feats_dir(tmp_path / "d", {"s1_a": 10, "s1_bad": 12}, cmvn=False,
                           feats={"s1_a": np.ones((10, zs.DIM), np.float32), "s1_bad": bad})
    with pytest.raises(DataError, match=r"feats.scp: utterance 's1_bad': NaN or Inf in frame 7"):
        load_features(d, "none")


def test_utterance_shorter_than_stride_is_an_error(tmp_path):
    d = zs.write_feats_dir(tmp_path / "d", {"s1_a": 10, "s1_short": 3, "s2_a": 11})
    cfg = load_config(VQVAETask.Config, None, zs.vqvae_overrides(d, None, **{"trainer.best_metric": "train/loss"}))
    task = VQVAETask()
    task.build_model(cfg)
    with pytest.raises(DataError, match=r"'s1_short' has 3 frames, shorter than the total stride 4 \(model.stride\)"):
        task.build_datasets(cfg)


def test_config_checks_name_the_key(tmp_path):
    d = zs.write_feats_dir(tmp_path / "d", {"s1_a": 10, "s2_a": 11, "s3_a": 12})
    task = VQVAETask()
    cfg = load_config(VQVAETask.Config, None, zs.vqvae_overrides(d, None))  # 2 speaker rows, 3 speakers
    task.build_model(cfg)
    with pytest.raises(ConfigError, match=r"'model.num_speakers': 2, but .* has 3 speakers"):
        task.build_datasets(cfg)
    cfg = load_config(VQVAETask.Config, None, zs.vqvae_overrides(d, None, **{"model.num_speakers": 3,
                                                                             "model.input_dim": 5}))
    with pytest.raises(ConfigError, match=r"'model.input_dim': 5, but the features .* have 6 dimensions"):
        task.build_datasets(cfg)
    with pytest.raises(ConfigError, match="crop_frames"):
        load_config(VQVAETask.Config, None, zs.vqvae_overrides(d, None, **{"data.crop_frames": -1}))


def test_crops_are_windows_of_the_utterance():
    feats = [torch.arange(50 * 2, dtype=torch.float32).view(50, 2), torch.ones(7, 2)]
    ds = FeatureDataset(["a", "b"], feats, [0, 1], crop_frames=16)
    assert ds.lengths() == [16, 7]
    torch.manual_seed(0)
    starts = set()
    for _ in range(30):
        x = ds[0]["feats"]
        assert x.shape == (16, 2)
        start = int(x[0, 0]) // 2
        torch.testing.assert_close(x, feats[0][start:start + 16])
        starts.add(start)
    assert len(starts) > 5  # really random
    assert ds[1]["feats"].shape == (7, 2)  # shorter than the crop: whole
    torch.manual_seed(3)
    a = [int(ds[0]["feats"][0, 0]) for _ in range(5)]
    torch.manual_seed(3)
    assert a == [int(ds[0]["feats"][0, 0]) for _ in range(5)]  # from the torch generator (resumable)


def test_pad_batch():
    b = pad_batch([{"feats": torch.ones(3, 2), "speaker": 1, "utt": "x"},
                   {"feats": torch.ones(5, 2), "speaker": 0, "utt": "y"}])
    assert b["feats"].shape == (2, 5, 2) and b["lengths"].tolist() == [3, 5] and b["speakers"].tolist() == [1, 0]
    assert float(b["feats"][0, 3:].abs().sum()) == 0


def test_training_writes_metrics_speakers_and_best(trained):
    exp = trained["exp"]
    assert trained["best"] == exp / "checkpoints" / "best.pt"
    assert read_table(exp / "speakers") == {"s1": "0", "s2": "1"}
    records = [json.loads(x) for x in (exp / "metrics.jsonl").read_text().splitlines()]
    epoch = [r for r in records if r["kind"] == "epoch"][-1]
    for k in ("recon", "commitment", "smoothing", "perplexity", "codes_used", "loss"):
        assert f"train/{k}" in epoch and f"valid/{k}" in epoch
    assert epoch["valid/loss"] == pytest.approx(epoch["valid/recon"] + epoch["valid/commitment"]
                                                + epoch["valid/smoothing"], rel=1e-5)
    model, cfg = load_model(exp)
    assert cfg.model.codebook_size == 8 and not model.training


def test_validation_code_statistics_match_an_independent_count(trained):
    """valid/perplexity and codes_used come from the histogram of the whole set's codes."""
    cfg = trained["cfg"]
    model, _ = load_model(trained["exp"])
    task = VQVAETask()
    task.build_model(cfg)
    _, valid = task.build_datasets(cfg)
    batches = task.make_valid_batches(valid, cfg)
    loader = _Loader([task.collate([valid[i] for i in b]) for b in batches], batches)
    stats = task.validate(model, loader)
    # reference: encode each utterance alone, count codes with numpy, perplexity = exp(entropy)
    counts = np.zeros(cfg.model.codebook_size)
    for i in range(len(valid)):
        x = valid[i]["feats"][None]
        codes, _, _, n = model.encode(x, torch.tensor([x.shape[1]]))
        counts += np.bincount(codes[0, : int(n[0])].numpy(), minlength=cfg.model.codebook_size)
    p = counts[counts > 0] / counts.sum()
    assert stats["codes_used"] == (counts > 0).sum()
    assert stats["perplexity"] == pytest.approx(float(np.exp(-(p * np.log(p)).sum())), rel=1e-6)


class _Loader(list):
    def __init__(self, batches, index_lists):
        super().__init__(batches)
        self.batches = index_lists
