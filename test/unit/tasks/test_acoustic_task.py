"""The salad / musa_rnn tasks: data checks, normalisation, stateful batching, training, resume."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from speechkit.features.io import ark_scp_writer
from speechkit.tasks import get_task, load_model
from speechkit.features.world import stream_layout
from speechkit.tasks.acoustic import AcousticScores, MusaRnnTask, SaladTask, StreamWindows, load_pairs, read_label_dim
from speechkit.train import Trainer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, write_table

NUM_PHONES = 6
LABEL_DIM = NUM_PHONES + 2  # one-hot phone, relative position in the phone, a constant
WORLD_CONF = {"type": "world", "sample_rate": 16000, "frame_period": 5.0, "mcep_dim": 40, "f0_floor": 71.0,
              "f0_ceil": 800.0}


def synthetic_utterance(rng: np.random.Generator, phone_table: np.ndarray,
                        n_phones: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels (one-hot phone + position) and 43-dim WORLD-like targets determined by them (learnable)."""
    labs, feats = [], []
    for _ in range(n_phones):
        p = int(rng.integers(NUM_PHONES))
        dur = int(rng.integers(4, 12))
        rel = (np.arange(dur) + 0.5) / dur
        x = np.zeros((dur, LABEL_DIM), np.float32)
        x[:, p] = 1.0
        x[:, NUM_PHONES] = rel
        x[:, NUM_PHONES + 1] = 1.0
        y = np.repeat(phone_table[p][None], dur, axis=0).copy()
        y[:, 1] += 0.5 * rel  # a within-phone trajectory
        labs.append(x)
        feats.append(y)
    return np.concatenate(labs), np.concatenate(feats).astype(np.float32)


