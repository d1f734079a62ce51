"""speechkit.tasks.recognize: the Recognizer class (exp dir + checkpoint -> hypotheses), its options'
checks, and the part helpers behind speechkit-asr-decode (split, fingerprint, current)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.features.cmvn import apply_cmvn
from speechkit.features.io import FeatureReader, scp_entry_file
from speechkit.tasks import get_task
from speechkit.tasks.recognize import (
    DecodeOptions, Recognizer, add_decode_options, decode_data_dir, input_hashes, part_current,
    part_fingerprint, part_paths, read_utterances, split_parts,
)
from speechkit.text.units import MultilingualUnits
from speechkit.train.trainer import Trainer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError


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
    with pytest.raises(ConfigError, match="--lid-free needs a multisoftmax_lid model; exp/ms is multisoftmax"):
        Recognizer("exp/ms", mode="lid_free")
    with pytest.raises(FileNotFoundError, match="exp/none"):
        Recognizer("exp/none")
    with pytest.raises(FileNotFoundError, match="avg3"):
        Recognizer("exp/lid", "avg3")
    aa_only = [text for lang, text, _ in lid_exp["train"].values() if lang == "aa"]
    MultilingualUnits.build({"aa": aa_only}, "char_wb").save(lid_exp["root"] / "data/lang_aa")
    with pytest.raises(ConfigError, match="data/lang_aa: no units for the model's language 'bb'"):
        Recognizer("exp/lid", units_dir="data/lang_aa")


@pytest.mark.parametrize("kwargs, msg", [
    ({"beam": 0}, "--beam must be >= 1, got 0"),
    ({"max_symbols_per_frame": 0}, "--max-symbols-per-frame must be >= 1"),
    ({"chunk_frames": -1}, "--chunk-frames must be >= 0"),
    ({"num_threads": 0}, "--num-threads must be >= 1"),
    ({"batch_size": 0}, "--batch-size must be >= 1"),
    ({"batch_size": 2, "show_partial": True}, "--show-partial needs --batch-size 1"),
    ({"blank_penalty": float("inf")}, "--blank-penalty must be a finite number"),
    ({"switch_off_tau": 3}, "go together"),
    ({"switch_off_tau": 3, "switch_off_threshold": 1.0}, "needs --lid-free"),
    ({"mode": "lid_free", "switch_off_tau": -1, "switch_off_threshold": 1.0}, "--switch-off-tau must be >= 0"),
    ({"mode": "lid_free", "switch_off_tau": 1, "switch_off_threshold": -1.0}, "--switch-off-threshold must be >= 0"),
])
def test_decode_options_check(kwargs, msg):
    with pytest.raises(ConfigError, match=msg):
        DecodeOptions(**kwargs).check()


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


def test_add_decode_options_fill_decode_options():
    """add_decode_options' options are DecodeOptions' fields (from_args reads them back), with the
    part options of decode_data_dir unless parts=False."""
    p = argparse.ArgumentParser()
    add_decode_options(p)
    assert DecodeOptions.from_args(p.parse_args([])) == DecodeOptions()
    a = p.parse_args(["--lid-free", "--search", "beam", "--beam", "2", "--batch-size", "3", "--device", "auto",
                      "--switch-off-tau", "5", "--switch-off-threshold", "inf", "--nj", "2", "--max-jobs", "1",
                      "--force"])
    assert DecodeOptions.from_args(a) == DecodeOptions(mode="lid_free", search="beam", beam=2, batch_size=3,
                                                       device="auto", switch_off_tau=5,
                                                       switch_off_threshold=float("inf"))
    assert (a.nj, a.job, a.merge_only, a.max_jobs, a.force) == (2, None, False, 1, True)
    assert DecodeOptions.from_args(p.parse_args(["--oracle-lid"])).mode == "oracle"
    with pytest.raises(SystemExit):
        p.parse_args(["--lid-free", "--oracle-lid"])
    q = argparse.ArgumentParser()
    add_decode_options(q, parts=False)
    options = {s for action in q._actions for s in action.option_strings}
    assert not options & {"--nj", "--job", "--merge-only", "--max-jobs", "--force"}
    assert {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(DecodeOptions) if f.name != "mode"} \
        <= options
    assert DecodeOptions.from_args(q.parse_args(["--chunk-frames", "7"])) == DecodeOptions(chunk_frames=7)


def test_decode_options_to_argv_round_trip():
    """to_argv gives every field back through add_decode_options' parser (floats exactly, inf too)."""
    p = argparse.ArgumentParser()
    add_decode_options(p, parts=False)
    for opts in (DecodeOptions(), DecodeOptions(mode="lid_free", search="beam", beam=7, length_norm=True,
                                                blank_penalty=0.1 + 0.2, switch_off_tau=0,
                                                switch_off_threshold=float("inf"), switch_off_rule="posterior",
                                                chunk_frames=3, units_dir="u", cmvn_stats="c", device="auto",
                                                batch_size=5, num_threads=2),
                 DecodeOptions(max_symbols_per_frame=1, switch_off_tau=2, switch_off_threshold=1e-7,
                               show_partial=True)):
        argv = opts.to_argv()
        assert DecodeOptions.from_args(p.parse_args(argv)) == opts
        assert argv[0] == ("--lid-free" if opts.mode == "lid_free" else "--oracle-lid")
    assert DecodeOptions().to_argv() == ["--oracle-lid", "--search", "greedy", "--beam", "4",
                                         "--max-symbols-per-frame", "3", "--blank-penalty", "0.0",
                                         "--switch-off-rule", "gap", "--chunk-frames", "0", "--device", "cpu",
                                         "--batch-size", "1", "--num-threads", "1"]
    with pytest.raises(ValueError, match="mode must be one of oracle, lid_free, got 'lid'"):
        DecodeOptions(mode="lid").to_argv()


