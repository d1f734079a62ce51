"""The rnnt task: datasets (CMVN + stacking vs a numpy reference, targets, counted skips), single-
language batches, losses per variant, fine-tuning initialisation, config errors, resume."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.models.rnnt import VARIANTS, to_monolingual
from speechkit.tasks import get_task, load_model
from speechkit.text.units import MultilingualUnits
from speechkit.train.trainer import Trainer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError


def make(env, *extra):
    task = get_task("rnnt")
    cfg = load_config(task.Config, None, env["overrides"] + list(extra))
    return task, cfg


def test_dataset_features_targets_and_skips(rnnt_env):
    task, cfg = make(rnnt_env)
    train, valid = task.build_datasets(cfg)
    assert len(train) == len(rnnt_env["train"]) and not task.skipped["train"]
    # the three bad dev utterances are skipped with their reasons, the two good ones kept
    assert sorted(valid.utts) == ["s9_aa_01", "s9_bb_01"]
    sk = task.skipped["valid"]
    assert set(sk) == {"s9_aa_02", "s9_bb_02", "s9_aa_03"}
    assert sk["s9_aa_02"].startswith("no in-vocabulary symbol")
    assert sk["s9_bb_02"].startswith("no encoder frames")
    assert "15 labels > 1 per frame x 8 encoder frames" in sk["s9_aa_03"]

    # features: global CMVN (mean and variance) then 8 frames stacked every 3, by hand in numpy
    import kaldiio

    raw = {k: np.asarray(v) for k, v in kaldiio.load_scp("data/train/feats.scp").items()}
    allf = np.concatenate(list(raw.values()))
    mu, sd = allf.mean(0), allf.std(0)
    i = train.utts.index("s1_bb_04")
    item = train[i]
    x = (raw["s1_bb_04"] - mu) / sd
    n_out = (len(x) - 8) // 3 + 1
    want = np.stack([x[3 * t: 3 * t + 8].reshape(-1) for t in range(n_out)])
    np.testing.assert_allclose(item["feats"].numpy(), want, rtol=1e-4, atol=1e-4)
    assert train.lengths()[i] == len(x)
    # targets: the language's own char_wb ids; lang index in the units' (C-sorted) order
    units = MultilingualUnits.load("data/lang")
    assert item["lang"] == units.languages.index("bb") == 1
    assert item["targets"].tolist() == units["bb"].encode(rnnt_env["train"]["s1_bb_04"][1])
    assert units["bb"].decode(item["targets"].tolist()) == rnnt_env["train"]["s1_bb_04"][1]


def test_unknown_language_is_an_error_naming_the_line(rnnt_env):
    lines = (rnnt_env["root"] / "data/dev/utt2lang").read_text().splitlines()
    lines[2] = lines[2].split()[0] + " zz"
    (rnnt_env["root"] / "data/dev/utt2lang").write_text("\n".join(lines) + "\n")
    task, cfg = make(rnnt_env)
    with pytest.raises(DataError, match=r"data/dev/utt2lang:3: unknown language 'zz'"):
        task.build_datasets(cfg)


def test_batches_are_single_language_and_deterministic(rnnt_env):
    task, cfg = make(rnnt_env)
    train, _ = task.build_datasets(cfg)
    b1 = task.make_batches(train, cfg, epoch=1, seed=0)
    assert b1 == task.make_batches(train, cfg, epoch=1, seed=0)
    assert b1 != task.make_batches(train, cfg, epoch=2, seed=0)
    for b in b1:
        assert len({train[i]["lang"] for i in b}) == 1
        assert max(train.lengths()[i] for i in b) * len(b) <= 400 or len(b) == 1
    # every utterance appears (the schedule has as many steps as there are batches; languages
    # that run out are reshuffled, so count over many epochs: each language about its share)
    counts = np.zeros(2)
    frames = np.zeros(2)
    for i, n in enumerate(train.lengths()):
        frames[train[i]["lang"]] += n
    for ep in range(1, 40):
        for b in task.make_batches(train, cfg, epoch=ep, seed=3):
            counts[train[b[0]]["lang"]] += 1
    share = counts / counts.sum()
    assert abs(share[0] - frames[0] / frames.sum()) < 0.06


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_loss_every_variant(rnnt_env, variant):
    task, cfg = make(rnnt_env, f"model.variant={variant}")
    torch.manual_seed(0)
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    batch = task.collate([train[i] for i in task.make_batches(train, cfg, 1, 0)[0]])
    assert batch["feats"].shape[-1] == 128 and batch["targets"].shape[0] == batch["lang"].shape[0]
    loss, stats = task.forward_loss(model, batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert ("lid_ce" in stats) == variant.endswith("_lid")
    loss.backward()
    units = MultilingualUnits.load("data/lang")
    if variant in ("vanilla", "onehot"):
        # shared softmax over the union inventory of units_dir/union, mapped through to_union
        assert model.vocab_size() == len(units.union)
        for k, lang in enumerate(model.languages):
            assert model.union_map[k, : len(units[lang])].tolist() == units.to_union[lang]
    else:
        assert {lang: model.vocab_size(lang) for lang in model.languages} == units.vocab_sizes


def test_monolingual_subset_leaves_other_languages_out(rnnt_env):
    task, cfg = make(rnnt_env, "data.languages=[bb]")
    model = task.build_model(cfg)
    assert model.languages == ["bb"]
    train, valid = task.build_datasets(cfg)
    assert all(u.split("_")[1] == "bb" for u in train.utts) and len(train) == 12
    assert "s9_aa_02" not in task.skipped["valid"]  # other languages are not counted as skips


def test_config_errors(rnnt_env):
    task, cfg = make(rnnt_env, "data.languages=[cc]")
    with pytest.raises(ConfigError, match="'data.languages': 'cc'"):
        task.build_model(cfg)
    task, cfg = make(rnnt_env, "model.vocab_sizes={aa: 3, bb: 3}")
    with pytest.raises(ConfigError, match="'model.vocab_sizes'"):
        task.build_model(cfg)
    task, cfg = make(rnnt_env, "model.input_dim=640")
    with pytest.raises(ConfigError, match=r"'model.input_dim': 640 != data.num_stack \(8\) x .* \(16\)"):
        task.build_datasets(cfg)
    task, cfg = make(rnnt_env, "trainer.batch_frames=0")
    train, _ = make(rnnt_env)[0].build_datasets(cfg)
    with pytest.raises(ConfigError, match="trainer.batch_frames"):
        task.make_batches(train, cfg, 1, 0)
    with pytest.raises(ConfigError, match="needs init.exp_dir"):
        make(rnnt_env, "init.language=aa")
    task, cfg = make(rnnt_env, "data.units_dir=nowhere")
    with pytest.raises(FileNotFoundError, match="nowhere/languages.txt"):
        task.build_model(cfg)


def _train(env, exp, *extra):
    task, cfg = make(env, "trainer.max_epochs=1", *extra)
    Trainer(task, cfg, exp).fit()
    return task, cfg


def test_train_resume_and_fine_tune_from_multisoftmax(rnnt_env):
    _train(rnnt_env, "exp/ms", "model.variant=multisoftmax_lid")
    src, _ = load_model("exp/ms")
    # rerun: already finished, nothing to do (and no error about the config)
    _train(rnnt_env, "exp/ms", "model.variant=multisoftmax_lid")
    info = (rnnt_env["root"] / "exp/ms/model_info.json").read_text()
    assert '"variant": "multisoftmax_lid"' in info

    # fine-tuning init: exactly the monolingual reduction of the source's weights
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "data.languages=[aa]", "init.exp_dir=exp/ms",
                     "init.language=aa")
    model = task.build_model(cfg)
    want = to_monolingual(src, "aa").state_dict()
    got = model.state_dict()
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k])
    # inference loading of the fine-tuned config does not need the source experiment
    task.load_init = False
    fresh = task.build_model(cfg)
    assert not torch.equal(fresh.encoder.weight_ih_l0, want["encoder.weight_ih_l0"])

    # mismatches are config errors naming what differs
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "init.exp_dir=exp/ms")
    with pytest.raises(ConfigError, match="init.exp_dir.*multisoftmax_lid model of aa bb.*multisoftmax model"):
        task.build_model(cfg)
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "data.languages=[aa]", "init.exp_dir=exp/ms",
                     "init.language=aa", "model.joint_dim=20")
    with pytest.raises(ConfigError, match="do not fit this model's sizes"):
        task.build_model(cfg)
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "data.languages=[aa]", "init.exp_dir=exp/ms",
                     "init.language=cc")
    with pytest.raises(ConfigError, match="'init.language': 'cc'"):
        task.build_model(cfg)

    # and the fine-tuning run itself trains from there
    _train(rnnt_env, "exp/ft", "model.variant=multisoftmax", "data.languages=[aa]", "init.exp_dir=exp/ms",
           "init.language=aa")
    ft, _ = load_model("exp/ft")
    assert ft.languages == ["aa"] and ft.config.variant == "multisoftmax"


def test_sortagrad_keeps_languages_and_sorts_each_languages_batches(rnnt_env):
    from speechkit.tasks.rnnt import sortagrad

    task, cfg = make(rnnt_env, "data.sortagrad_epochs=1")
    train, _ = task.build_datasets(cfg)
    plain = task.make_batches(train, make(rnnt_env)[1], 1, 0)
    sorted_ = task.make_batches(train, cfg, 1, 0)
    lang = lambda b: train[b[0]]["lang"]  # noqa: E731
    longest = lambda b: max(train.lengths()[i] for i in b)  # noqa: E731
    assert [lang(b) for b in sorted_] == [lang(b) for b in plain]
    assert sorted(map(sorted, sorted_)) == sorted(map(sorted, plain))
    for k in (0, 1):
        lens = [longest(b) for b in sorted_ if lang(b) == k]
        assert lens == sorted(lens)
    assert task.make_batches(train, cfg, 2, 0) == task.make_batches(train, make(rnnt_env)[1], 2, 0)
    # by hand
    sched = [("x", ["a"]), ("y", ["c"]), ("x", ["b", "d"])]
    assert sortagrad(sched, {"a": 9, "b": 3, "c": 1, "d": 5}) == [("x", ["b", "d"]), ("y", ["c"]), ("x", ["a"])]
