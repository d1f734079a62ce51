"""speechkit-asr-decode (speechkit.inference.speech2text_dir): outputs against direct recognition, parts /
--nj / resume in worker processes, the part helpers (split, fingerprint, current), modes, skips, vanilla's
hypothesis language, bad options."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.bin._decode_options import decode_options
from speechkit.bin.asr_decode import build_parser, main
from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.features.cmvn import apply_cmvn
from speechkit.features.io import FeatureReader, scp_entry_file
from speechkit.inference.parts import PartStore, split_parts
from speechkit.inference.speech2text import DecodeOptions
from speechkit.inference.speech2text import Recognizer as Decoder
from speechkit.inference.speech2text_dir import decode_data_dir, input_hashes, part_fingerprint, read_utterances
from speechkit.tasks import get_task
from speechkit.text.units import MultilingualUnits
from speechkit.train.trainer import Trainer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError


def train(env, exp, variant, *extra):
    task = get_task("rnnt")
    cfg = load_config(task.Config, None, env["overrides"] + ["trainer.max_epochs=1", f"model.variant={variant}",
                                                              *extra])
    Trainer(task, cfg, exp).fit()


def read(path):
    return dict(line.split(maxsplit=1) if " " in line else (line, "") for line in open(path).read().splitlines())


@pytest.fixture
def lid_exp(rnnt_env):
    train(rnnt_env, "exp/lid", "multisoftmax_lid")
    return rnnt_env


def test_oracle_decode_matches_direct_recognition(lid_exp, capsys):
    assert main(["--model-dir", "exp/lid", "--oracle-lid", "data/dev", "out"]) == 0
    hyp, u2l = read("out/text"), read("out/utt2lang")
    stats = json.load(open("out/decode_stats.json"))
    # s9_bb_02 (5 frames) cannot be decoded: a counted skip, not in text
    assert stats["num_utterances"] == 5 and stats["num_decoded"] == 4 and stats["skipped"] == {"too short": 1}
    assert set(hyp) == {"s9_aa_01", "s9_bb_01", "s9_aa_02", "s9_aa_03"}
    assert u2l == {u: u.split("_")[1] for u in hyp}  # oracle: the given language
    assert stats["t_avg"] == 1.0 and stats["rtf"] > 0 and stats["mode"] == "oracle"
    # same as calling the recognizer by hand with the training CMVN stats
    dec = Decoder(lid_exp["root"] / "exp/lid/checkpoints/best.pt")
    r = FeatureReader("data/dev")
    for utt in hyp:
        x = torch.from_numpy(apply_cmvn(r[utt], dec.cmvn).astype(np.float32))
        res = recognize(dec.model, x, DecodeConfig(mode="oracle"), lang=utt.split("_")[1])
        assert hyp[utt] == dec.units[utt.split("_")[1]].decode(res.tokens)
    post = read("out/lid_posteriors")
    assert set(post) == set(hyp)
    p = np.array(post["s9_aa_01"].strip("[] ").split(), dtype=float)
    assert p.shape == (2,) and abs(p.sum() - 1) < 1e-4
    assert "decoded 4 of 5 utterances" in capsys.readouterr().out


def test_lid_free_nj_parts_and_resume(lid_exp, run_cli_main):
    assert main(["--model-dir", "exp/lid", "--lid-free", "--chunk-frames", "7", "data/dev", "one"]) == 0
    assert main(["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "data/dev", "two"]) == 0
    # chunking and parallel parts do not change any hypothesis or language choice
    assert read("one/text") == read("two/text") and read("one/utt2lang") == read("two/utt2lang")
    s = json.load(open("two/decode_stats.json"))
    assert s["t_avg"] == 2.0 and s["nj"] == 2
    r1 = [json.loads(x) for x in open("one/results.jsonl")]
    for rec in r1:
        if "skipped" in rec:
            continue
        best = max(rec["lid_posteriors"], key=rec["lid_posteriors"].get)
        assert rec["lang"] == best and rec["text"] == rec["hyps"][best]
    # a current part is not decoded again; a changed option redoes it
    stamp = (lid_exp["root"] / "two/parts/results.1.jsonl").stat().st_mtime_ns
    assert main(["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "data/dev", "two"]) == 0
    assert (lid_exp["root"] / "two/parts/results.1.jsonl").stat().st_mtime_ns == stamp
    assert main(["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "--merge-only", "--search", "beam",
                 "data/dev", "two"]) == 1  # parts are from greedy search: nothing merged
    # the merge step (a process of its own in the recipes' run.sh) does not import torch (1.2 s a process)
    out = run_cli_main("speechkit.bin.asr_decode", ["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "--merge-only",
                                                    "data/dev", "two"], cwd=lid_exp["root"])
    assert out.returncode == 0 and out.stdout.strip().endswith("no torch"), out.stdout + out.stderr
    assert read("two/text") == read("one/text")
    # switch-off with an infinite threshold is plain LID-free decoding; tau 0 / s_th 0 keeps one decoder
    assert main(["--model-dir", "exp/lid", "--lid-free", "--switch-off-tau", "0", "--switch-off-threshold", "inf",
                 "data/dev", "inf"]) == 0
    assert read("inf/text") == read("one/text")
    assert main(["--model-dir", "exp/lid", "--lid-free", "--switch-off-tau", "0", "--switch-off-threshold", "0",
                 "data/dev", "zero"]) == 0
    assert json.load(open("zero/decode_stats.json"))["t_avg"] < 1.2


def test_batched_encoder_gives_the_same_outputs(lid_exp):
    """--batch-size 3 (one encoder forward for 3 utterances, the too-short one among them) writes the
    hypotheses, languages and skips of one-at-a-time decoding; --device auto runs where it can."""
    for extra in ([], ["--oracle-lid"]):
        assert main(["--model-dir", "exp/lid", "--lid-free" if not extra else "--oracle-lid", "data/dev", "one"]) == 0
        assert main(["--model-dir", "exp/lid", *(extra or ["--lid-free"]), "--batch-size", "3", "--device", "auto",
                     "data/dev", "batch"]) == 0
        assert read("batch/text") == read("one/text") and read("batch/utt2lang") == read("one/utt2lang")
        one, batch = json.load(open("one/decode_stats.json")), json.load(open("batch/decode_stats.json"))
        assert batch["num_decoded"] == one["num_decoded"] == 4 and batch["skipped"] == one["skipped"]


def test_nj_parts_with_batch_size_and_device(lid_exp):
    """--nj 2 with --batch-size 2 --device auto: the parts are decoded (local processes) with the
    options the merge checks, so they merge (they failed with 'part 1 of 2 is missing or was decoded
    with other inputs': the jobs were not given --batch-size and --device)."""
    assert main(["--model-dir", "exp/lid", "--lid-free", "data/dev", "one"]) == 0
    assert main(["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "--batch-size", "2", "--device", "auto",
                 "data/dev", "two"]) == 0
    assert read("two/text") == read("one/text") and read("two/utt2lang") == read("one/utt2lang")
    s = json.load(open("two/decode_stats.json"))
    assert (s["nj"], s["batch_size"], s["device"], s["num_decoded"]) == (2, 2, "auto", 4)


# every DecodeOptions field away from its default (a field added later must be added here)
NON_DEFAULT = dict(mode="lid_free", search="beam", beam=2, length_norm=True, max_symbols_per_frame=2,
                   blank_penalty=0.1, switch_off_tau=5, switch_off_threshold=float("inf"), switch_off_rule="posterior",
                   chunk_frames=7, units_dir="data/lang x", cmvn_stats="data/train/cmvn.scp", device="auto",
                   batch_size=2, num_threads=2, show_partial=True)


def test_every_decode_option_is_a_flag_of_the_cli():
    """Every DecodeOptions field away from its default is given by a flag of the CLI and read back whole
    (so a part decoded in a worker process gets the options, the fingerprint, the merge checks)."""
    assert set(NON_DEFAULT) == {f.name for f in dataclasses.fields(DecodeOptions)}
    for f in dataclasses.fields(DecodeOptions):
        assert NON_DEFAULT[f.name] != f.default, f.name
    for search in ("beam", "greedy"):
        opts = DecodeOptions(**{**NON_DEFAULT, "search": search})
        flags = ["--lid-free"]
        for f in dataclasses.fields(DecodeOptions):
            value = getattr(opts, f.name)
            if f.name != "mode":
                flags += [f"--{f.name.replace('_', '-')}"] + ([] if value is True else [str(value)])
        args = build_parser().parse_args(["--model-dir", "exp/lid", "--nj", "3", *flags, "data/dev", "out"])
        assert decode_options(args) == opts and decode_options(args).fingerprint_dict() == opts.fingerprint_dict()
    assert decode_options(build_parser().parse_args(["--model-dir", "e", "d", "o"])) == DecodeOptions()


def test_a_failed_worker_part_is_named_with_its_log(lid_exp, capsys):
    """--nj 2 in worker processes: a part that fails (a NaN frame in part 1's utterance) is named with its
    log and its error, the other part is decoded, nothing is merged; the log ends with the error."""
    import shutil

    from speechkit.features.io import ark_scp_writer

    root = lid_exp["root"]
    shutil.copytree("data/dev", "data/nan", ignore=shutil.ignore_patterns("feats.*"))
    r = FeatureReader("data/dev")
    with ark_scp_writer(root / "data/nan/feats.ark", root / "data/nan/feats.scp") as w:
        for u in r.keys():
            m = r[u].copy()
            if u == "s9_aa_01":  # the first utterance: part 1 of 2
                m[3, 2] = np.nan
            w(u, m)
    assert main(["--model-dir", "exp/lid", "--lid-free", "--nj", "2", "data/nan", "two"]) == 1
    err = capsys.readouterr().err
    assert "speechkit-asr-decode: error: 1 of 2 jobs failed; nothing merged.\n  job 1 (see two/log/decode.1.log): " \
           "data/nan/feats.scp: 's9_aa_01' (" in err and "frame 3 (of 60) has a non-finite value" in err
    log1 = (root / "two/log/decode.1.log").read_text().splitlines()
    assert log1[0].startswith("# Started at") and log1[-1].startswith("# Ended (code 1) at")
    assert log1[-2].startswith("error: data/nan/feats.scp: 's9_aa_01'")
    assert (root / "two/parts/done.2.json").is_file() and not (root / "two/text").exists()
    log2 = (root / "two/log/decode.2.log").read_text()
    assert "INFO speechkit-asr-decode: part 2/2: decoded" in log2
    assert log2.splitlines()[-1].startswith("# Ended (code 0)")


def test_monolingual_model_skips_other_languages(rnnt_env):
    train(rnnt_env, "exp/mono", "multisoftmax", "data.languages=[bb]")
    assert main(["--model-dir", "exp/mono", "data/dev", "out"]) == 0
    s = json.load(open("out/decode_stats.json"))
    assert s["skipped"] == {"language 'aa' not in the model": 3, "too short": 1}
    assert set(read("out/text")) == {"s9_bb_01"}


def test_vanilla_hypothesis_language(rnnt_env):
    train(rnnt_env, "exp/van", "vanilla")
    dec = Decoder(rnnt_env["root"] / "exp/van/checkpoints/best.pt")
    units = MultilingualUnits.load("data/lang")
    ids = lambda text, lang: units.map_to_union(units[lang].encode(text), lang)  # noqa: E731
    assert dec.hypothesis_language(ids("ab cd", "aa")) == "aa"
    assert dec.hypothesis_language(ids("ab", "aa") + ids("vw xy", "bb")) == "bb"
    assert dec.hypothesis_language([]) is None
    assert dec.hypothesis_language([units.union.unk_id]) is None
    # vanilla needs no utt2lang
    (rnnt_env["root"] / "data/dev/utt2lang").unlink()
    assert main(["--model-dir", "exp/van", "data/dev", "out"]) == 0
    res = [json.loads(x) for x in open("out/results.jsonl")]
    assert all(r.get("lang") in (None, "aa", "bb") for r in res)


def test_bad_options_and_inputs(lid_exp, capsys):
    train(lid_exp, "exp/ms", "multisoftmax")
    cases = [
        (["--model-dir", "exp/ms", "--lid-free", "data/dev", "o"], "--lid-free needs a multisoftmax_lid model"),
        (["--model-dir", "exp/lid", "--switch-off-tau", "3", "data/dev", "o"], "go together"),
        (["--model-dir", "exp/lid", "--switch-off-tau", "3", "--switch-off-threshold", "2", "data/dev", "o"],
         "needs --lid-free"),
        (["--model-dir", "exp/nothing", "data/dev", "o"], "no such experiment"),
        (["--model-dir", "exp/lid", "data/none", "o"], "data/none/feats.scp"),
        (["--model-dir", "exp/lid", "--nj", "2", "--job", "3", "data/dev", "o"], "--job must be in 1..2"),
        (["--model-dir", "exp/lid", "--batch-size", "2", "--show-partial", "data/dev", "o"], "needs --batch-size 1"),
        (["--model-dir", "exp/lid", "--batch-size", "0", "data/dev", "o"], "--batch-size must be >= 1"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--model-dir", "exp/lid", "--device", "cuda", "data/dev", "o"], "no CUDA device"))
    for argv, msg in cases:
        assert main(argv) == 1
        assert msg in capsys.readouterr().err
    (lid_exp["root"] / "data/dev/utt2lang").unlink()
    assert main(["--model-dir", "exp/ms", "data/dev", "o"]) == 1
    assert "utt2lang: missing" in capsys.readouterr().err


def test_beam_one_equals_greedy_one_symbol_and_partials_are_logged(lid_exp, capsys):
    assert main(["--model-dir", "exp/lid", "--search", "beam", "--beam", "1", "data/dev", "b1"]) == 0
    assert main(["--model-dir", "exp/lid", "--max-symbols-per-frame", "1", "--chunk-frames", "10",
                 "--show-partial", "data/dev", "g1"]) == 0
    assert read("b1/text") == read("g1/text")
    assert json.load(open("b1/decode_stats.json"))["beam"] == 1
    assert "s9_aa_01 partial: aa:" in capsys.readouterr().err  # the CLI logs to stderr
    assert main(["--model-dir", "exp/lid", "--search", "beam", "--beam", "3", "--lid-free", "data/dev", "b3"]) == 0
    assert set(read("b3/text")) == set(read("b1/text"))


def test_blank_penalty_lowers_the_blank_logit(lid_exp):
    ckpt = lid_exp["root"] / "exp/lid/checkpoints/best.pt"
    plain, pen = Decoder(ckpt), Decoder(ckpt, blank_penalty=2.5)
    enc, pred = torch.randn(5, 24), torch.randn(5, 16)
    for lang in ("aa", "bb"):
        a = plain.model.joint_network(lang)(enc, pred)
        b = pen.model.joint_network(lang)(enc, pred)
        torch.testing.assert_close(b[:, 0], a[:, 0] - 2.5)
        torch.testing.assert_close(b[:, 1:], a[:, 1:])
    assert main(["--model-dir", "exp/lid", "--blank-penalty", "30", "--max-symbols-per-frame", "1", "data/dev",
                 "pen"]) == 0
    s = json.load(open("pen/decode_stats.json"))
    assert s["blank_penalty"] == 30.0
    # blank is practically never chosen: one symbol per encoder frame
    res = [json.loads(x) for x in open("pen/results.jsonl")]
    r = next(r for r in res if r["utt"] == "s9_aa_01")
    assert len(r["text"].replace("<unk>", "?").replace(" ", "")) == r["num_frames"]


def _strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in a JSON file (not JSON)")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_features_strict_json_and_overlapping_outputs(lid_exp, capsys):
    """Issue 23: a NaN frame was decoded to an empty hypothesis ('decoded 5 of 5') and results.jsonl held a
    bare NaN; now it is an error naming the utterance and its feats.scp entry, and nothing is merged."""
    import shutil

    from speechkit.features.io import ark_scp_writer
    from speechkit.utils.fileio import read_table

    root = lid_exp["root"]
    shutil.copytree("data/dev", "data/nan", ignore=shutil.ignore_patterns("feats.*"))
    r = FeatureReader("data/dev")
    with ark_scp_writer(root / "data/nan/feats.ark", root / "data/nan/feats.scp") as w:
        for u in r.keys():
            m = r[u].copy()
            if u == "s9_aa_01":
                m[3, 2] = np.nan
            w(u, m)
    entry = read_table("data/nan/feats.scp")["s9_aa_01"]
    for extra in ([], ["--batch-size", "2"]):
        assert main(["--model-dir", "exp/lid", *extra, "data/nan", "out_nan"]) == 1
        err = capsys.readouterr().err
        assert f"data/nan/feats.scp: 's9_aa_01' ({entry}): frame 3 (of 60) has a non-finite value (nan in " \
               "dimension 2)" in err
        assert not (root / "out_nan/text").exists() and not (root / "out_nan/results.jsonl").exists()
    # every JSON written is strict JSON; an infinite threshold (no switch-off) is written "inf"
    assert main(["--model-dir", "exp/lid", "--lid-free", "--switch-off-tau", "0", "--switch-off-threshold", "inf",
                 "data/dev", "exp/lid/decode_dev"]) == 0
    stats = _strict_json((root / "exp/lid/decode_dev/decode_stats.json").read_text())
    assert stats["switch_off_threshold"] == "inf" and stats["num_decoded"] == 4
    for p in [root / "exp/lid/decode_dev/results.jsonl", *sorted((root / "exp/lid/decode_dev/parts").iterdir())]:
        for line in p.read_text().splitlines():
            _strict_json(line)
    # a part decoded by an older version with a NaN score is not merged into results.jsonl
    part = root / "exp/lid/decode_dev/parts/results.1.jsonl"
    recs = [json.loads(line) for line in part.read_text().splitlines()]
    next(r for r in recs if "scores" in r)["scores"]["aa"] = float("nan")
    part.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["--model-dir", "exp/lid", "--lid-free", "--switch-off-tau", "0", "--switch-off-threshold", "inf",
                 "data/dev", "exp/lid/decode_dev"]) == 1
    err = capsys.readouterr().err
    assert "exp/lid/decode_dev/parts/results.1.jsonl: utterance 's9_" in err and "has a non-finite score" in err
    _strict_json((root / "exp/lid/decode_dev/results.jsonl").read_text().splitlines()[0])
    # OUT_DIR never is, contains or lies inside an input; the inputs are untouched
    before = sorted(p.name for p in (root / "data/dev").iterdir())
    for out, why in (("data/dev", "is DATA_DIR"), ("data/dev/decode", "lies inside DATA_DIR"), ("data", "contains"),
                     ("exp/lid", "is --model-dir"), ("exp/lid/checkpoints", "is the checkpoint dir"),
                     ("exp", "contains --model-dir")):
        assert main(["--model-dir", "exp/lid", "data/dev", out]) == 1
        assert f"OUT_DIR {out} {why}" in capsys.readouterr().err
    assert sorted(p.name for p in (root / "data/dev").iterdir()) == before
    # another data dir (the model's own training dir, whose CMVN stats the decode reads) is no output either:
    # its reference text was replaced by the hypotheses
    train_text = (root / "data/train/text").read_text()
    assert main(["--model-dir", "exp/lid", "data/dev", "data/train"]) == 1
    assert "OUT_DIR data/train holds utt2spk: it is a data dir" in capsys.readouterr().err
    assert (root / "data/train/text").read_text() == train_text
    if not torch.cuda.is_available():  # refused before the parallel jobs start, in one line
        assert main(["--model-dir", "exp/lid", "--nj", "2", "--device", "cuda", "data/dev", "o"]) == 1
        err = capsys.readouterr().err
        assert "--device: 'cuda' requested but no CUDA device is available" in err and "jobs failed" not in err


def test_an_out_dir_holding_a_reference_is_refused(lid_exp, capsys):
    """Issue 38 case 5: OUT_DIR holding only a reference text and utt2lang (no utt2spk, so not taken for a data
    dir) had both replaced by the hypotheses, exit 0. Tables that no decode wrote (no decode_stats.json, no
    parts/done.J.json) are refused; a decode's own earlier output, merged or not, is decoded into again."""
    root = lid_exp["root"]
    ref = root / "ref"
    ref.mkdir()
    (ref / "text").write_text("s9_aa_01 abc de\n")
    (ref / "utt2lang").write_text("s9_aa_01 aa\n")
    assert main(["--model-dir", "exp/lid", "data/dev", "ref"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "speechkit-asr-decode: error: OUT_DIR ref holds text, utt2lang that no decode wrote (no decode_stats.json "
        "nor parts/done.J.json): a decode would replace them; choose another output dir (ESPnet's layout: "
        "EXP/decode_<set>)")
    assert sorted(p.name for p in ref.iterdir()) == ["text", "utt2lang"]
    assert (ref / "text").read_text() == "s9_aa_01 abc de\n" and (ref / "utt2lang").read_text() == "s9_aa_01 aa\n"
    # its own output: merged, or only decoded (--job), is taken again
    assert main(["--model-dir", "exp/lid", "data/dev", "out"]) == 0
    assert main(["--model-dir", "exp/lid", "data/dev", "out", "--force"]) == 0
    assert main(["--model-dir", "exp/lid", "--nj", "1", "--job", "1", "data/dev", "parts_only"]) == 0
    (root / "parts_only" / "text").write_text("s9_aa_01 x\n")  # as a merge cut short after writing text
    assert main(["--model-dir", "exp/lid", "data/dev", "parts_only"]) == 0
    assert (root / "parts_only" / "decode_stats.json").is_file()


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
    ckpt = Decoder("exp/lid").checkpoint
    fp = part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    assert fp == part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    assert fp != part_fingerprint(DecodeOptions(beam=3, search="beam"), ckpt, "data/dev", utts[:2], table)
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:3], table)
    (lid_exp["root"] / "data/dev/utt2lang").write_text("s9_aa_01 bb\n")  # another language: another result
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)
    store = PartStore("out")
    res, done = store.paths(1)
    assert (res.as_posix(), done.as_posix()) == ("out/parts/results.1.jsonl", "out/parts/done.1.json")
    assert not store.current(1, fp)
    res.parent.mkdir(parents=True)
    res.write_text("")
    done.write_text('{"fingerprint": "%s", "inputs": {}}\n' % fp)
    assert store.current(1, fp) and not store.current(1, "other")
    done.write_text('{"fingerprint": "%s"}\n' % fp)  # written before parts recorded their inputs
    assert not store.current(1, fp)
    done.write_text("{not json")
    assert not store.current(1, fp)
    # the CMVN stats / units recorded in the part: changed in place, the part is stale
    stats = tmp_path / "cmvn.ark"
    stats.write_bytes(b"stats")
    inputs = input_hashes(stats, None)
    done.write_text(json.dumps({"fingerprint": fp, "inputs": inputs}) + "\n")
    assert store.current(1, fp)
    stats.write_bytes(b"other stats")
    assert not store.current(1, fp)
    # a feature ark rewritten in place (same entries, other size or time): another fingerprint
    ark = Path(scp_entry_file(table[utts[0]]))
    st = ark.stat()
    os.utime(ark, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert fp != part_fingerprint(DecodeOptions(), ckpt, "data/dev", utts[:2], table)


def test_decode_data_dir_in_process_parts_job_and_merge(lid_exp, caplog):
    """decode_data_dir with one job at a time decodes the parts here, one after the other (each with
    its log); --job-like and merge-only calls; the options are checked first."""
    caplog.set_level("INFO")  # the parts' log lines (INFO) reach their log files
    opts = DecodeOptions(mode="lid_free")
    stats, summary = decode_data_dir("exp/lid", None, "data/dev", "one", opts)
    stats2, _ = decode_data_dir("exp/lid", None, "data/dev", "two", opts, nj=2, max_jobs=1)
    assert open("one/text").read() == open("two/text").read() and stats2["nj"] == 2
    assert (lid_exp["root"] / "two/log/decode.2.log").read_text().count("part 2/2") == 2
    assert summary.startswith("one: decoded 4 of 5 utterances") and stats["num_decoded"] == 4
    assert decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, job=1) is None
    with pytest.raises(DataError, match="part 2 of 2 is missing"):
        decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, merge_only=True)
    decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, job=2)
    assert decode_data_dir("exp/lid", None, "data/dev", "three", opts, nj=2, merge_only=True)[0]["num_decoded"] == 4
    with pytest.raises(ConfigError, match="^beam must be >= 1"):  # the library names its parameters
        decode_data_dir("exp/lid", None, "data/dev", "four", DecodeOptions(beam=0))
    with pytest.raises(ValueError, match="^out_dir data/dev is data_dir"):
        decode_data_dir("exp/lid", None, "data/dev", "data/dev", opts)