def test_parts_split_fingerprint_and_current(lid_exp, tmp_path):
    utts, table = read_utterances("data/dev")
    assert utts == sorted(table) and len(utts) == 5
    assert split_parts(utts, 2) == [utts[0::2], utts[1::2]]
    with pytest.raises(FileNotFoundError, match="data/none/feats.scp: no features"):
        read_utterances("data/none")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty/feats.scp").write_text("")
    with pytest.raises(DataError, match="no utterances"):
        read_utterances(tmp_path / "empty")
    ckpt = Recognizer("exp/lid").checkpoint
    fp = part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    assert fp == part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    assert fp != part_fingerprint(DecodeOptions(beam=3, search="beam"), ckpt, "data/dev", utts[:2], table)
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:3], table)
    (lid_exp["root"] / "data/dev/utt2lang").write_text("s9_aa_01 bb\n")  # another language: another result
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    res, done = part_paths("out", 1)
    assert (res.as_posix(), done.as_posix()) == ("out/parts/results.1.jsonl", "out/parts/done.1.json")
    assert not part_current("out", 1, fp)
    res.parent.mkdir(parents=True)
    res.write_text("")
    done.write_text('{"fingerprint": "%s", "inputs": {}}\n' % fp)
    assert part_current("out", 1, fp) and not part_current("out", 1, "other")
    done.write_text('{"fingerprint": "%s"}\n' % fp)  # written before parts recorded their inputs
    assert not part_current("out", 1, fp)
    done.write_text("{not json")
    assert not part_current("out", 1, fp)
    # the CMVN stats / units recorded in the part: changed in place, the part is stale
    stats = tmp_path / "cmvn.ark"
    stats.write_bytes(b"stats")
    inputs = input_hashes(stats, None)
    done.write_text(json.dumps({"fingerprint": fp, "inputs": inputs}) + "\n")
    assert part_current("out", 1, fp)
    stats.write_bytes(b"other stats")
    assert not part_current("out", 1, fp)
    # a feature ark rewritten in place (same entries, other size or time): another fingerprint
    ark = Path(scp_entry_file(table[utts[0]]))
    st = ark.stat()
    os.utime(ark, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)


def test_decode_data_dir_in_process_parts_job_and_merge(lid_exp, caplog):
    """decode_data_dir without a job command decodes the parts here, one after the other (each with
    its log); --job-like and merge-only calls; the options are checked first."""
    caplog.set_level("INFO")  # the parts' log lines (INFO) reach their log files
    opts = DecodeOptions(mode="lid_free")
    stats, summary = decode_data_dir("exp/lid", None, "data/dev", "one", opts)
    stats2, _ = decode_data_dir("exp/lid", None, "data/dev", "two", opts, nj=2)
    assert open("one/text").read() == open("two/text").read() and stats2["nj"] == 2
    assert (lid_exp["root"] / "two/log/decode.2.log").read_text().count("part 2/2") == 2
    assert summary.startswith("one: decoded 4 of 5 utterances") and stats["num_decoded"] == 4
    assert decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, job=1) is None
    with pytest.raises(DataError, match="part 2 of 2 is missing"):
        decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, merge_only=True)
    decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, job=2)
    assert decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, merge_only=True)[0]["num_decoded"] == 4
    with pytest.raises(ConfigError, match="--beam must be >= 1"):
        decode_data_dir("exp/lid", None, "data/dev", "four", DecodeOptions(beam=0))
    with pytest.raises(ValueError, match="OUT_DIR data/dev is DATA_DIR"):
        decode_data_dir("exp/lid", None, "data/dev", "data/dev", opts)
