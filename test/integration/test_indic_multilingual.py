"""egs/indic_multilingual: every stage of run.sh on a tiny mini corpus (2 languages, 3 voices: two
for training, one unseen), in a temporary working directory (nothing is written into the
repository's egs/)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speechkit.train.checkpoint import list_checkpoints, load_checkpoint

pytestmark = pytest.mark.integration

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "indic_multilingual"
WER_LINE = re.compile(r"^%WER (\d+\.\d\d) \[ (\d+) / (\d+), (\d+) ins, (\d+) del, (\d+) sub \]( \[PARTIAL\])?$")


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("indic")
    for name in ("run.sh", "path.sh", "cmd.sh", "utils", "conf", "local"):
        (work / name).symlink_to(RECIPE / name)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    argv = ["./run.sh", "--nj", "2", "--mini_num_speakers", "3", "--mini_sentences", "6",
            "--mini_languages", "en,hi", "--mini_test_utts", "2", "--mini_dev_utts", "2", "--switch_off_taus", "0 4", "--switch_off_thresholds", "3",
            "--paper_switch_off_taus", "inf 100", "--paper_switch_off_thresholds", "inf 0.5",
            "--train_opts", "--trainer.max_epochs 2", "--finetune_opts", "--trainer.max_epochs 1"]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"run.sh failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return work, proc, env


def test_every_stage_writes_its_outputs(recipe_run):
    work, proc, _ = recipe_run
    data, exp = work / "data/mini", work / "exp/mini/rnnt_char_wb"
    def table(part, name):
        return dict(line.split(maxsplit=1) for line in (data / part / name).read_text().splitlines())

    test_utts = list(table("test", "text"))
    n = len(test_utts)
    assert n >= 4  # at least 2 per language (whole sentences are dealt)
    # test: the training voices saying sentences never trained on; test_unseen_voice: the third voice
    train_spk, train_text = set(table("train", "utt2spk").values()), set(table("train", "text").values())
    assert set(table("test", "utt2spk").values()) <= train_spk and not set(table("test", "text").values()) & train_text
    assert set(table("test_unseen_voice", "utt2spk").values()) == {"sp03"} and "sp03" not in train_spk
    assert not set(table("test_unseen_voice", "text").values()) & train_text
    assert sorted(set(table("test_unseen_voice", "utt2lang").values())) == ["en", "hi"]
    assert (data / "train/feats.scp").is_file() and (data / "train/cmvn_global.ark").is_file()
    assert not (data / "train/cmvn.scp").exists()  # Kaldi: cmvn.scp keys are the speakers
    assert (data / "lang_char_wb/languages.txt").read_text().split() == ["en", "0", "hi", "1"]
    systems = ["mono_en", "mono_hi", "vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid",
               "multisoftmax_lsp_lid", "ft_en", "ft_hi", "ft_onehot_en", "ft_onehot_hi"]
    for s in systems:
        assert (exp / s / "checkpoints/best.pt").is_file(), s
    decodes = [exp / "vanilla/decode_test", exp / "mono/decode_test_oracle", exp / "ft/decode_test_oracle",
               exp / "ft_onehot/decode_test_oracle", exp / "multisoftmax_lsp_lid/decode_test_lidfree"]
    decodes += [exp / f"{s}/decode_test_oracle" for s in ("onehot", "multisoftmax", "multisoftmax_lsp",
                                                           "multisoftmax_lid", "multisoftmax_lsp_lid")]
    lidfree = sorted((exp / "multisoftmax_lid").glob("decode_test_lidfree*"))
    assert [d.name for d in lidfree] == ["decode_test_lidfree", "decode_test_lidfree_paper_tau100ms_p0.5",
                                         "decode_test_lidfree_switchoff", "decode_test_lidfree_switchoff_posterior",
                                         "decode_test_lidfree_tau0_s3", "decode_test_lidfree_tau4_s3"]
    for d in decodes + lidfree:
        hyp = [line.split()[0] for line in (d / "text").read_text().splitlines()]
        assert hyp == test_utts, d  # a hypothesis (possibly empty) for every test utterance
        for name in ("wer.txt", "cer.txt"):
            lines = (d / "scoring" / name).read_text().splitlines()
            m = WER_LINE.match(lines[0])
            assert m, (d, lines[0])
            assert int(m.group(2)) == int(m.group(4)) + int(m.group(5)) + int(m.group(6))
            assert lines[2] == f"Scored {n} sentences, 0 not present in hyp."
        assert json.loads((d / "scoring/wer.json").read_text())["per_language"].keys() == {"en", "hi"}
    for d in lidfree + [exp / "vanilla/decode_test"]:
        last = (d / "scoring/lid.txt").read_text().splitlines()[-1]
        assert re.match(rf"^LID accuracy: \d+\.\d\d % \[ \d+ / {n} \]$", last), last
    for d in lidfree:
        st = json.loads((d / "decode_stats.json").read_text())
        assert 1.0 <= st["t_avg"] <= 2.0 and st["rtf"] > 0 and st["num_decoded"] == n
    assert json.loads((lidfree[0] / "decode_stats.json").read_text())["t_avg"] == 2.0
    unseen = table("test_unseen_voice", "text")
    for d in [exp / "vanilla/decode_test_unseen_voice", exp / "mono/decode_test_unseen_voice_oracle",
              exp / "multisoftmax/decode_test_unseen_voice_oracle", exp / "multisoftmax_lid/decode_test_unseen_voice_lidfree"]:
        assert list(table_of(d / "text")) == list(unseen), d
        assert (d / "scoring/cer.txt").read_text().splitlines()[2] == f"Scored {len(unseen)} sentences, 0 not present in hyp."
    for s in systems:  # one blank penalty and one checkpoint, given (mini: --blank_penalties 0, --avg 0)
        assert json.loads((exp / s / "blank_penalty.json").read_text()) == {"blank_penalty": 0.0, "chosen_on": None}
        assert json.loads((exp / s / "checkpoint_avg.json").read_text()) == {"avg": 0, "chosen_on": None,
                                                                             "checkpoint": "best.pt"}
    # the switch-off operating points chosen on dev (both grids decoded on dev), then each test set
    # decoded once at them
    lid = exp / "multisoftmax_lid"
    assert sorted(d.name for d in lid.glob("decode_dev_*")) == [
        "decode_dev_lidfree", "decode_dev_lidfree_paper_tau100ms_p0.5", "decode_dev_lidfree_tau0_s3",
        "decode_dev_lidfree_tau4_s3"]
    for name, rule in (("switch_off", "gap"), ("switch_off_posterior", "posterior")):
        rec = json.loads((lid / f"{name}.json").read_text())
        assert rec["rule"] == rule and rec["chosen_on"] == "data/mini/dev/text" and rec["margin_wer_points"] == 1.3
        assert rec["utterances"] == len(table("dev", "text")) and len(rec["candidates"]) == (2 if rule == "gap" else 1)
        line = (lid / name).read_text().split()
        assert line == ["none"] or (rec["switch_off"] and len(line) == 2), line
        for t in ("test", "test_unseen_voice"):
            d = lid / f"decode_{t}_lidfree_{name.replace('switch_off', 'switchoff')}"
            st = json.loads((d / "decode_stats.json").read_text())
            assert st["switch_off_threshold"] == ("inf" if line == ["none"] else float(line[1])), (d, st)
            assert (d / "scoring/wer.json").is_file()
    ft = json.loads((exp / "ft_hi/model_info.json").read_text())
    assert ft["languages"] == ["hi"] and ft["variant"] == "multisoftmax"


def table_of(path):
    return dict((line.split(maxsplit=1) + [""])[:2] for line in Path(path).read_text().splitlines())


def test_results_table_printed_and_written(recipe_run):
    work, proc, _ = recipe_run
    results = (work / "RESULTS.md").read_text()  # rendered from the tracked-style copy in results/mini
    for title in ("Table 2", "Table 2, LSP row", "Table 3", "Tables 4 and 5", "Figure 2", "Table 6", "Table 7", "Systems",
                  "Test set `test_unseen_voice`", "### Environment", "./run.sh --nj 2"):
        assert title in results and title in proc.stdout, title
    assert (work / "results/mini/multisoftmax/decode_test_oracle/scoring/cer.json").is_file()
    assert (work / "results/mini/runs.jsonl").read_text().count("\n") >= 1
    assert "| vanilla (union softmax) |" in results and "| multi-softmax + LID, LID-free |" in results
    table7 = results.split("#### Table 7")[1].split("\n#### ")[0]
    assert "**Operating points chosen on dev**" in table7 and "**Analysis: sweep on test, not used to choose.**" in table7
    gap, posterior = table7.split("The recipe's own variant (not in the paper)")   # the paper's rule first
    assert len([ln for ln in gap.splitlines() if re.match(r"^\| (inf|\d+) \|", ln)]) == 3
    assert len([ln for ln in posterior.splitlines() if re.match(r"^\| (inf|\d+ ms) \|", ln)]) == 2
    assert "| one-hot fine-tuned per language (union softmax cut to the language) |" in results


def test_rerun_is_idempotent(recipe_run):
    work, _, env = recipe_run
    exp = work / "exp/mini/rnnt_char_wb"
    before = (exp / "multisoftmax/checkpoints/best.pt").stat().st_mtime_ns
    parts = exp / "multisoftmax/decode_test_oracle/parts/results.1.jsonl"
    parts_before = parts.stat().st_mtime_ns
    proc = subprocess.run(["./run.sh", "--stage", "3", "--stop_stage", "4", "--nj", "2", "--mini_num_speakers", "3",
                           "--mini_sentences", "6", "--mini_languages", "en,hi", "--variants", "multisoftmax",
                           "--train_opts", "--trainer.max_epochs 2"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (exp / "multisoftmax/checkpoints/best.pt").stat().st_mtime_ns == before
    assert parts.stat().st_mtime_ns == parts_before
    assert "training already finished" in (exp / "multisoftmax/train.log").read_text()


def test_avg_decodes_the_mean_of_the_last_epochs(recipe_run):
    """--avg N: an error naming the directory when stage 3 kept fewer epochs; after training on with
    --avg 2 (keep_last 2), stage 4 decodes checkpoints/avg2.pt, the mean of the last two epochs."""
    work, _, env = recipe_run
    exp = work / "exp/mini/rnnt_char_wb/multisoftmax"
    common = ["./run.sh", "--nj", "1", "--variants", "multisoftmax", "--avg", "2"]
    proc = subprocess.run([*common, "--stage", "4", "--stop_stage", "4"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert "only 1 full checkpoint(s) kept" in proc.stderr and "--trainer.keep_last 2" in proc.stderr
    proc = subprocess.run([*common, "--stage", "3", "--stop_stage", "4", "--train_opts", "--trainer.max_epochs 3"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = list_checkpoints(exp / "checkpoints")
    assert [p.name[:10] for p in kept] == ["ckpt-e0002", "ckpt-e0003"]
    avg = load_checkpoint(exp / "checkpoints/avg2.pt")
    assert avg["averaged_from"] == [p.name for p in kept]
    assert "from avg2.pt" in (exp / "decode_test_oracle/log/decode.1.log").read_text()


def test_real_data_preparation_is_speaker_disjoint(tmp_path, shared_data):
    for name in ("path.sh", "utils", "local"):
        (tmp_path / name).symlink_to(RECIPE / name)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", LC_ALL="C")
    proc = subprocess.run(["local/prepare_real.sh", str(shared_data), "data/real"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    def table(part, name):
        return dict(line.split(maxsplit=1) for line in (tmp_path / "data/real" / part / name).read_text().splitlines())

    spk = {p: set(table(p, "utt2spk").values()) for p in ("train", "dev", "test")}
    assert not spk["train"] & (spk["dev"] | spk["test"])
    langs = {p: sorted(set(table(p, "utt2lang").values())) for p in ("train", "dev", "test")}
    assert langs == {p: ["en", "hi", "ml"] for p in langs}
    train = table("train", "utt2spk")
    assert not any(u.endswith(("_sa1", "_sa2")) for u in train)  # TIMIT's shared sentences left out
    fsdd = {"george", "jackson", "lucas", "nicolas"}
    assert spk["train"] & fsdd == fsdd - {"lucas"} and spk["dev"] & fsdd == spk["test"] & fsdd == {"lucas"}
    assert sum(1 for u in table("test", "utt2spk") if u.startswith("lucas_")) == 100