def make_phone_table(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    table = np.zeros((NUM_PHONES, 43), np.float32)
    table[:, :40] = rng.normal(scale=[2.0] + [0.5] * 39, size=(NUM_PHONES, 40))
    voiced = np.array([1, 1, 0, 1, 0, 1], bool)
    table[:, 40] = np.log(rng.uniform(100, 200, NUM_PHONES))
    table[:, 41] = voiced
    table[:, 42] = rng.uniform(-3, 0, NUM_PHONES)
    return table


def write_pair_dir(path: Path, n_utts: int, seed: int, phone_table: np.ndarray, prefix: str = "spk_u",
                   drop_labels: tuple[str, ...] = (), truncate: dict[str, int] | None = None) -> dict:
    """A data dir with labels.scp, feats.scp, feats.yaml, utt2num_frames, frame_shift."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    data = {f"{prefix}{i:02d}": synthetic_utterance(rng, phone_table, 4 + i % 3) for i in range(n_utts)}
    with ark_scp_writer(path / "labels.ark", path / "labels.scp") as w:
        for u in sorted(data):
            if u not in drop_labels:
                x = data[u][0]
                w(u, x[: (truncate or {}).get(u, len(x))])
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(data):
            w(u, data[u][1])
    write_table(path / "utt2num_frames", {u: len(v[1]) for u, v in data.items()})
    (path / "frame_shift").write_text("0.005\n")
    (path / "feats.yaml").write_text(yaml.safe_dump(WORLD_CONF))
    return data


@pytest.fixture
def tts_data(tmp_path):
    table = make_phone_table()
    train = write_pair_dir(tmp_path / "train", 16, 1, table)
    valid = write_pair_dir(tmp_path / "valid", 3, 2, table, prefix="spk_v")
    return {"root": tmp_path, "train": train, "valid": valid, "table": table}


def overrides(root: Path, task: str, **extra) -> list[str]:
    o = {"data.train_dir": str(root / "train"), "data.valid_dir": str(root / "valid"), "data.num_streams": 4,
         "data.window": 20, "trainer.max_epochs": 3, "trainer.num_threads": 1, "trainer.device": "cpu",
         "trainer.log_interval": 5, "trainer.patience": 0, "model.embed_dim": 16}
    if task == "salad":
        o.update({"model.num_blocks": 1, "model.num_heads": 2, "model.ff_dim": 32, "trainer.scheduler": "none",
                  "trainer.model_dim": 0, "trainer.lr": 3e-3, "model.ff_dropout": 0.0, "model.position_dropout": 0.0,
                  "model.attention_dropout": 0.0})
    else:
        o.update({"model.hidden_size": 24, "trainer.lr": 1e-2, "model.dropout": 0.0})
    o.update(extra)
    return [f"{k}={v}" for k, v in o.items()]


def test_registered():
    assert isinstance(get_task("salad"), SaladTask)
    assert isinstance(get_task("musa_rnn"), MusaRnnTask)


def test_input_dim_read_from_labels(tts_data):
    root = tts_data["root"]
    assert read_label_dim(root / "train") == LABEL_DIM
    for name in ("salad", "musa_rnn"):
        cfg = load_config(get_task(name).Config, None, overrides(root, name))
        assert cfg.model.input_dim == LABEL_DIM
    cfg = load_config(get_task("salad").Config, None, ["model.input_dim=0"])
    with pytest.raises(ConfigError, match="model.input_dim"):
        get_task("salad").build_model(cfg)


def test_skips_and_frame_mismatch(tmp_path, caplog):
    table = make_phone_table()
    write_pair_dir(tmp_path / "d", 4, 0, table, drop_labels=("spk_u01",))
    with caplog.at_level("WARNING"):
        utts, labels, feats = load_pairs(tmp_path / "d")
    assert utts == ["spk_u00", "spk_u02", "spk_u03"]
    assert "skipping 1 utterance(s) with features but no labels: spk_u01" in caplog.text
    write_pair_dir(tmp_path / "e", 3, 0, table, truncate={"spk_u02": 5})
    with pytest.raises(DataError, match=r"utterance 'spk_u02': 5 label frames in labels.scp but \d+ feature frames"):
        load_pairs(tmp_path / "e")
    with pytest.raises(DataError, match=r"labels.scp: 'spk_u00': 8 columns, expected 9 \(model.input_dim\)"):
        load_pairs(tmp_path / "e", input_dim=9)


def test_stream_windows_tile_the_concatenation():
    total, S, W = 1003, 4, 30
    x = torch.arange(total, dtype=torch.float32)[:, None].repeat(1, 2)
    ds = StreamWindows(x, x[:, :1], S, W)
    assert ds.stream_len == 250 and ds.dropped_frames == 3 and ds.num_windows == 9
    batches = SaladTask().make_batches(ds, None, epoch=1, seed=0)
    assert batches == SaladTask().make_batches(ds, None, epoch=7, seed=3)  # fixed order
    seen = []
    for s in range(S):
        stream = []
        for k, b in enumerate(batches):
            item = ds[b[s]]
            assert item["window"] == k and item["stream"] == s
            stream.append(item["labels"][:, 0])
        seen.append(torch.cat(stream))
    # stream s is frames [s L, (s + 1) L) of the concatenation, each frame exactly once
    assert torch.equal(torch.cat(seen), torch.arange(S * 250, dtype=torch.float32))
    coll = SaladTask().collate([ds[i] for i in batches[-1]])
    assert coll["labels"].shape == (S, 250 - 8 * W, 2) and coll["window"] == 8


def test_rnn_state_is_carried_between_windows(tts_data):
    """Training windows chained through forward_loss equal one pass over the whole streams."""
    root = tts_data["root"]
    task = get_task("musa_rnn")
    cfg = load_config(task.Config, None, overrides(root, "musa_rnn"))
    torch.manual_seed(0)
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    model.eval()
    preds = []
    orig = model.forward

    def spy(labels, state=None):
        out = orig(labels, state)
        preds.append(out[0].detach())
        return out

    model.forward = spy
    for b in task.make_batches(train, cfg, 1, 0):
        task.forward_loss(model, task.collate([train[i] for i in b]))
    model.forward = orig
    whole, _ = model(train.labels)
    assert torch.allclose(torch.cat(preds, dim=1), whole, atol=1e-5)
    # a window out of sequence (resume mid-epoch) restarts from zero state
    b = task.make_batches(train, cfg, 1, 0)[2]
    batch = task.collate([train[i] for i in b])
    task.reset_state()
    task.forward_loss(model, batch)
    assert task._state is not None and task._next_window == 3


def test_salad_offsets_follow_the_window(tts_data):
    root = tts_data["root"]
    task = get_task("salad")
    cfg = load_config(task.Config, None, overrides(root, "salad"))
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    seen = []
    orig = model.forward
    model.forward = lambda labels, offset=0, lengths=None: (seen.append(offset), orig(labels, offset))[1]
    for b in task.make_batches(train, cfg, 1, 0)[:3]:
        task.forward_loss(model, task.collate([train[i] for i in b]))
    assert seen == [0, 20, 40]


def test_normalisation_round_trip(tts_data):
    root = tts_data["root"]
    task = get_task("salad")
    cfg = load_config(task.Config, None, overrides(root, "salad"))
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    ys = np.concatenate([v[1] for _, v in sorted(tts_data["train"].items())])
    norm = model.normalizer
    assert np.allclose(norm.minimum.numpy(), ys.min(0))
    const = ys.max(0) == ys.min(0)
    assert np.allclose(norm.range.numpy()[~const], (ys.max(0) - ys.min(0))[~const])
    z = norm.normalize(torch.from_numpy(ys))
    assert float(z.min()) >= -1e-6 and float(z.max()) <= 1 + 1e-6
    assert torch.allclose(norm.denormalize(z), torch.from_numpy(ys), atol=1e-5)
    # the training windows hold the normalised targets
    assert torch.allclose(train.feats.reshape(-1, 43), z[: train.stream_len * train.num_streams], atol=1e-6)


def test_scores_against_hand_computation():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(50, 43)).astype(np.float32)
    pred = ref + rng.normal(scale=0.1, size=ref.shape).astype(np.float32)
    ref[:, 41] = rng.integers(0, 2, 50)
    pred[:, 41] = np.where(rng.random(50) < 0.8, ref[:, 41], 1 - ref[:, 41])
    s = AcousticScores(stream_layout(40))
    s.add(pred[:20], ref[:20])
    s.add(pred[20:], ref[20:])
    r = s.result()
    mcd = 10 / math.log(10) * math.sqrt(2) * np.mean(np.sqrt(((pred[:, 1:40] - ref[:, 1:40]) ** 2).sum(1)))
    assert r["mcd"] == pytest.approx(mcd, rel=1e-6)
    both = (pred[:, 41] > 0.5) & (ref[:, 41] > 0.5)
    f0 = np.sqrt(np.mean((np.exp(pred[both, 40]) - np.exp(ref[both, 40])) ** 2))
    assert r["f0_rmse"] == pytest.approx(f0, rel=1e-6)
    assert r["vuv_acc"] == pytest.approx(100 * np.mean((pred[:, 41] > 0.5) == (ref[:, 41] > 0.5)))
    unv = ref[:, 41] <= 0.5
    assert r["uv_recall"] == pytest.approx(100 * np.mean(pred[unv, 41] <= 0.5))


@pytest.mark.parametrize("name", ["salad", "musa_rnn"])
def test_training_lowers_mcd_and_resumes(tts_data, name):
    root = tts_data["root"]
    task = get_task(name)
    exp = root / f"exp_{name}"
    cfg = load_config(task.Config, None, overrides(root, name, **{"trainer.max_epochs": 12}))
    Trainer(task, cfg, exp).fit()
    recs = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in recs if r["kind"] == "epoch"]
    assert len(epochs) == 12
    first, best = epochs[0]["valid/mcd"], min(r["valid/mcd"] for r in epochs)
    assert best < 0.6 * first, (first, best)
    assert {"valid/f0_rmse", "valid/vuv_acc", "valid/loss"} <= set(epochs[-1])
    assert (exp / "output_stats.npz").is_file() and (exp / "feats.yaml").is_file()
    stats = np.load(exp / "output_stats.npz")
    model, _ = load_model(exp)
    assert np.allclose(model.normalizer.minimum.numpy(), stats["minimum"])
    # resume: raising max_epochs continues from the latest checkpoint
    cfg2 = load_config(task.Config, None, overrides(root, name, **{"trainer.max_epochs": 13}))
    Trainer(get_task(name), cfg2, exp).fit()
    recs = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs if r["kind"] == "epoch"] == list(range(1, 14))


def test_resume_mid_epoch_restarts_the_carried_state(tts_data, caplog):
    root = tts_data["root"]
    exp = root / "exp_mid"
    o = overrides(root, "musa_rnn", **{"trainer.max_epochs": 2, "trainer.max_steps": 3})
    Trainer(get_task("musa_rnn"), load_config(MusaRnnTask.Config, None, o), exp).fit()
    state = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["state"]
    assert state["epoch"] == 0 and state["batches_done"] == 3
    o = overrides(root, "musa_rnn", **{"trainer.max_epochs": 2, "trainer.max_steps": 0})
    with caplog.at_level("INFO"):
        Trainer(get_task("musa_rnn"), load_config(MusaRnnTask.Config, None, o), exp).fit()
    assert "resumes at window 3 of the epoch without the carried stream state" in caplog.text
    recs = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs if r["kind"] == "epoch" and not r.get("partial")] == [1, 2]


def test_finished_run_is_not_reused_for_another_split(tts_data):
    """Issue 23 item 2: a re-split under the same data dir paths is not 'already finished'."""
    root = tts_data["root"]
    exp = root / "exp_split"
    o = overrides(root, "musa_rnn", **{"trainer.max_epochs": 1})
    Trainer(get_task("musa_rnn"), load_config(MusaRnnTask.Config, None, o), exp).fit()
    best = (exp / "checkpoints" / "best.pt").read_bytes()
    write_pair_dir(root / "train", 18, 7, tts_data["table"])  # another split: other and more utterances
    with pytest.raises(ConfigError, match=rf"key 'data.train_dir' \({re.escape(str(root / 'train'))}\): its "
                                          r"labels.scp changed \(16 -> 18 utterances\) since the run in .*exp_split"):
        Trainer(get_task("musa_rnn"), load_config(MusaRnnTask.Config, None, o), exp).fit()
    assert (exp / "checkpoints" / "best.pt").read_bytes() == best
    assert set(get_task("salad").data_inputs(load_config(SaladTask.Config, None, overrides(root, "salad")))) == {
        "data.train_dir", "data.valid_dir"}
