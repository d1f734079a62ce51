"""speechkit.continual.driver / speechkit-train-continual on a tiny speaker-conditioned SALAD:
episode data per strategy, ER-KD targets, the EWC penalty, optimiser reset, resume, plan mismatch, CLI."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.bin.train_continual import main
from speechkit.data.speakers import read_speakers
from speechkit.tasks import get_task, load_model
from speechkit.tasks.acoustic import SaladTask
from speechkit.train import Trainer
from speechkit.continual import driver as cd
from speechkit.train.checkpoint import load_checkpoint
from speechkit.train.continual_strategies import EpisodePlan, PlanMismatchError
from speechkit.utils.config import ConfigError, load_config

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)

CONTINUAL = {"c1": 4, "c2": 3, "c3": 5}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """theta_init trained on p1, p2; continual speakers c1-c3 (train 4/3/5, valid 1 each)."""
    root = tmp_path_factory.mktemp("continual")
    table = H.phone_table()
    H.write_speaker_dir(root / "pre_train", {"p1": 4, "p2": 4}, seed=1, table=table)
    H.write_speaker_dir(root / "pre_valid", {"p1": 1, "p2": 1}, seed=2, table=table, tag="v")
    H.write_speaker_dir(root / "train", CONTINUAL, seed=3, table=table)
    H.write_speaker_dir(root / "valid", {s: 1 for s in CONTINUAL}, seed=4, table=table, tag="v")
    scp = H.write_spk_embeddings(root / "emb", ["p1", "p2", *CONTINUAL])
    task = get_task("salad")
    cfg = load_config(task.Config, None, H.salad_overrides(root / "pre_train", root / "pre_valid", scp,
                                                           **{"trainer.max_epochs": 4}))
    Trainer(task, cfg, root / "init").fit()
    return root


def config(root: Path, strategy: str, **extra) -> cd.ContinualConfig:
    o = {"init_dir": root / "init", "train_dir": root / "train", "valid_dir": root / "valid", "strategy": strategy,
         "seed": 3, "trainer.max_epochs": 2, "trainer.patience": 0, "trainer.lr": 1e-3, "trainer.num_threads": 1,
         "trainer.device": "cpu", "trainer.log_interval": 1, "num_streams": 2, "window": 20}
    if strategy in ("er", "er_kd", "er_br"):
        o["buffer_size"] = 2
    if strategy == "er_br":
        o["replicate"] = 3
    if strategy == "ewc":
        o["ewc_lambda"] = 100.0
    o.update(extra)
    return load_config(cd.ContinualConfig, None, [f"{k}={v}" for k, v in o.items()])


@pytest.fixture
def spy(monkeypatch):
    """Records each episode task (its data, init checkpoint, EWC) when its Trainer starts."""
    seen = []

    class SpyTrainer(Trainer):
        def fit(self):
            seen.append({"keys": list(self.task.episode.keys), "speakers": list(self.task.episode.speakers),
                         "feats": list(self.task.episode.feats), "init": self.task.init_checkpoint,
                         "ewc_terms": len(self.task.ewc.terms) if self.task.ewc else 0,
                         "valid": list(self.task.valid.keys)})
            return super().fit()

    monkeypatch.setattr(cd, "Trainer", SpyTrainer)
    return seen


def order_of(root: Path, seed: int = 3) -> list[str]:
    return EpisodePlan.create(CONTINUAL, "sa", seed).order


@pytest.mark.parametrize("strategy", ["jt", "jt_cumulative", "sa", "er", "er_br"])
def test_episode_data_per_strategy(setup, tmp_path, spy, strategy):
    root = setup
    order = order_of(root)
    recs = cd.run_continual(config(root, strategy, **{"trainer.max_epochs": 1}), tmp_path / "exp")
    assert [r["speaker"] for r in recs] == order and len(spy) == 3
    for t, (rec, ep) in enumerate(zip(recs, spy), start=1):
        new = order[t - 1]
        # early stopping: jt (the paper's joint training) on every speaker it trains on, the others
        # (jt_cumulative included) on the new speaker only
        valid = order[:t] if strategy == "jt" else [new]
        assert ep["valid"] == [f"{s}-v00" for s in valid] and rec["valid_speakers"] == valid
        assert rec["utterances"]["new"] == CONTINUAL[new]
        own = order[:t] if strategy in ("jt", "jt_cumulative") else [new]
        own_keys = sorted(k for k, s in zip(ep["keys"], ep["speakers"]) if s in own)
        assert own_keys == sorted(f"{s}-u{i:02d}" for s in own for i in range(CONTINUAL[s]))
        buffered = [k for k, s in zip(ep["keys"], ep["speakers"]) if s not in own]
        if strategy in ("jt", "jt_cumulative", "sa"):
            assert buffered == [] and rec["utterances"]["buffer"] == 0
            if strategy == "sa":
                assert ep["keys"] == sorted(ep["keys"])  # no shuffling without a buffer
            continue
        k = 3 if strategy == "er_br" else 1
        # N_B = 2 utterances of every earlier speaker, each K times
        assert {s: sum(1 for b in buffered if b.startswith(s)) for s in order[:t - 1]} == \
               {s: 2 * k for s in order[:t - 1]}
        assert all(buffered.count(b) == k for b in buffered)
        assert rec["utterances"]["buffer"] == 2 * k * (t - 1) and rec["buffer_size"] == 2 * (t - 1)
        assert rec["utterances"]["total"] == CONTINUAL[new] + 2 * k * (t - 1)
        assert rec["buffer_speakers"] == order[:t - 1]
    # each episode starts from the previous episode's best weights, a fresh trainer in its own dir;
    # jt's every episode from theta_init
    theta_init = root / "init" / "checkpoints" / "best.pt"
    assert spy[0]["init"] == theta_init
    for t in (2, 3):
        prev = tmp_path / "exp" / cd.episode_dir_name(t - 1, order[t - 2])
        assert spy[t - 1]["init"] == (theta_init if strategy == "jt" else prev / "checkpoints" / "best.pt")
        assert recs[t - 1]["initial_weights"] == ("theta_init" if strategy == "jt" else prev.name)
    assert recs[0]["initial_weights"] == "theta_init"
    last = tmp_path / "exp" / cd.episode_dir_name(3, order[2])
    assert read_speakers(last / "speakers") == ["c1", "c2", "c3", "p1", "p2"]
    lines = (tmp_path / "exp" / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(x)["episode"] for x in lines] == [1, 2, 3]


def test_jt_is_one_training_from_theta_init_per_episode(setup, tmp_path):
    """The paper's JT at episode t = theta_init trained on the speakers seen up to t: its episode 1 is
    bitwise the cumulative variant's (same data, weights and early stopping), its episode 2 is not,
    and a jt run on the first two speakers only gives its episode 2 again (episodes are independent)."""
    root = setup
    order = order_of(root)
    one = {"trainer.max_epochs": 1}
    cd.run_continual(config(root, "jt", **one), tmp_path / "jt")
    cd.run_continual(config(root, "jt_cumulative", **one), tmp_path / "cum")

    def weights(run, t, spk):
        return load_checkpoint(tmp_path / run / cd.episode_dir_name(t, spk) / "checkpoints" / "best.pt")["model"]

    a, b = weights("jt", 1, order[0]), weights("cum", 1, order[0])
    assert all(torch.equal(a[k], b[k]) for k in a)
    a, b = weights("jt", 2, order[1]), weights("cum", 2, order[1])
    assert not all(torch.equal(a[k], b[k]) for k in a)
    # the same two speakers as the first run's first two episodes, in the same order
    spk2 = next(s for s in range(100) if EpisodePlan.create(order[:2], "jt", s).order == order[:2])
    cd.run_continual(config(root, "jt", seed=spk2, speakers=f"[{','.join(order[:2])}]", **one), tmp_path / "jt2")
    a, b = weights("jt", 2, order[1]), weights("jt2", 2, order[1])
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_plans_without_version_resume_as_jt_cumulative(setup, tmp_path, capsys):
    """A run saved before plan.json had a version, with strategy 'jt', was the cumulative variant: it
    resumes as jt_cumulative (its finished episodes reused), and --strategy jt on it is an error saying so."""
    root = setup
    order = order_of(root)
    one = {"trainer.max_epochs": 1}
    cd.run_continual(config(root, "jt_cumulative", **one), tmp_path / "old")
    plan = json.loads((tmp_path / "old" / "plan.json").read_text())
    assert plan["version"] == 3 and plan["strategy"] == "jt_cumulative"
    del plan["version"]
    plan["strategy"] = "jt"
    (tmp_path / "old" / "plan.json").write_text(json.dumps(plan))
    def stamps():
        return [(tmp_path / "old" / cd.episode_dir_name(t, s) / "episode.json").stat().st_mtime_ns
                for t, s in enumerate(order, 1)]

    done = stamps()
    finished = []
    cd.run_continual(config(root, "jt_cumulative", **one), tmp_path / "old",
                     after_episode=lambda t, d: finished.append(t))
    assert finished == [] and stamps() == done
    with pytest.raises(PlanMismatchError, match=r"strategy: saved 'jt_cumulative', requested 'jt'\).*"
                                                r"strategy=jt trains every episode from theta_init"):
        cd.run_continual(config(root, "jt", **one), tmp_path / "old")


def test_er_kd_targets_are_the_models_outputs(setup, tmp_path, spy):
    root = setup
    order = order_of(root)
    cd.run_continual(config(root, "er_kd", **{"trainer.max_epochs": 1}), tmp_path / "exp")
    ep1 = tmp_path / "exp" / cd.episode_dir_name(1, order[0])
    model, _ = load_model(ep1)
    buf = load_checkpoint(ep1 / "buffer.pt", expect_format=False)
    assert buf["speakers"] == [order[0]] and len(buf["keys"][0]) == 2
    from speechkit.tasks.acoustic import load_pairs

    utts, labels, feats = load_pairs(root / "train")
    data = dict(zip(utts, zip(labels, feats)))
    for key, item in zip(buf["keys"][0], buf["items"][0]):
        x = np.concatenate([data[key][0], np.tile(H.speaker_vector(order[0]), (len(data[key][0]), 1))], 1)
        with torch.no_grad():
            ref = model.normalizer.denormalize(model.infer(torch.from_numpy(x)[None]))[0].numpy()
        assert np.allclose(item["feats"].numpy(), ref, atol=1e-6)
        assert not np.allclose(ref, data[key][1], atol=1e-2)  # not the ground truth
        # episode 2 trains on exactly these targets for that utterance
        i = spy[1]["keys"].index(key)
        assert np.array_equal(spy[1]["feats"][i], item["feats"].numpy())


def _epoch_records(ep_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (ep_dir / "metrics.jsonl").read_text().splitlines() if '"epoch"' in x]


def test_ewc_penalty_only_for_ewc(setup, tmp_path, spy):
    root = setup
    order = order_of(root)
    cd.run_continual(config(root, "ewc", pretrain_dir=root / "pre_train"), tmp_path / "ewc")
    cd.run_continual(config(root, "sa"), tmp_path / "sa")
    assert [ep["ewc_terms"] for ep in spy[:3]] == [1, 1, 1]  # online EWC: one running term
    for t, spk in enumerate(order, start=1):
        ewc_recs = [r for r in _epoch_records(tmp_path / "ewc" / cd.episode_dir_name(t, spk)) if r["kind"] == "epoch"]
        sa_recs = [r for r in _epoch_records(tmp_path / "sa" / cd.episode_dir_name(t, spk)) if r["kind"] == "epoch"]
        assert all("train/ewc" not in r for r in sa_recs)
        for r in ewc_recs:
            assert r["train/ewc"] > 0
            assert r["train/loss"] == pytest.approx(r["train/mse"] + r["train/ewc"], rel=1e-5)
    st = load_checkpoint(tmp_path / "ewc" / cd.episode_dir_name(3, order[2]) / "ewc.pt", expect_format=False)
    assert st["episodes"] == [0, 1, 2] and st["lam"] == 100.0
    # Fisher at episode 2 = episode 1's Fisher + that of episode 1's data at episode 1's best weights
    st1 = load_checkpoint(tmp_path / "ewc" / cd.episode_dir_name(1, order[0]) / "ewc.pt", expect_format=False)
    st2 = load_checkpoint(tmp_path / "ewc" / cd.episode_dir_name(2, order[1]) / "ewc.pt", expect_format=False)
    name = next(iter(st1["fisher"][0]))
    assert torch.all(st2["fisher"][0][name] >= st1["fisher"][0][name])
    best1 = load_checkpoint(tmp_path / "ewc" / cd.episode_dir_name(1, order[0]) / "checkpoints" / "best.pt")
    assert torch.equal(st2["anchor"][0][name], best1["model"][name])


def test_optimiser_reset_per_episode(setup, tmp_path):
    root = setup
    order = order_of(root)
    cd.run_continual(config(root, "er"), tmp_path / "exp")
    for t, spk in enumerate(order, start=1):
        ckpt = load_checkpoint(tmp_path / "exp" / cd.episode_dir_name(t, spk) / "checkpoints" / "latest.pt")
        steps = ckpt["state"]["step"]
        adam_steps = {float(s["step"]) for s in ckpt["optimizer"]["state"].values()}
        assert adam_steps == {float(steps)}  # Adam's moments count only this episode's updates
        assert ckpt["scheduler"]["last_epoch"] == steps  # and so does the LR schedule


def test_resume_after_kill_reproduces_the_run(setup, tmp_path, kill_forward_loss):
    root = setup
    order = order_of(root)
    extra = {"trainer.save_interval_steps": 1, "trainer.max_epochs": 2}
    cd.run_continual(config(root, "ewc", **extra), tmp_path / "a")

    # episode 1 (c3): 2 epochs x 4 windows; episode 2 (c2): 2 windows per epoch; dies in its 2nd epoch
    kill = kill_forward_loss(SaladTask, 12)
    with pytest.raises(kill.error):
        cd.run_continual(config(root, "ewc", **extra), tmp_path / "b")
    kill.restore()
    ep1, ep2 = (tmp_path / "b" / cd.episode_dir_name(t, order[t - 1]) for t in (1, 2))
    assert (ep1 / "episode.json").is_file() and not (ep2 / "episode.json").is_file()
    state = load_checkpoint(ep2 / "checkpoints" / "latest.pt")["state"]
    assert (state["step"], state["epoch"], state["batches_done"]) == (3, 1, 1)  # mid-epoch 2
    ep1_mtime = (ep1 / "checkpoints" / "best.pt").stat().st_mtime_ns

    finished = []
    recs = cd.run_continual(config(root, "ewc", **extra), tmp_path / "b", after_episode=lambda t, d: finished.append(t))
    assert finished == [2, 3]  # episode 1 skipped, episode 2 resumed
    assert (ep1 / "checkpoints" / "best.pt").stat().st_mtime_ns == ep1_mtime
    for t, spk in enumerate(order, start=1):
        a = load_checkpoint(tmp_path / "a" / cd.episode_dir_name(t, spk) / "checkpoints" / "best.pt")["model"]
        b = load_checkpoint(tmp_path / "b" / cd.episode_dir_name(t, spk) / "checkpoints" / "best.pt")["model"]
        assert all(torch.equal(a[k], b[k]) for k in a), f"episode {t}"
    ra = [json.loads(x) for x in (tmp_path / "a" / "episodes.jsonl").read_text().splitlines()]
    for x, y in zip(ra, recs):
        assert {k: v for k, v in x.items() if k != "model_dir"} == {k: v for k, v in y.items() if k != "model_dir"}


def test_plan_mismatch_is_an_error(setup, tmp_path, capsys):
    root = setup
    cd.run_continual(config(root, "sa", **{"trainer.max_epochs": 1}), tmp_path / "exp")
    with pytest.raises(PlanMismatchError, match=r"strategy: saved 'sa', requested 'er'"):
        cd.run_continual(config(root, "er", **{"trainer.max_epochs": 1}), tmp_path / "exp")
    with pytest.raises(PlanMismatchError, match=r"order: saved \[.*\], requested \['c[123]', 'c[123]'\]"):
        cd.run_continual(config(root, "sa", speakers="[c1,c3]", **{"trainer.max_epochs": 1}), tmp_path / "exp")


def test_finished_episodes_are_not_reused_for_other_data(setup, tmp_path):
    """Issue 23 audit: a finished episode (episode.json) was skipped whatever its data now hold."""
    root = setup
    table = H.phone_table()
    train = tmp_path / "train"
    H.write_speaker_dir(train, CONTINUAL, seed=3, table=table)
    one_epoch = {"trainer.max_epochs": 1, "train_dir": train, "speakers": "[c2]"}  # one short episode
    cd.run_continual(config(root, "sa", **one_epoch), tmp_path / "exp")
    ep1 = tmp_path / "exp" / cd.episode_dir_name(1, "c2")
    done = (ep1 / "episode.json").read_bytes()
    cd.run_continual(config(root, "sa", **one_epoch), tmp_path / "exp")  # same data: skipped
    H.write_speaker_dir(train, CONTINUAL, seed=5, table=table)  # other utterances under the same path
    with pytest.raises(ConfigError, match=rf"key 'data.train_dir' \({train}\): its labels.scp changed \(other "
                                          rf"content, 12 utterances as before\) since the run in {ep1} was trained "
                                          r"on it .*; episode 1 \(c2\) of this continual run was trained on other data"):
        cd.run_continual(config(root, "sa", **one_epoch), tmp_path / "exp")
    assert (ep1 / "episode.json").read_bytes() == done


def _cli_args(root: Path, exp: Path, *extra: str) -> list[str]:
    return ["--exp-dir", str(exp), "--init-dir", str(root / "init"), "--train-dir", str(root / "train"),
            "--valid-dir", str(root / "valid"), "--trainer.max-epochs", "1", "--trainer.num-threads", "1",
            "--trainer.device", "cpu", "--num-streams", "2", "--window", "20", *extra]


def test_cli(setup, tmp_path, capsys):
    root = setup
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--strategy jt|jt_cumulative|sa|ewc|er|er_kd|er_br" in capsys.readouterr().out
    assert main(["--print-config", "--strategy", "er", "--buffer-size", "3"]) == 0
    out = capsys.readouterr().out
    assert "strategy: er" in out and "buffer_size: 3" in out
    assert main(["--strategy", "sa"]) == 1
    assert "--exp-dir is required" in capsys.readouterr().err
    assert main(["--exp-dir", str(tmp_path / "x"), "--strategy", "er"]) == 1
    assert "key 'init_dir' is required" in capsys.readouterr().err
    assert main(_cli_args(root, tmp_path / "x", "--strategy", "er")) == 1  # no buffer size
    assert "strategy 'er' needs buffer_size >= 1" in capsys.readouterr().err
    assert main(_cli_args(root, tmp_path / "x", "--strategy", "sa", "--speakers", "[c1,c9]")) == 1
    assert "speaker 'c9' has no training utterances" in capsys.readouterr().err
    # theta_init without speaker conditioning
    task = get_task("salad")
    o = H.salad_overrides(root / "pre_train", root / "pre_valid", "''", **{"trainer.max_epochs": 1})
    Trainer(task, load_config(task.Config, None, o), tmp_path / "plain").fit()
    assert main(_cli_args(root, tmp_path / "y", "--init-dir", str(tmp_path / "plain"))) == 1
    assert "trained without data.speaker_embeddings" in capsys.readouterr().err
    # a speaker without a vector
    only = H.write_spk_embeddings(tmp_path / "emb", ["p1", "p2", "c1", "c2"])
    assert main(_cli_args(root, tmp_path / "y", "--speaker-embeddings", str(only))) == 1
    assert "no vector for speaker 'c3'" in capsys.readouterr().err
    # a run
    assert main(_cli_args(root, tmp_path / "ok", "--strategy", "sa")) == 0
    assert len((tmp_path / "ok" / "episodes.jsonl").read_text().splitlines()) == 3
    assert "episode 3" in capsys.readouterr().err


def _done_stamps(exp: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in sorted(exp.glob("episode_*/episode.json"))}


def test_resume_with_other_training_settings_is_an_error(setup, tmp_path, caplog):
    """Audit d5(b): a re-run with another --trainer.lr, --trainer.max_epochs, --num-streams, ... silently
    reused the finished episodes and reported them as this run's. plan.json records the training settings
    (and their SHA-256); another value of any is a PlanMismatchError naming the keys, before anything is
    reused or trained. What only changes how a run runs (threads, device, logging) may change; so may
    --pretrain-dir for a strategy that does not read it (the recipe passes it to every run)."""
    root = setup
    one = {"trainer.max_epochs": 1, "speakers": "[c2,c1]"}
    exp = tmp_path / "exp"
    cd.run_continual(config(root, "sa", **one), exp)
    plan = json.loads((exp / "plan.json").read_text())
    training = plan["training"]
    assert plan["version"] == 3 and len(plan["training_sha256"]) == 64
    assert training["trainer.lr"] == 1e-3 and training["trainer.max_epochs"] == 1 and training["data.num_streams"] == 2
    assert training["data.window"] == 20 and any(k.startswith("model.") for k in training)
    assert not {"trainer.device", "trainer.num_threads", "trainer.log_interval", "data.train_dir", "data.valid_dir",
                "ewc_mode", "pretrain_dir"} & set(training)
    done = _done_stamps(exp)
    assert len(done) == 2
    for change, message in (({"trainer.lr": 0.05}, "trainer.lr: saved 0.001, requested 0.05"),
                            ({"trainer.max_epochs": 3}, "trainer.max_epochs: saved 1, requested 3"),
                            ({"num_streams": 3}, "data.num_streams: saved 2, requested 3"),
                            ({"window": 30}, "data.window: saved 20, requested 30"),
                            ({"trainer.grad_clip": 1.0, "trainer.patience": 2},
                             "trainer.grad_clip: saved 0.0, requested 1.0; trainer.patience: saved 0, requested 2")):
        with pytest.raises(PlanMismatchError, match=rf"cannot resume: the run in {exp / 'plan.json'} was trained "
                                                    rf"with other settings than the requested ones \({message}\)"):
            cd.run_continual(config(root, "sa", **{**one, **change}), exp)
    assert _done_stamps(exp) == done and json.loads((exp / "plan.json").read_text()) == plan
    # the same settings, run on other threads, logged otherwise: the finished episodes are reused
    finished = []
    same = {"trainer.num_threads": 2, "trainer.log_interval": 7, "trainer.keep_last": 2, "trainer.num_workers": 0,
            "pretrain_dir": root / "pre_train"}
    recs = cd.run_continual(config(root, "sa", **one, **same), exp, after_episode=lambda t, d: finished.append(t))
    assert finished == [] and _done_stamps(exp) == done and [r["speaker"] for r in recs] == plan["order"]
    # a plan.json of an older speechkit (version 2, no settings): resumes as before, with a warning
    old = {k: v for k, v in plan.items() if k not in ("training", "training_sha256")} | {"version": 2}
    (exp / "plan.json").write_text(json.dumps(old))
    caplog.clear()
    with caplog.at_level("WARNING"):
        cd.run_continual(config(root, "sa", **one), exp, after_episode=lambda t, d: finished.append(t))
    assert finished == [] and _done_stamps(exp) == done
    assert "was written by an older speechkit without the run's training settings" in caplog.text
    assert json.loads((exp / "plan.json").read_text()) == old


def test_ewc_settings_are_part_of_the_plan(setup, tmp_path):
    """ewc_mode and whether pretrain_dir is given (episode 1's Fisher) decide what an ewc run trains."""
    root = setup
    one = {"trainer.max_epochs": 1, "speakers": "[c2]"}
    exp = tmp_path / "ewc"
    cd.run_continual(config(root, "ewc", pretrain_dir=root / "pre_train", **one), exp)
    training = json.loads((exp / "plan.json").read_text())["training"]
    assert training["ewc_mode"] == "online" and training["pretrain_dir"] == "(given)"
    with pytest.raises(PlanMismatchError, match="ewc_mode: saved 'online', requested 'per_episode'"):
        cd.run_continual(config(root, "ewc", pretrain_dir=root / "pre_train", ewc_mode="per_episode", **one), exp)
    with pytest.raises(PlanMismatchError, match="pretrain_dir: saved '\\(given\\)', requested ''"):
        cd.run_continual(config(root, "ewc", **one), exp)


def test_exp_dir_overlapping_an_input_is_refused(setup, tmp_path, capsys):
    """Audit d5(a): --exp-dir could be the --init-dir model's exp dir or the training data dir, and the
    run wrote its episodes there. It may not be, nor lie inside, anything the command reads; as with
    speechkit-train it may contain them, and it may lie inside --init-dir's exp dir (not its checkpoints)."""
    root = setup
    scp = next((root / "emb").glob("*.scp"))
    listing = {d: sorted((p.name, p.stat().st_mtime_ns) for p in (root / d).rglob("*"))
               for d in ("init", "train", "valid", "pre_train", "emb")}
    conf = tmp_path / "conf.yaml"
    conf.write_text("strategy: sa\n")
    cases = ((root / "init", [], "is --init-dir"),
             (root / "init" / "checkpoints", [], "is --init-dir's checkpoints"),
             (root / "init" / "checkpoints" / "c", [], "lies inside --init-dir's checkpoints"),
             (root / "train", [], "is --train-dir"),
             (root / "valid" / "exp", [], "lies inside --valid-dir"),
             (root / "pre_train", ["--pretrain-dir", str(root / "pre_train")], "is --pretrain-dir"),
             (scp, ["--speaker-embeddings", str(scp)], "is --speaker-embeddings"),
             (tmp_path / "conf.yaml" / "x", ["--config", str(conf)], "lies inside --config"))
    for exp, extra, why in cases:
        capsys.readouterr()
        assert main(_cli_args(root, exp, "--strategy", "sa", *extra)) == 1
        err = capsys.readouterr().err
        assert f"error: --exp-dir {exp} {why}" in err and "outputs never overlap inputs" in err, err
    assert {d: sorted((p.name, p.stat().st_mtime_ns) for p in (root / d).rglob("*")) for d in listing} == listing
    assert conf.read_text() == "strategy: sa\n"
    # inside --init-dir's exp dir (ESPnet's layout), or an exp dir holding the model and data: allowed
    import shutil

    shutil.copytree(root / "init", tmp_path / "init")
    assert main(_cli_args(root, tmp_path / "init" / "continual", "--init-dir", str(tmp_path / "init"),
                          "--speakers", "[c2]")) == 0
    assert (tmp_path / "init" / "continual" / "plan.json").is_file()
    shutil.copytree(root / "train", tmp_path / "top" / "train")
    assert main(_cli_args(root, tmp_path / "top", "--train-dir", str(tmp_path / "top" / "train"),
                          "--speakers", "[c2]")) == 0
