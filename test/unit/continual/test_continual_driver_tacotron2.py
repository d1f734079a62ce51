"""speechkit.continual.driver with a tiny speaker-conditioned Tacotron 2 as theta_init: theta_init's
vocabulary and statistics kept, sa / er_kd / ewc over two continual speakers, ER-KD targets against the
model's own teacher-forced output, the EWC penalty in the loss, resume after a kill, synthesis from an episode."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch
import yaml

from speechkit.data.speakers import read_speakers
from speechkit.features.io import ark_scp_writer
from speechkit.tasks import get_task, load_model
from speechkit.tasks.tacotron2 import Tacotron2Task, encode_phones, synthesize
from speechkit.train import Trainer
from speechkit.continual import driver as cd
from speechkit.train.checkpoint import load_checkpoint
from speechkit.train.continual_strategies import EpisodePlan
from speechkit.utils.config import load_config
from speechkit.utils.fileio import write_table

from tacotron2_helpers import N_MELS, PHONES, TINY, speaker_vector  # test/unit/tasks (test/unit/conftest.py)

TINY = TINY + ["trainer.num_threads=1"]
CONTINUAL = {"c1": 3, "c2": 2}
FEATS_YAML = {"type": "logmel", "sample_rate": 16000, "n_fft": 64, "hop_length": 16, "n_mels": N_MELS}


def write_dir(path: Path, speakers: dict[str, int], seed: int, tag: str = "u", extra_phone: str = "") -> None:
    """``text`` (phones), log-mel ``feats.scp`` (3 frames per phone at a per-phone level, shifted by
    the speaker), ``utt2spk``, ``feats.yaml``."""
    rng = np.random.default_rng(seed)
    level = {p: np.random.default_rng(i).normal(size=N_MELS) - 3 for i, p in enumerate(PHONES + ["zz"])}
    text, feats = {}, {}
    for s, n in speakers.items():
        for i in range(n):
            ph = [PHONES[j] for j in rng.integers(0, len(PHONES), size=3 + i % 2)]
            if extra_phone and i == 0:
                ph.append(extra_phone)
            u = f"{s}-{tag}{i:02d}"
            text[u] = " ".join(ph)
            feats[u] = (np.concatenate([np.tile(level[p], (3, 1)) for p in ph]) + speaker_vector(s)[0]
                        ).astype(np.float32)
    path.mkdir(parents=True, exist_ok=True)
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(feats):
            w(u, feats[u])
    write_table(path / "text", text)
    write_table(path / "utt2spk", {u: u.split("-")[0] for u in text})
    (path / "feats.yaml").write_text(yaml.safe_dump(FEATS_YAML))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """theta_init (tacotron2, 2 epochs) on p1, p2; continual speakers c1 (3 train), c2 (2 train, one
    phone outside theta_init's vocabulary), one validation utterance each."""
    root = tmp_path_factory.mktemp("taco_continual")
    write_dir(root / "pre_train", {"p1": 3, "p2": 3}, seed=1)
    write_dir(root / "pre_valid", {"p1": 1, "p2": 1}, seed=2, tag="v")
    write_dir(root / "train", {"c1": 3}, seed=3)
    write_dir(root / "train_c2", {"c2": 2}, seed=4, extra_phone="zz")
    # one train dir with both continual speakers
    for f in ("text", "utt2spk"):
        (root / "train" / f).write_text("".join(sorted((root / "train" / f).read_text().splitlines(True)
                                                       + (root / "train_c2" / f).read_text().splitlines(True))))
    (root / "train" / "feats.scp").write_text((root / "train" / "feats.scp").read_text()
                                              + (root / "train_c2" / "feats.scp").read_text())
    write_dir(root / "valid", {s: 1 for s in CONTINUAL}, seed=5, tag="v")
    (root / "emb").mkdir()
    with kaldiio.WriteHelper(f"ark,scp:{root / 'emb' / 'spk.ark'},{root / 'emb' / 'spk_embeddings.scp'}") as w:
        for s in ["p1", "p2", *CONTINUAL]:
            w(s, speaker_vector(s))
    task = get_task("tacotron2")
    cfg = load_config(task.Config, None, TINY + [f"data.train_dir={root / 'pre_train'}",
                                                 f"data.valid_dir={root / 'pre_valid'}",
                                                 f"data.speaker_embeddings={root / 'emb' / 'spk_embeddings.scp'}",
                                                 "trainer.max_epochs=2"])
    Trainer(task, cfg, root / "init").fit()
    return root


def config(root: Path, strategy: str, **extra) -> cd.ContinualConfig:
    o = {"init_dir": root / "init", "train_dir": root / "train", "valid_dir": root / "valid", "strategy": strategy,
         "seed": 1, "trainer.max_epochs": 1, "trainer.patience": 0, "trainer.lr": 1e-3, "trainer.num_threads": 1,
         "trainer.device": "cpu", "trainer.log_interval": 1, "trainer.batch_size": 2}
    if strategy in ("er", "er_kd", "er_br"):
        o["buffer_size"] = 2
    if strategy == "ewc":
        o["ewc_lambda"] = 100.0
    o.update(extra)
    return load_config(cd.ContinualConfig, None, [f"{k}={v}" for k, v in o.items()])


def order() -> list[str]:
    return EpisodePlan.create(CONTINUAL, "sa", 1).order


@pytest.fixture
def spy(monkeypatch):
    seen = []

    class SpyTrainer(Trainer):
        def fit(self):
            seen.append({"keys": list(self.task.episode.keys), "feats": list(self.task.episode.feats),
                         "init": self.task.init_checkpoint})
            return super().fit()

    monkeypatch.setattr(cd, "Trainer", SpyTrainer)
    return seen


def test_sa_keeps_vocabulary_and_statistics(setup, tmp_path, spy, caplog):
    root = setup
    with caplog.at_level(logging.WARNING):
        recs = cd.run_continual(config(root, "sa"), tmp_path / "exp")
    assert [r["speaker"] for r in recs] == order()
    assert "outside data.token_list map to <unk>: zz" in caplog.text  # c2's unknown phone, warned
    init_model, init_cfg = load_model(root / "init")
    for t, spk in enumerate(order(), start=1):
        ep = tmp_path / "exp" / cd.episode_dir_name(t, spk)
        model, cfg = load_model(ep)
        assert isinstance(model, type(init_model))
        assert cfg.data.token_list == init_cfg.data.token_list  # one vocabulary for every episode
        assert torch.equal(model.mel_mean, init_model.mel_mean) and torch.equal(model.mel_std, init_model.mel_std)
        assert sorted(spy[t - 1]["keys"]) == [f"{spk}-u{i:02d}" for i in range(CONTINUAL[spk])]
        assert yaml.safe_load((ep / "feats.yaml").read_text())["type"] == "logmel"
        assert (ep / "phones.txt").read_text().split("\n")[0] == "<pad> 0"
    assert spy[0]["init"] == root / "init" / "checkpoints" / "best.pt"
    last = tmp_path / "exp" / cd.episode_dir_name(2, order()[1])
    assert read_speakers(last / "speakers") == ["c1", "c2", "p1", "p2"]
    # the episode model synthesizes for a seen speaker
    model, cfg = load_model(last)
    mel = synthesize(model, cfg.data.token_list, ["a", "b"], speaker_vector("c1"), max_frames=40)
    assert mel.ndim == 2 and mel.shape[1] == N_MELS and 1 <= len(mel) <= 40 and np.isfinite(mel).all()


def test_er_kd_targets_are_teacher_forced_outputs(setup, tmp_path, spy):
    root = setup
    o = order()
    cd.run_continual(config(root, "er_kd"), tmp_path / "exp")
    ep1 = tmp_path / "exp" / cd.episode_dir_name(1, o[0])
    buf = load_checkpoint(ep1 / "buffer.pt", expect_format=False)
    assert buf["speakers"] == [o[0]] and len(buf["keys"][0]) == 2
    model, cfg = load_model(ep1)
    model.eval()
    text = dict(line.split(" ", 1) for line in (root / "train" / "text").read_text().splitlines())
    gt = kaldiio.load_scp(str(root / "train" / "feats.scp"))
    for key, item in zip(buf["keys"][0], buf["items"][0]):
        # reference: the model's own teacher-forced mel_after, computed here by hand
        ids = encode_phones(text[key].split(), cfg.data.token_list, strict=False)[None]
        x = np.maximum(gt[key], np.log(cfg.data.mel_floor)).astype(np.float32)
        with torch.no_grad():
            torch.manual_seed(1 + 1)  # the driver seeds the prenet dropout with seed + episode
            out = model(ids, torch.tensor([ids.shape[1]]), model.normalize(torch.from_numpy(x))[None],
                        torch.from_numpy(speaker_vector(o[0]))[None], torch.tensor([len(x)]))
        ref = model.denormalize(out.mel_after[0]).numpy()
        assert item["feats"].shape == gt[key].shape
        assert np.allclose(item["feats"].numpy(), ref, atol=1e-5)
        assert not np.allclose(ref, gt[key], atol=1e-2)  # not the ground truth
        i = spy[1]["keys"].index(key)  # episode 2 trains on exactly these targets
        assert np.array_equal(spy[1]["feats"][i], item["feats"].numpy())
    assert sum(k.startswith(o[0]) for k in spy[1]["keys"]) == 2


def _steps(ep_dir: Path) -> list[dict]:
    return [r for r in map(json.loads, (ep_dir / "metrics.jsonl").read_text().splitlines())
            if r.get("kind") == "train"]


def test_ewc_penalty_in_the_loss(setup, tmp_path):
    root = setup
    o = order()
    cd.run_continual(config(root, "ewc", pretrain_dir=root / "pre_train", **{"trainer.max_epochs": 2}),
                     tmp_path / "exp")
    for t, spk in enumerate(o, start=1):
        recs = _steps(tmp_path / "exp" / cd.episode_dir_name(t, spk))
        assert len(recs) >= 2 and recs[0]["ewc"] == 0.0  # step 1: still at the anchor
        for r in recs:
            assert "mel_after" in r and "stop" in r  # the task's own stats are kept
            assert r["loss"] == pytest.approx(r["tts_loss"] + r["ewc"], rel=1e-5)
        assert all(r["ewc"] > 0 for r in recs[1:])  # episode 1 too: Fisher of pretrain_dir
    st = load_checkpoint(tmp_path / "exp" / cd.episode_dir_name(2, o[1]) / "ewc.pt", expect_format=False)
    assert st["episodes"] == [0, 1] and st["lam"] == 100.0
    best1 = load_checkpoint(tmp_path / "exp" / cd.episode_dir_name(1, o[0]) / "checkpoints" / "best.pt")
    name = next(iter(st["anchor"][0]))
    assert torch.equal(st["anchor"][0][name], best1["model"][name])
    assert all(float(f.sum()) > 0 for f in st["fisher"][0].values() if f.numel() > 100)


def test_resume_after_kill(setup, tmp_path, kill_forward_loss):
    root = setup
    o = order()
    extra = {"trainer.save_interval_steps": 1, "trainer.max_epochs": 2, "buffer_size": 1}
    cd.run_continual(config(root, "er_kd", **extra), tmp_path / "a")

    # dies in episode 2 (episode 1: 2 epochs x (2 train + 1 valid batch) = 6 calls)
    kill = kill_forward_loss(Tacotron2Task, 9)
    with pytest.raises(kill.error):
        cd.run_continual(config(root, "er_kd", **extra), tmp_path / "b")
    kill.restore()
    ep1, ep2 = (tmp_path / "b" / cd.episode_dir_name(t, o[t - 1]) for t in (1, 2))
    assert (ep1 / "episode.json").is_file() and not (ep2 / "episode.json").is_file()
    assert load_checkpoint(ep2 / "checkpoints" / "latest.pt")["state"]["step"] >= 1

    finished = []
    cd.run_continual(config(root, "er_kd", **extra), tmp_path / "b", after_episode=lambda t, d: finished.append(t))
    assert finished == [2]
    for t, spk in enumerate(o, start=1):
        a = load_checkpoint(tmp_path / "a" / cd.episode_dir_name(t, spk) / "checkpoints" / "best.pt")["model"]
        b = load_checkpoint(tmp_path / "b" / cd.episode_dir_name(t, spk) / "checkpoints" / "best.pt")["model"]
        assert all(torch.equal(a[k], b[k]) for k in a), f"episode {t}"
