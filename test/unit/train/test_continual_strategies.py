"""Continual-learning strategies: EWC (Fisher, penalty), replay buffer (ER / ER-KD / ER-BR), episode plan."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from speechkit.train.continual_strategies import (
    EWC, PLAN_VERSION, STRATEGIES, EpisodePlan, PlanMismatchError, ReplayBuffer, fisher_diagonal, mix_with_buffer,
    settings_fingerprint,
)


def _linear(w=(0.5, -1.0), b=0.25):
    m = torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        m.weight.copy_(torch.tensor([w], dtype=torch.float64))
        m.bias.fill_(b)
    return m


def _mse(model, batch):
    x, y = batch
    return 0.5 * ((model(x)[:, 0] - y) ** 2).mean()


X = np.array([[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.0, 1.0]])
Y = np.array([1.0, 0.0, -1.0, 2.0])


# ============================================================================================ EWC
def test_fisher_of_a_linear_model_by_hand():
    m = _linear()
    r = X @ np.array([0.5, -1.0]) + 0.25 - Y          # residuals; dL/dw = r x, dL/db = r
    batches = [(torch.tensor(X[i:i + 1]), torch.tensor(Y[i:i + 1])) for i in range(4)]
    F = fisher_diagonal(m, _mse, batches)
    np.testing.assert_allclose(F["weight"].numpy()[0], np.mean((r[:, None] * X) ** 2, axis=0), rtol=1e-6)
    np.testing.assert_allclose(F["bias"].numpy(), [np.mean(r ** 2)], rtol=1e-6)
    # batches of 2: the squared gradient of each batch-mean loss, averaged over batches
    F2 = fisher_diagonal(m, _mse, [(torch.tensor(X[i:i + 2]), torch.tensor(Y[i:i + 2])) for i in (0, 2)])
    g = [np.mean(r[i:i + 2, None] * X[i:i + 2], axis=0) for i in (0, 2)]
    np.testing.assert_allclose(F2["weight"].numpy()[0], np.mean(np.square(g), axis=0), rtol=1e-6)
    # the model is left as it was: training mode, no grads, same weights
    assert m.training and m.weight.grad is None
    assert m.weight.detach().numpy().tolist() == [[0.5, -1.0]]
    with pytest.raises(ValueError, match="no batches"):
        fisher_diagonal(m, _mse, [])
    with pytest.raises(ValueError, match="scalar tensor"):
        fisher_diagonal(m, lambda mod, b: mod(b[0]), batches)


def test_fisher_accepts_task_style_loss_and_skips_frozen():
    m = _linear()
    m.bias.requires_grad_(False)
    F = fisher_diagonal(m, lambda mod, b: (_mse(mod, b), {"loss": 0.0}), [(torch.tensor(X), torch.tensor(Y))])
    assert set(F) == {"weight"}


def test_penalty_value_and_gradient_by_hand():
    m = _linear(w=(1.0, 2.0), b=0.0)
    ewc = EWC(lam=3.0)
    assert ewc.penalty(m).item() == 0.0
    F = {"weight": torch.tensor([[0.5, 2.0]], dtype=torch.float64), "bias": torch.tensor([4.0], dtype=torch.float64)}
    anchor = {"weight": torch.tensor([[0.0, 1.0]], dtype=torch.float64),
              "bias": torch.tensor([1.0], dtype=torch.float64)}
    ewc.add(F, anchor, episode=1)
    # (3/2) * (0.5 * 1^2 + 2 * 1^2 + 4 * (-1)^2) = 1.5 * 6.5 (Kirkpatrick et al.'s square; Hemati & Borth's
    # eq. 5 as printed, without it, would give 1.5 * (0.5 + 2 - 4) = -2.25)
    pen = ewc.penalty(m)
    assert pen.item() == pytest.approx(9.75)
    pen.backward()
    # gradient lambda * F * (theta - theta*), also checked against autograd of the formula
    np.testing.assert_allclose(m.weight.grad.numpy(), [[3 * 0.5 * 1.0, 3 * 2.0 * 1.0]])
    np.testing.assert_allclose(m.bias.grad.numpy(), [3 * 4.0 * -1.0])
    w = m.weight.detach().clone().requires_grad_(True)
    ref = 1.5 * (F["weight"].float() * (w - anchor["weight"]) ** 2).sum()
    ref.backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), w.grad.numpy())


def test_online_sum_vs_per_episode_anchors():
    m = _linear(w=(1.0, 1.0), b=0.0)
    F1 = {"weight": torch.ones(1, 2, dtype=torch.float64), "bias": torch.ones(1, dtype=torch.float64)}
    F2 = {"weight": 2 * torch.ones(1, 2, dtype=torch.float64), "bias": torch.zeros(1, dtype=torch.float64)}
    A1 = {"weight": torch.zeros(1, 2, dtype=torch.float64), "bias": torch.zeros(1, dtype=torch.float64)}
    A2 = {"weight": torch.full((1, 2), 0.5, dtype=torch.float64), "bias": torch.zeros(1, dtype=torch.float64)}
    online, per = EWC(2.0), EWC(2.0, mode="per_episode")
    for e in (online, per):
        e.add(F1, A1, 1)
        e.add(F2, A2, 2)
    # online: (F1 + F2) and the latest anchor: 1 * (3 * 0.25 * 2) = 1.5
    assert len(online.terms) == 1 and online.penalty(m).item() == pytest.approx(1.5)
    # per episode: 1 * (1 * 1 * 2) + 1 * (2 * 0.25 * 2) = 3
    assert len(per.terms) == 2 and per.penalty(m).item() == pytest.approx(3.0)


def test_consolidate_and_state_round_trip(tmp_path):
    m = _linear()
    ewc = EWC(lam=10.0)
    batches = [(torch.tensor(X), torch.tensor(Y))]
    F = ewc.consolidate(m, _mse, batches, episode=2)
    with torch.no_grad():
        m.weight.add_(0.1)
    before = ewc.penalty(m).item()
    assert before > 0
    torch.save(ewc.state_dict(), tmp_path / "ewc.pt")
    restored = EWC(lam=10.0)
    restored.load_state_dict(torch.load(tmp_path / "ewc.pt", weights_only=True))
    assert restored.penalty(m).item() == pytest.approx(before) and restored.episodes == [2]
    assert torch.equal(restored.terms[0][0]["weight"], F["weight"])
    with pytest.raises(ValueError, match="lambda=10.0.*lambda=1.0"):
        EWC(lam=1.0).load_state_dict(ewc.state_dict())
    with pytest.raises(ValueError, match="'weight'"):
        ewc.penalty(torch.nn.Sequential(torch.nn.Linear(2, 1)))


# ============================================================================================ replay
def _items(spk, n):
    return {f"{spk}_{i:02d}": {"text": f"t{i}", "feats": torch.full((2,), float(i))} for i in range(n)}


def test_buffer_selection_is_seeded_and_per_speaker(caplog):
    b1, b2 = ReplayBuffer(3, seed=7), ReplayBuffer(3, seed=7)
    k1 = b1.add_speaker("a", _items("a", 10))
    b2.add_speaker("b", _items("b", 10))
    k2 = b2.add_speaker("a", _items("a", 10))
    assert k1 == k2 and len(k1) == 3 and k1 == sorted(k1)      # independent of the order of speakers
    assert any(ReplayBuffer(3, seed=s).select("a", _items("a", 10)) != k1 for s in range(5))
    with caplog.at_level(logging.WARNING):
        kept = b1.add_speaker("c", _items("c", 2))
    assert kept == ["c_00", "c_01"] and "speaker 'c' has only 2 utterances, fewer than the buffer size 3" in caplog.text
    assert b1.speakers == ["a", "c"] and len(b1) == 5
    with pytest.raises(ValueError, match="already buffered"):
        b1.add_speaker("a", _items("a", 3))
    with pytest.raises(ValueError, match="no utterances"):
        b1.add_speaker("d", {})


def test_buffer_selection_draws_without_replacement_uniformly():
    counts = np.zeros(10)
    for seed in range(300):
        for k in ReplayBuffer(2, seed=seed).select("spk", [f"u{i}" for i in range(10)]):
            counts[int(k[1:])] += 1
    assert counts.sum() == 600 and counts.min() > 35 and counts.max() < 85   # expected 60 each


def test_er_kd_produce_replaces_targets_and_er_br_replicates():
    b = ReplayBuffer(2, seed=0)
    calls = []

    def produce(kv):
        calls.append([k for k, _ in kv])
        return [dict(item, feats=item["feats"] * 0 - 1) for _, item in kv]   # "model output"

    keys = b.add_speaker("a", _items("a", 5), produce=produce)
    assert calls == [keys]
    assert all(torch.equal(it["feats"], torch.full((2,), -1.0)) for _, it in b.items())
    assert [it["text"] for _, it in b.items()] == [_items("a", 5)[k]["text"] for k in keys]   # text kept
    rep = b.items(replicate=3)
    assert [k for k, _ in rep] == [keys[0]] * 3 + [keys[1]] * 3
    with pytest.raises(ValueError, match="returned 1 items for the 2"):
        ReplayBuffer(2).add_speaker("a", _items("a", 5), produce=lambda kv: kv[:1])


def test_buffer_state_round_trip(tmp_path):
    b = ReplayBuffer(2, seed=3)
    b.add_speaker("a", _items("a", 5))
    b.add_speaker("b", _items("b", 1))
    torch.save(b.state_dict(), tmp_path / "buf.pt")
    r = ReplayBuffer(2, seed=3)
    r.load_state_dict(torch.load(tmp_path / "buf.pt", weights_only=True))
    assert r.speakers == ["a", "b"] and [k for k, _ in r.items()] == [k for k, _ in b.items()]
    assert torch.equal(r.items()[0][1]["feats"], b.items()[0][1]["feats"])
    with pytest.raises(ValueError, match="N_B=2, seed=3 but this run uses N_B=5, seed=3"):
        ReplayBuffer(5, seed=3).load_state_dict(b.state_dict())


def test_mix_is_a_seeded_shuffle():
    new, buf = list(range(5)), ["x", "y"]
    m1 = mix_with_buffer(new, buf, seed=1, episode=2)
    assert sorted(map(str, m1)) == sorted(map(str, new + buf)) and m1 == mix_with_buffer(new, buf, seed=1, episode=2)
    assert m1 != new + buf
    assert m1 != mix_with_buffer(new, buf, seed=1, episode=3) or m1 != mix_with_buffer(new, buf, seed=2, episode=2)


# ============================================================================================ plan
SPK2ITEMS = {s: _items(s, 4) for s in ("s1", "s2", "s3")}


def test_plan_order_from_seed():
    p = EpisodePlan.create(["s3", "s1", "s2"], "sa", seed=5)
    assert sorted(p.order) == ["s1", "s2", "s3"] and p.order == EpisodePlan.create(["s1", "s2", "s3"], "sa", 5).order
    orders = {tuple(EpisodePlan.create(["s1", "s2", "s3"], "sa", seed).order) for seed in range(30)}
    assert len(orders) == 6                                     # every permutation occurs
    assert p.speaker(1) == p.order[0] and p.seen(2) == p.order[:2]
    with pytest.raises(ValueError, match="1..3"):
        p.speaker(4)


def test_training_sets_per_strategy():
    order = ["s2", "s3", "s1"]
    for s in ("jt", "jt_cumulative"):
        jt = EpisodePlan(s, order, seed=0)
        assert [k for k, _ in jt.training_set(2, SPK2ITEMS)] == sorted(SPK2ITEMS["s2"]) + sorted(SPK2ITEMS["s3"])
        assert jt.training_speakers(3) == order
    # the paper's jt: from theta_init, early-stopped on every seen speaker; the cumulative variant as
    # every other strategy: from the previous episode, early-stopped on the new speaker
    paper = EpisodePlan("jt", order, 0)
    assert paper.restarts and paper.validation_speakers(2) == ["s2", "s3"]
    for s in ("jt_cumulative", "sa", "er"):
        plan = EpisodePlan(s, order, 0, buffer_size=1 if s == "er" else 0)
        assert not plan.restarts and plan.validation_speakers(2) == ["s3"]
    for s in ("sa", "ewc"):
        plan = EpisodePlan(s, order, seed=0, ewc_lambda=1.0 if s == "ewc" else 0.0)
        assert [k for k, _ in plan.training_set(3, SPK2ITEMS)] == sorted(SPK2ITEMS["s1"])
    er = EpisodePlan("er_br", order, seed=0, buffer_size=1, replicate=10)
    buf = ReplayBuffer(1, seed=0)
    assert [k for k, _ in er.training_set(1, SPK2ITEMS, buf)] != [] and len(er.training_set(1, SPK2ITEMS, buf)) == 4
    buf.add_speaker("s2", SPK2ITEMS["s2"])
    buf.add_speaker("s3", SPK2ITEMS["s3"])
    ts = er.training_set(3, SPK2ITEMS, buf)
    keys = [k for k, _ in ts]
    assert len(ts) == 4 + 2 * 10 and sum(k.startswith("s1") for k in keys) == 4
    assert keys.count(buf.items()[0][0]) == 10 and keys != sorted(keys)
    assert ts == er.training_set(3, SPK2ITEMS, buf)             # deterministic
    with pytest.raises(ValueError, match=r"holds speakers \['s2', 's3'\], expected .*\['s2'\]"):
        er.training_set(2, SPK2ITEMS, buf)
    with pytest.raises(ValueError, match="needs a replay buffer"):
        er.training_set(1, SPK2ITEMS)
    with pytest.raises(ValueError, match="speaker 's1' has no training utterances"):
        EpisodePlan("sa", order, 0).training_set(3, {"s1": {}})


def test_plan_validation_and_check_trained():
    assert set(STRATEGIES) == {"jt", "jt_cumulative", "sa", "ewc", "er", "er_kd", "er_br"}
    with pytest.raises(ValueError, match="unknown continual strategy 'foo'"):
        EpisodePlan("foo", ["a"], 0)
    with pytest.raises(ValueError, match="needs buffer_size >= 1"):
        EpisodePlan("er", ["a"], 0)
    with pytest.raises(ValueError, match="only applies to er_br"):
        EpisodePlan("er", ["a"], 0, buffer_size=1, replicate=3)
    with pytest.raises(ValueError, match="ewc_lambda > 0"):
        EpisodePlan("ewc", ["a"], 0)
    p = EpisodePlan("er_kd", ["a", "b"], 0, buffer_size=2)
    assert p.uses_buffer and p.distills and not p.uses_ewc
    p.check_trained("a", 1)
    with pytest.raises(ValueError, match="speaker 'b' was never trained by episode 1"):
        p.check_trained("b", 1)


def test_resume_check_names_both(tmp_path):
    path = tmp_path / "plan.json"
    req = EpisodePlan.create(["s1", "s2", "s3"], "er", seed=1, buffer_size=2)
    assert EpisodePlan.resume_or_save(req, path) == req and path.is_file()
    assert EpisodePlan.resume_or_save(EpisodePlan.create(["s1", "s2", "s3"], "er", seed=1, buffer_size=2), path) == req
    other = EpisodePlan("sa", list(reversed(req.order)), seed=1)
    with pytest.raises(PlanMismatchError) as e:
        EpisodePlan.resume_or_save(other, path)
    msg = str(e.value)
    assert "strategy: saved 'er', requested 'sa'" in msg
    assert f"order: saved {req.order!r}, requested {other.order!r}" in msg and str(path) in msg
    # version 1 (no "version" key): its jt was the cumulative variant
    old = {k: v for k, v in EpisodePlan("jt", ["s1", "s2"], seed=1).to_dict().items() if k != "version"}
    path.write_text(json.dumps(old))
    assert EpisodePlan.load(path).strategy == "jt_cumulative"
    assert EpisodePlan.load(path).version == EpisodePlan("sa", ["a"], 0).version == PLAN_VERSION == 3
    with pytest.raises(PlanMismatchError,
                       match="saved 'jt_cumulative', requested 'jt'.*now strategy=jt_cumulative"):
        EpisodePlan.resume_or_save(EpisodePlan("jt", ["s1", "s2"], seed=1), path)
    path.write_text(json.dumps({**old, "strategy": "sa"}))
    assert EpisodePlan.load(path).strategy == "sa"
    path.write_text(json.dumps({**old, "version": 4}))
    with pytest.raises(Exception, match="plan version 4 is newer"):
        EpisodePlan.load(path)
    path.write_text("{\"strategy\": 1}")
    with pytest.raises(Exception, match="not a valid episode plan"):
        EpisodePlan.load(path)


def test_resume_check_compares_the_training_settings(tmp_path, caplog):
    """Audit d5(b): a resumed run with other training settings reused the finished episodes. plan.json
    (version 3) records them with their SHA-256; a resume whose settings differ is an error naming every
    key that differs with both values; a setting added or dropped since is only warned about; a plan
    without them (older speechkit) resumes with a warning."""
    path = tmp_path / "plan.json"
    settings = {"trainer.lr": 0.001, "trainer.max_epochs": 5, "trainer.betas": (0.9, 0.999), "data.window": 20,
                "model.hidden": 32}

    def plan(**changes):
        return EpisodePlan.create(["s1", "s2"], "sa", seed=1, training={**settings, **changes})

    saved = EpisodePlan.resume_or_save(plan(), path)
    on_disk = json.loads(path.read_text())
    assert on_disk["version"] == PLAN_VERSION and on_disk["training"]["trainer.betas"] == [0.9, 0.999]
    assert on_disk["training_sha256"] == settings_fingerprint(settings) == saved.training_sha256
    assert len(saved.training_sha256) == 64 and settings_fingerprint(dict(reversed(list(settings.items())))) == \
        saved.training_sha256
    assert EpisodePlan.resume_or_save(plan(), path) == saved  # the same settings: resumes
    with pytest.raises(PlanMismatchError) as e:
        EpisodePlan.resume_or_save(plan(**{"trainer.lr": 0.05, "data.window": 30}), path)
    assert f"the run in {path} was trained with other settings" in str(e.value)
    assert "(trainer.lr: saved 0.001, requested 0.05; data.window: saved 20, requested 30)" in str(e.value)
    with pytest.raises(PlanMismatchError, match=r"trainer.betas: saved \[0.9, 0.999\], requested \[0.9, 0.99\]"):
        EpisodePlan.resume_or_save(plan(**{"trainer.betas": [0.9, 0.99]}), path)
    # a setting speechkit added since (absent from the saved plan) or dropped: warned, not an error
    caplog.clear()
    newer = EpisodePlan.create(["s1", "s2"], "sa", seed=1, training={
        **{k: v for k, v in settings.items() if k != "model.hidden"}, "trainer.new_knob": 1})
    with caplog.at_level("WARNING"):
        assert EpisodePlan.resume_or_save(newer, path) == saved
    assert "setting trainer.new_knob is not in the saved plan" in caplog.text
    assert "model.hidden = 32 is not a setting any more" in caplog.text
    with pytest.raises(PlanMismatchError, match="trainer.lr: saved 0.001, requested 0.1"):
        EpisodePlan.resume_or_save(EpisodePlan.create(["s1", "s2"], "sa", seed=1, training={
            **settings, "trainer.lr": 0.1, "trainer.new_knob": 1}), path)
    # settings that do not match their fingerprint (an edited plan.json): the fingerprints are named
    path.write_text(json.dumps({**on_disk, "training_sha256": "0" * 64}))
    with pytest.raises(PlanMismatchError, match=f"training settings fingerprint: saved {'0' * 64}, requested "
                                                f"{saved.training_sha256}"):
        EpisodePlan.resume_or_save(plan(), path)
    # a plan written before version 3: no settings to compare, resumes with a warning
    path.write_text(json.dumps({k: v for k, v in on_disk.items()
                                if k not in ("training", "training_sha256", "version")} | {"version": 2}))
    caplog.clear()
    with caplog.at_level("WARNING"):
        old = EpisodePlan.resume_or_save(plan(**{"trainer.lr": 0.05}), path)
    assert old.order == saved.order and old.training == {} and old.training_sha256 == ""
    assert f"{path} was written by an older speechkit without the run's training settings" in caplog.text
    assert json.loads(path.read_text())["version"] == 2  # left as it was
    # a caller that records no settings is not checked
    assert EpisodePlan.resume_or_save(EpisodePlan.create(["s1", "s2"], "sa", seed=1), path).order == saved.order
