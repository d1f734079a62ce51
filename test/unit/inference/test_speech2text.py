"""speechkit.inference.speech2text: the Recognizer class (exp dir + checkpoint -> hypotheses) and its
options' checks."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.features.cmvn import apply_cmvn
from speechkit.features.io import FeatureReader
from speechkit.tasks import get_task
from speechkit.inference.speech2text import DecodeOptions, Recognizer
from speechkit.text.units import MultilingualUnits
from speechkit.train.trainer import Trainer
from speechkit.bin._decode_options import MODE_FLAGS
from speechkit.bin.asr_decode import build_parser
from speechkit.utils.cli import ConfigError, error_message, parameter_flags
from speechkit.utils.config import load_config


def train(env, exp, variant):
    task = get_task("rnnt")
    cfg = load_config(task.Config, None, env["overrides"] + ["trainer.max_epochs=1", f"model.variant={variant}"])
    Trainer(task, cfg, exp).fit()


@pytest.fixture
def lid_exp(rnnt_env):
    train(rnnt_env, "exp/lid", "multisoftmax_lid")
    return rnnt_env


def test_recognizer_from_exp_dir_matches_recognize(lid_exp):
    rec = Recognizer("exp/lid")
    assert rec.checkpoint.name == "best.pt" and rec.options == DecodeOptions() and not rec.model.training
    assert rec.needs_language
    r = FeatureReader("data/dev")
    m = r.raw("s9_aa_01")
    out = rec(m, "aa")
    x = torch.from_numpy(apply_cmvn(m, rec.cmvn).astype(np.float32))
    ref = recognize(rec.model, x, DecodeConfig(mode="oracle"), lang="aa")
    assert out["text"] == rec.units["aa"].decode(ref.tokens) and out["lang"] == "aa"
    assert out["hyps"] == {"aa": out["text"]} and out["scores"] == ref.scores
    assert list(out)[:3] == ["lang", "text", "hyps"] and out["num_input_frames"] == 60
    torch.testing.assert_close(rec.prepare(m), x)
    with pytest.raises(ValueError, match="too short"):
        rec(r.raw("s9_bb_02"), "bb")  # 5 frames < num_stack 8


def test_lid_free_batch_and_checkpoint_choice(lid_exp):
    rec = Recognizer("exp/lid", "latest", mode="lid_free")
    assert rec.checkpoint.name.startswith("ckpt-") and rec.options.mode == "lid_free" and not rec.needs_language
    r = FeatureReader("data/dev")
    utts = ["s9_aa_01", "s9_bb_02", "s9_bb_01"]
    one = [rec(r.raw(u)) if u != "s9_bb_02" else None for u in utts]
    batch = rec.batch([rec.prepare(r.raw(u)) for u in utts])
    assert batch[1] is None
    for a, b in zip(one, batch):
        if a is not None:
            assert (a["text"], a["lang"], a["hyps"]) == (b["text"], b["lang"], b["hyps"])
            assert a["lang"] == max(a["lid_posteriors"], key=a["lid_posteriors"].get) and len(a["hyps"]) == 2
    # the options: given whole or field by field
    opts = DecodeOptions(search="beam", beam=2)
    assert Recognizer("exp/lid", options=opts, length_norm=True).options == dataclasses.replace(opts, length_norm=True)
    assert rec.decode_config(0.02).frame_shift == 0.02 and rec.decode_config().num_stack == rec.cfg.data.num_stack


def test_recognizer_refusals(lid_exp):
    train(lid_exp, "exp/ms", "multisoftmax")
    with pytest.raises(ConfigError, match="^mode=lid_free needs a multisoftmax_lid model; exp/ms is multisoftmax"):
        Recognizer("exp/ms", mode="lid_free")
    with pytest.raises(FileNotFoundError, match="exp/none"):
        Recognizer("exp/none")
    with pytest.raises(FileNotFoundError, match="avg3"):
        Recognizer("exp/lid", "avg3")
    aa_only = [text for lang, text, _ in lid_exp["train"].values() if lang == "aa"]
    MultilingualUnits.build({"aa": aa_only}, "char_wb").save(lid_exp["root"] / "data/lang_aa")
    with pytest.raises(ConfigError, match="data/lang_aa: no units for the model's language 'bb'"):
        Recognizer("exp/lid", units_dir="data/lang_aa")


@pytest.mark.parametrize("kwargs, msg, cli", [
    ({"beam": 0}, "beam must be >= 1, got 0", "--beam must be >= 1, got 0"),
    ({"max_symbols_per_frame": 0}, "max_symbols_per_frame must be >= 1", "--max-symbols-per-frame must be >= 1"),
    ({"chunk_frames": -1}, "chunk_frames must be >= 0", "--chunk-frames must be >= 0"),
    ({"num_threads": 0}, "num_threads must be >= 1", "--num-threads must be >= 1"),
    ({"batch_size": 0}, "batch_size must be >= 1", "--batch-size must be >= 1"),
    ({"batch_size": 2, "show_partial": True}, "show_partial needs batch_size=1", "--show-partial needs --batch-size 1"),
    ({"blank_penalty": float("inf")}, "blank_penalty must be a finite number", "--blank-penalty must be a finite number"),
    ({"switch_off_tau": 3}, "switch_off_tau and switch_off_threshold go together",
     "--switch-off-tau and --switch-off-threshold go together"),
    ({"switch_off_tau": 3, "switch_off_threshold": 1.0}, "(switch_off_tau/switch_off_threshold) needs mode=lid_free",
     "early switch-off (--switch-off-tau/--switch-off-threshold) needs --lid-free"),
    ({"mode": "lid_free", "switch_off_tau": -1, "switch_off_threshold": 1.0}, "switch_off_tau must be >= 0",
     "--switch-off-tau must be >= 0"),
    ({"mode": "lid_free", "switch_off_tau": 1, "switch_off_threshold": -1.0}, "switch_off_threshold must be >= 0",
     "--switch-off-threshold must be >= 0"),
])
def test_decode_options_check(kwargs, msg, cli):
    """Each field is named by its name; speechkit-asr-decode spells it as its flag."""
    with pytest.raises(ConfigError) as e:
        DecodeOptions(**kwargs).check()
    assert msg in str(e.value) and "--" not in str(e.value)
    assert error_message(e.value, parameter_flags(build_parser(), MODE_FLAGS)).startswith(cli)


def test_decode_options_fingerprint_dict():
    DecodeOptions(mode="lid_free", switch_off_tau=0, switch_off_threshold=float("inf")).check()
    d = DecodeOptions().fingerprint_dict()
    assert d == {"mode": "oracle", "search": "greedy", "beam": None, "max_symbols_per_frame": 3,
                 "switch_off_tau": None, "switch_off_threshold": None, "blank_penalty": 0.0, "chunk_frames": 0,
                 "num_threads": 1, "units_dir": None, "cmvn_stats": None}
    # the options added later appear only when set (parts decoded before them stay current)
    d = DecodeOptions(search="beam", length_norm=True, switch_off_rule="posterior", device="auto",
                      batch_size=4).fingerprint_dict()
    assert d["beam"] == 4 and d["max_symbols_per_frame"] is None
    assert {k: d[k] for k in ("length_norm", "switch_off_rule", "device", "batch_size")} == \
        {"length_norm": True, "switch_off_rule": "posterior", "device": "auto", "batch_size": 4}
    assert "length_norm" not in DecodeOptions(length_norm=True).fingerprint_dict()  # greedy: no effect
