"""The tacotron2 task: vocabulary and speaker size from the data, skipped and bad utterances, the masked
loss, and training through speechkit.train.Trainer with checkpoint/resume, output files and synthesis."""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch
import yaml

from speechkit.features.io import ark_scp_writer
from speechkit.tasks import get_task, load_model, register_task
from speechkit.tasks.tacotron2 import PAD, UNK, Tacotron2Task, encode_phones, read_phone_table, synthesize
from speechkit.train import Trainer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, read_table, write_table

from tacotron2_helpers import N_MELS, PHONES, SPK_DIM, TINY, speaker_vector  # test/unit/tasks (test/unit/conftest.py)


def write_dir(path: Path, utts: dict[str, list[str]], seed: int, extra_feats: tuple[str, ...] = ()) -> None:
    """Phones in ``text``, 'log-mel' features (each phone 3 frames of its own level), utt2spk, feats.yaml."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    level = {p: rng.normal(size=N_MELS) - 3 for p in PHONES + ["zz"]}
    feats = {}
    for u, phones in utts.items():
        feats[u] = np.concatenate([np.tile(level[p], (3, 1)) for p in phones] or [np.zeros((4, N_MELS))])
        feats[u] = (feats[u] + speaker_vector(u.split("-")[0])[:1]).astype(np.float32)
    for u in extra_feats:
        feats[u] = rng.normal(size=(5, N_MELS)).astype(np.float32)
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(feats):
            w(u, feats[u])
    write_table(path / "text", {u: " ".join(p) for u, p in utts.items()})
    write_table(path / "utt2spk", {u: u.split("-")[0] for u in list(utts) + list(extra_feats)})
    (path / "feats.yaml").write_text(yaml.safe_dump({"type": "logmel", "sample_rate": 16000, "n_fft": 400,
                                                     "hop_length": 160, "n_mels": N_MELS}))


def write_embeddings(path: Path, speakers: list[str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with kaldiio.WriteHelper(f"ark,scp:{path / 'spk.ark'},{path / 'spk_embeddings.scp'}") as w:
        for s in speakers:
            w(s, speaker_vector(s))
    return path / "spk_embeddings.scp"


@pytest.fixture
def setup(tmp_path):
    train = {"spka-u1": ["a", "b", "tʃ"], "spka-u2": ["oʊ", "a"], "spkb-u1": ["ə", "b", "a", "a"],
             "spkb-u2": ["tʃ", "oʊ"]}
    write_dir(tmp_path / "train", train, seed=0)
    write_dir(tmp_path / "valid", {"spka-v1": ["a", "tʃ"], "spkb-v1": ["b", "ə"]}, seed=0)
    scp = write_embeddings(tmp_path / "emb", ["spka", "spkb"])
    overrides = TINY + [f"data.train_dir={tmp_path / 'train'}", f"data.valid_dir={tmp_path / 'valid'}",
                        f"data.speaker_embeddings={scp}"]
    return tmp_path, overrides


def config(overrides, *more):
    return load_config(Tacotron2Task.Config, None, list(overrides) + list(more))


def test_vocabulary_and_speaker_dim_from_the_data(setup):
    root, ov = setup
    cfg = config(ov)
    assert cfg.data.token_list == [PAD, UNK, "a", "b", "oʊ", "tʃ", "ə"]  # C (byte) order
    assert cfg.model.num_phones == 7 and cfg.model.speaker_dim == SPK_DIM
    # an explicit vocabulary is kept (and a phone outside it is an error at synthesis)
    cfg = config(ov, "data.token_list=['<pad>','<unk>','a','b']")
    assert cfg.model.num_phones == 4
    assert encode_phones(["b", "a"], cfg.data.token_list).tolist() == [3, 2]
    with pytest.raises(DataError, match="'x' is not in the model's vocabulary"):
        encode_phones(["a", "x"], cfg.data.token_list, what="utt1")
    with pytest.raises(ConfigError, match="data.token_list"):
        config(ov, "data.token_list=['a','b']")
    with pytest.raises(ConfigError, match="data.token_list"):
        Tacotron2Task().build_model(load_config(Tacotron2Task.Config, None, TINY))


def test_datasets_skip_count_and_normalise(setup, caplog):
    root, ov = setup
    write_dir(root / "train2", {"spka-u1": ["a", "b"], "spka-u2": [], "spkb-u1": ["ə", "a"], "spkb-u9": ["a"]},
              seed=0, extra_feats=("spkb-u5",))
    # spkb-u9: phones but no features -- drop it from feats.scp
    scp = read_table(root / "train2" / "feats.scp")
    del scp["spkb-u9"]
    write_table(root / "train2" / "feats.scp", scp)
    write_dir(root / "valid2", {"spka-v1": ["a", "zz", "zz"]}, seed=0)
    task = Tacotron2Task()
    cfg = config(ov, f"data.train_dir={root / 'train2'}", f"data.valid_dir={root / 'valid2'}")
    model = task.build_model(cfg)
    with caplog.at_level(logging.WARNING):
        train, valid = task.build_datasets(cfg)
    text = caplog.text
    assert "1 utterance(s) with phones but no features in feats.scp: spkb-u9" in text
    assert "1 utterance(s) with features but no phones in text: spkb-u5" in text
    assert "1 utterance(s) with an empty phone sequence in text: spka-u2" in text
    assert "2 phone token(s) of 1 symbol(s) outside data.token_list map to <unk>: zz" in text
    assert train.utts == ["spka-u1", "spkb-u1"] and valid[0]["phones"].tolist() == [2, 1, 1]
    frames = torch.cat(train.mels)
    torch.testing.assert_close(frames.mean(0), torch.zeros(N_MELS), atol=1e-5, rtol=0)
    assert task.trained_speakers == ["spka", "spkb"]
    torch.testing.assert_close(train[1]["speaker"], torch.from_numpy(speaker_vector("spkb")))
    raw = kaldiio.load_scp(str(root / "train2" / "feats.scp"))["spkb-u1"]
    torch.testing.assert_close(model.denormalize(train[1]["mels"]), torch.from_numpy(np.maximum(raw, math.log(1e-5))),
                               atol=1e-5, rtol=1e-5)


def test_bad_data_names_the_utterance_or_speaker(setup):
    root, ov = setup
    (root / "bad").mkdir()
    with ark_scp_writer(root / "bad" / "feats.ark", root / "bad" / "feats.scp") as w:
        w("spka-u1", np.zeros((5, N_MELS + 1), np.float32))
    write_table(root / "bad" / "text", {"spka-u1": "a b"})
    write_table(root / "bad" / "utt2spk", {"spka-u1": "spka"})
    task = Tacotron2Task()
    cfg = config(ov, f"data.valid_dir={root / 'bad'}")
    task.build_model(cfg)
    with pytest.raises(DataError, match=r"feats.scp: 'spka-u1': a \(5, 7\) matrix, expected"):
        task.build_datasets(cfg)
    scp = write_embeddings(root / "emb1", ["spka"])
    cfg = config(ov, f"data.speaker_embeddings={scp}")
    task.build_model(cfg)
    with pytest.raises(DataError, match="no vector for speaker 'spkb'"):
        task.build_datasets(cfg)
    with pytest.raises(DataError, match="'<pad>' is reserved"):
        write_table(root / "text_pad", {"u": "a <pad>"})
        read_phone_table(root / "text_pad")


def test_loss_ignores_padding_and_sums_its_parts(setup):
    root, ov = setup
    task = Tacotron2Task()
    cfg = config(ov, "model.dropout=0", "model.prenet_dropout=0", "model.zoneout=0")
    model = task.build_model(cfg).eval()
    train, _ = task.build_datasets(cfg)
    b = task.collate([train[0], train[2]])
    assert b["mels"].shape[1] > int(b["mel_lens"].min())  # one of them is padded
    with torch.no_grad():
        loss, stats = task.forward_loss(model, b)
        b2 = dict(b, mels=b["mels"].clone())
        short = int(b["mel_lens"].argmin())
        b2["mels"][short, int(b["mel_lens"][short]):] = 100.0  # garbage on the padding
        loss2, _ = task.forward_loss(model, b2)
    torch.testing.assert_close(loss, loss2)
    assert math.isclose(stats["loss"], stats["mel_before"] + stats["mel_after"] + stats["stop"], rel_tol=1e-5)
    task._loss.guided_attention_weight = 1.0
    with torch.no_grad():
        loss3, stats3 = task.forward_loss(model, b)
    assert 0 < stats3["guided_attention"] < 1
    torch.testing.assert_close(loss3, loss + stats3["guided_attention"])


def _train_records(exp: Path) -> dict[int, float]:
    recs = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in recs if r["kind"] == "train"}


def test_train_resume_outputs_and_synthesis(setup):
    root, ov = setup
    register_task("tacotron2", "speechkit.tasks.tacotron2:Tacotron2Task")
    # uninterrupted: 3 epochs of 2 updates
    full = root / "exp_full"
    Trainer(get_task("tacotron2"), config(ov, "trainer.max_epochs=3"), full).fit()
    # interrupted after epoch 1, then resumed by a fresh task and trainer
    part = root / "exp_part"
    Trainer(get_task("tacotron2"), config(ov, "trainer.max_epochs=1"), part).fit()
    assert sorted(_train_records(part)) == [1, 2]
    Trainer(get_task("tacotron2"), config(ov, "trainer.max_epochs=3"), part).fit()
    a, b = _train_records(full), _train_records(part)
    assert sorted(a) == [1, 2, 3, 4, 5, 6]
    assert a == b  # the resumed run's next losses (prenet dropout and zoneout included) are the same
    valid = [json.loads(line)["valid/loss"] for line in (full / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "epoch"]
    assert len(valid) == 3 and valid[-1] < valid[0]
    wa = torch.load(full / "checkpoints" / "latest.pt", weights_only=True)["model"]
    wb = torch.load(part / "checkpoints" / "latest.pt", weights_only=True)["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)

    # files of on_train_end
    assert (full / "phones.txt").read_text().splitlines()[:3] == ["<pad> 0", "<unk> 1", "a 2"]
    assert (full / "speakers").read_text().split() == ["spka", "spkb"]
    assert yaml.safe_load((full / "feats.yaml").read_text())["type"] == "logmel"
    assert int((full / "num_parameters").read_text()) > 0

    # rebuild from the experiment and synthesize (statistics travel in the checkpoint)
    model, cfg = load_model(full)
    assert torch.equal(model.mel_std, wa["mel_std"]) and not torch.all(model.mel_std == 1)
    mel = synthesize(model, cfg.data.token_list, ["a", "b"], speaker_vector("spka"), max_frames=12)
    assert mel.ndim == 2 and mel.shape[1] == N_MELS and 1 <= len(mel) <= 12 and np.isfinite(mel).all()
    assert np.array_equal(mel, synthesize(model, cfg.data.token_list, ["a", "b"], speaker_vector("spka"),
                                          max_frames=12))  # seeded
    with pytest.raises(DataError, match="'q' is not in"):
        synthesize(model, cfg.data.token_list, ["q"], speaker_vector("spka"))


def test_kept_statistics_and_in_memory_datasets(setup):
    """recompute_stats=False (continual episodes): the model's statistics stay; make_dataset uses them."""
    root, ov = setup
    task = Tacotron2Task()
    task.recompute_stats = False
    cfg = config(ov)
    model = task.build_model(cfg)
    model.set_stats(torch.full((N_MELS,), -1.0), torch.full((N_MELS,), 2.0))
    train, _ = task.build_datasets(cfg)
    assert torch.equal(model.mel_mean, torch.full((N_MELS,), -1.0))
    raw = np.maximum(kaldiio.load_scp(str(root / "train" / "feats.scp"))["spka-u1"], math.log(1e-5))
    torch.testing.assert_close(train[0]["mels"], torch.from_numpy((raw + 1.0) / 2.0))
    ds = task.make_dataset(cfg, ["x-1"], [["b", "a"]], [raw], ["spkb"], {"spkb": speaker_vector("spkb")})
    assert ds[0]["phones"].tolist() == [3, 2] and torch.equal(ds[0]["mels"], train[0]["mels"])
