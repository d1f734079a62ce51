"""egs/vctk_continual/run.sh, every stage, on a tiny mini corpus (4 espeak-ng voices: 2 pre-training,
2 continual), one or two epochs per model; and local/prepare_vctk.sh on a fake VCTK tree.

Everything the recipe writes goes to a temporary directory (--db_root, --datadir, --dumpdir,
--expdir, --results_dir); the recipe folder itself is only read. Later calls give only --stage and run options
(no corpus option repeated) and must continue the setup of the first; a contradicting option is
refused; a second stage-7 call finds every episode trained and scored and redoes nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.speakers import load_embeddings
from speechkit.utils.fileio import read_table

pytestmark = pytest.mark.integration

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "vctk_continual"
RUNS = ["jt", "sa", "er_b1", "er_br_b1_k10"]
RUN_OPTS = ["--strategies", "jt sa er er_br", "--buffer_size", "1", "--er_buffer_sizes", "1", "--orders", "1 2",
            "--continual_args", "--trainer.max_epochs 1"]


def run_recipe(tmp: Path, *args: str, check: bool = True, cwd: Path = RECIPE) -> subprocess.CompletedProcess:
    cmd = ["./run.sh", "--datadir", str(tmp / "data"), "--dumpdir", str(tmp / "dump"), "--expdir", str(tmp / "exp"),
           "--results_dir", str(tmp / "results"), "--nj", "2", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    if check:
        assert proc.returncode == 0, f"run.sh failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def recipe(require_espeak, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vctk_continual")
    before = sorted(p.name for p in RECIPE.iterdir())
    # DIO + StoneMask (conf/world_dio.yaml) for the WORLD F0: several times faster than the default Harvest;
    # nothing here depends on which of the two F0 trackers made the features
    run_recipe(tmp, "--corpus", "mini", "--db_root", str(tmp / "db"), "--mini_speakers", "4", "--num_continual", "2",
               "--mini_sentences", "16", "--num_test", "3", "--num_dev", "2", "--world_config", "conf/world_dio.yaml",
               "--stop_stage", "5")
    proc = run_recipe(tmp, "--stage", "6", "--pretrain_args", "--trainer.max_epochs 2", *RUN_OPTS)
    assert sorted(p.name for p in RECIPE.iterdir()) == before, "the recipe wrote into egs/vctk_continual"
    return tmp, proc


def test_setup_is_remembered_and_contradictions_refused(recipe):
    tmp, _ = recipe
    setup = dict(line.split("=", 1) for line in (tmp / "data" / ".setup").read_text().splitlines())
    assert setup["corpus"] == "mini" and setup["num_continual"] == "2" and setup["mini_speakers"] == "4"
    proc = run_recipe(tmp, "--stage", "6", "--mini_speakers", "6", check=False)
    assert proc.returncode != 0 and "contradicts" in proc.stderr and "mini_speakers=4" in proc.stderr
    # tacotron2 needs its own inputs (stage 1's log-mel, stage 4's dumps): stage 6 alone says so
    proc = run_recipe(tmp, "--stage", "6", "--tts_model", "tacotron2", check=False)
    assert proc.returncode != 0 and "run stages 1-5 with --tts_model tacotron2" in proc.stderr


def test_speaker_splits_vectors_and_verifier_data(recipe):
    tmp, _ = recipe
    data = tmp / "data"
    pre, cont = (data / "pretrain_speakers").read_text().split(), (data / "continual_speakers").read_text().split()
    assert pre == ["sp01", "sp02"] and cont == ["sp03", "sp04"]
    for part, n in (("train", 11), ("dev", 2), ("test", 3)):
        spk = read_table(data / part / "utt2spk").values()
        assert all(list(spk).count(s) == n for s in pre + cont)
    # continual dumps hold only continual speakers; pre-training dumps only pre-training speakers
    assert set(read_table(tmp / "dump" / "continual" / "test" / "utt2spk").values()) == set(cont)
    assert set(read_table(tmp / "dump" / "pretrain" / "train" / "utt2spk").values()) == set(pre)
    vecs = load_embeddings(tmp / "exp" / "embed" / "train" / "spk_embeddings.scp")
    assert sorted(vecs) == pre + cont and all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in vecs.values())
    # the verifier's data: WORLD copy synthesis of ground truth, same length as the original audio
    wav = read_table(data / "test_world" / "wav.scp")
    assert len(wav) == 4 * 3
    utt = sorted(wav)[0]
    x, sr = sf.read(wav[utt])
    assert sr == 16000 and abs(len(x) / sr - float(read_table(data / "test" / "utt2dur")[utt])) < 0.02
    assert "held-out accuracy" in (tmp / "exp" / "embed" / "verifier.txt").read_text()


def test_every_run_and_order_is_trained_and_scored(recipe):
    tmp, _ = recipe
    cont = (tmp / "data" / "continual_speakers").read_text().split()
    for run in RUNS:
        orders = []
        for o in ("1", "2"):
            e = tmp / "exp" / "musa_rnn" / "continual" / run / f"order{o}"
            plan = json.loads((e / "plan.json").read_text())
            orders.append(plan["order"])
            assert sorted(plan["order"]) == cont
            # order K: row K of the Williams design over the 2 continual speakers; K also the training seed
            assert plan["extra"]["order_design"] == {"design": "williams", "row": int(o), "rows": 2, "speakers": cont}
            assert plan["seed"] == int(o)
            s = json.loads((e / "eval" / "scores.json").read_text())
            assert s["complete"] and s["order"] == plan["order"]
            assert all(0 <= x <= 1 for x in s["retained_accuracy"]) and s["forgetting"][0] is None
            A = s["accuracy_matrix"]
            assert s["retained_accuracy"][1] == pytest.approx((A[1][0] + A[1][1]) / 2)
            ep2 = json.loads((e / "eval" / "episode_02.json").read_text())
            assert ep2["classes"] == ["sp01", "sp02", *plan["order"]]
            assert len(ep2["utterances"]) + len(ep2["skipped"]) == 2 * 3
            for png in ("confusion_matrix", "embeddings_2d", "accuracy_matrix"):
                assert (e / "eval" / f"{png}.png").stat().st_size > 1000
            assert len(list((e / "eval" / "wav" / "episode_02").glob("*.wav"))) == 2
            ep = json.loads((e / f"episode_02_{plan['order'][1]}" / "episode.json").read_text())
            if run == "jt":  # the paper's joint training: from theta_init on both speakers, early-stopped on both
                assert ep["initial_weights"] == "theta_init" and ep["valid_speakers"] == plan["order"]
                assert ep["training_speakers"] == plan["order"] and ep["utterances"]["buffer"] == 0
            elif run == "er_br_b1_k10":  # one buffered utterance of the first speaker, replicated 10 times
                assert ep["utterances"]["buffer"] == 10 and ep["buffer_size"] == 1
            elif run == "er_b1":
                assert ep["utterances"]["buffer"] == 1
            else:
                assert ep["utterances"]["buffer"] == 0
        assert orders == [cont, cont[::-1]], "rows 1 and 2 of the design: both orders of 2 speakers"


def test_results_collected_and_rendered(recipe):
    """Stage 8: the score files of every run and order copied into <results_dir>/mini/ with the run
    records; RESULTS.md beside <results_dir>, rendered from there alone (again, after exp/ is gone)."""
    tmp, _ = recipe
    res = tmp / "results" / "mini"
    assert sorted(p.name for p in res.iterdir() if p.is_dir()) == sorted(RUNS + ["audio", "figures"])
    for run in RUNS:
        for o in ("1", "2"):
            for f in ("scores.json", "last_episode.json", "train.json", "plan.json"):
                assert (res / run / f"order{o}" / f).is_file(), (run, o, f)
    train = json.loads((res / "jt" / "order1" / "train.json").read_text())
    assert [e["initial_weights"] for e in train] == ["theta_init", "theta_init"]
    setup = json.loads((res / "setup.json").read_text())
    assert setup["continual_speakers"] == ["sp03", "sp04"] and setup["verifier_extra_speakers"] == ["sp01", "sp02"]
    assert setup["theta_init"]["epochs"] == 2 and "valid/mcd" in setup["theta_init"]["best_valid"]
    runs = [json.loads(x) for x in (res / "runs.jsonl").read_text().splitlines()]
    assert [r["cmdline"].split()[:3] for r in runs[:2]] == [["./run.sh", "--datadir", str(tmp / "data")]] * 2
    assert "--stage 6" in runs[1]["cmdline"] and all(r["configs"]["conf/continual.yaml"] for r in runs)
    page = (tmp / "RESULTS.md").read_text()
    for row in ("## `mini`: corpus mini, base TTS musa_rnn", "### Environment", "--stage 6 --pretrain_args",
                "JT (the paper's: theta_init trained on all seen speakers, upper bound)",
                "SA (sequential adaptation, lower bound)", "ER-BR (N_B = 1, K = 10)",
                "ER-BR above ER at the same buffer (N_B = 1)", "held-out accuracy", "(2 orders)"):
        assert row in page, row
    figs = res / "figures"
    assert (figs / "ra_fg_curves.png").stat().st_size > 1000 and (figs / "er_buffer_sizes.png").is_file()
    assert (figs / "sa_order1_confusion_matrix.png").is_file()
    # the page comes from results/ alone
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([str(Path(sys.executable)), "local/make_results.py", "--render", str(tmp / "again.md"),
                           "--results", str(tmp / "results")], cwd=RECIPE, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "again.md").read_text() == page


def test_rerun_redoes_nothing(recipe):
    tmp, _ = recipe
    e = tmp / "exp" / "musa_rnn" / "continual" / "sa" / "order1"
    files = [e / "episode_01_sp03" / "episode.json", e / "episode_01_sp04" / "episode.json",
             e / "eval" / "episode_01.json", e / "eval" / "episode_02.json"]
    stamps = {f: f.stat().st_mtime_ns for f in files if f.exists()}
    assert len(stamps) == 3
    run_recipe(tmp, "--stage", "7", "--stop_stage", "7", *RUN_OPTS)
    assert {f: f.stat().st_mtime_ns for f in stamps} == stamps


def test_ewc_lambda_grid_is_chosen_on_dev(recipe):
    """--ewc_lambda_grid (issue 36): ewc_l<lambda> trained in every order, each episode scored on the dev sentences
    only (<run>/order<K>/eval_dev; no test eval/), the choice in exp/musa_rnn/continual/ewc_grid.json, copied by
    stage 8 into results/mini/ and rendered; the strategy runs are left as they were."""
    tmp, _ = recipe
    sa = tmp / "exp" / "musa_rnn" / "continual" / "sa" / "order1" / "eval" / "scores.json"
    stamp = sa.stat().st_mtime_ns
    run_recipe(tmp, "--stage", "7", "--ewc_lambda_grid", "1e2 1e6", "--orders", "1 2",
               "--continual_args", "--trainer.max_epochs 1")
    cont = tmp / "exp" / "musa_rnn" / "continual"
    dev = set(read_table(tmp / "dump" / "continual" / "dev" / "utt2spk"))
    for run in ("ewc_l1e2", "ewc_l1e6"):
        for o in ("1", "2"):
            e = cont / run / f"order{o}"
            assert not (e / "eval").exists()
            s = json.loads((e / "eval_dev" / "scores.json").read_text())
            assert s["complete"] and s["num_utts"] == 2
            ep = json.loads((e / "eval_dev" / "episode_02.json").read_text())
            assert {u["utt"] for u in ep["utterances"]} <= dev  # the dev sentences, not the test ones
            assert json.loads((e / "plan.json").read_text())["ewc_lambda"] == float(run[5:])
    grid = json.loads((cont / "ewc_grid.json").read_text())
    assert grid["lambdas"] == [100.0, 1e6] and grid["orders"] == ["1", "2"]
    assert grid["chosen"]["lambda"] in (100.0, 1e6)
    assert json.loads((tmp / "results" / "mini" / "ewc_grid.json").read_text()) == grid
    assert "### EWC's λ chosen on dev" in (tmp / "RESULTS.md").read_text()
    assert not (tmp / "results" / "mini" / "ewc_l1e2").exists() and sa.stat().st_mtime_ns == stamp


# a seconds-long Tacotron 2; a stop threshold it cannot reach in 2 epochs, so that its syntheses are
# long enough for the speaker encoder
TINY_TACOTRON2 = ("--model.embed_dim 16 --model.encoder_conv_layers 1 --model.encoder_conv_channels 16 "
                  "--model.encoder_lstm_units 8 --model.attention_dim 8 --model.attention_filters 4 "
                  "--model.attention_kernel 5 --model.prenet_dim 8 --model.decoder_lstm_units 16 "
                  "--model.postnet_layers 2 --model.postnet_channels 8 --model.stop_threshold 0.999 "
                  "--trainer.batch_size 8 --trainer.max_epochs 2")


def test_tacotron2_base_model(recipe):
    """--tts_model tacotron2 on the same setup: log-mel (stage 1), phone + log-mel dumps without an
    aligner (stages 3-4), the verifier's ground truth through Griffin-Lim (stage 5), theta_init and
    the episodes scored (stages 6-8); the WORLD model's files stay as they were."""
    tmp, _ = recipe
    world_scores = tmp / "exp" / "musa_rnn" / "continual" / "sa" / "order1" / "eval" / "scores.json"
    stamp = world_scores.stat().st_mtime_ns
    proc = run_recipe(tmp, "--stage", "1", "--tts_model", "tacotron2", "--pretrain_args", TINY_TACOTRON2,
                      "--strategies", "sa er", "--buffer_size", "1", "--er_buffer_sizes", "", "--orders", "1",
                      "--continual_args", "--trainer.max_epochs 1")
    assert "no forced alignment: tacotron2" in proc.stdout
    d = tmp / "dump" / "phn_mel"
    feats = read_table(d / "continual" / "train" / "feats.scp")
    text = read_table(d / "continual" / "train" / "text")
    assert sorted(feats) == sorted(text) and set(read_table(d / "continual" / "train" / "utt2spk").values()) \
        == {"sp03", "sp04"}
    assert "n_mels: 80" in (d / "pretrain" / "train" / "feats.yaml").read_text()
    # the verifier's ground truth: Griffin-Lim from the 12.5 ms log-mel, as long as the audio
    wav = read_table(tmp / "data" / "test_gl" / "wav.scp")
    utt = sorted(wav)[0]
    x, sr = sf.read(wav[utt])
    assert sr == 16000 and abs(len(x) / sr - float(read_table(tmp / "data" / "test" / "utt2dur")[utt])) < 0.03
    assert "held-out accuracy" in (tmp / "exp" / "embed" / "verifier_gl.txt").read_text()
    for run in ("sa", "er_b1"):
        s = json.loads((tmp / "exp" / "tacotron2" / "continual" / run / "order1" / "eval" / "scores.json").read_text())
        assert s["complete"] and len(s["retained_accuracy"]) == 2
        assert (tmp / "results" / "mini_tacotron2" / run / "order1" / "scores.json").is_file()
    page = (tmp / "RESULTS.md").read_text()
    assert "## `mini_tacotron2`: corpus mini, base TTS tacotron2" in page and "## `mini`: corpus mini" in page
    assert world_scores.stat().st_mtime_ns == stamp


def _fake_vctk(root: Path, speakers: dict[str, int]) -> None:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True)
    (root / "speaker-info.txt").write_text("ID  AGE  GENDER  ACCENTS  REGION\n" + "".join(
        f"{s}  23  {'F' if i % 2 else 'M'}  English  Leeds\n" for i, s in enumerate(speakers)))
    for s, n in speakers.items():
        (root / "wav48_silence_trimmed" / s).mkdir(parents=True)
        (root / "txt" / s).mkdir(parents=True)
        for i in range(1, n + 1):
            sf.write(root / "wav48_silence_trimmed" / s / f"{s}_{i:03d}_mic1.flac",
                     0.1 * rng.standard_normal(48000 // 2), 48000)
            (root / "txt" / s / f"{s}_{i:03d}.txt").write_text(f"Please call Stella number {i}.\n")


def test_prepare_vctk_on_a_fake_tree(tmp_path):
    db = tmp_path / "VCTK-Corpus-0.92"
    _fake_vctk(db, {"p225": 12, "p226": 12, "p227": 12, "p228": 6})
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = ["bash", "-c", ". ./path.sh && local/prepare_vctk.sh --num_continual 2 --num_test 3 --num_dev 2 "
           f"{db} {tmp_path / 'data'}"]
    proc = subprocess.run(cmd, cwd=RECIPE, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = tmp_path / "data"
    cont = (data / "continual_speakers").read_text().split()
    pre = (data / "pretrain_speakers").read_text().split()
    assert len(cont) == 2 and sorted(cont + pre) == ["p225", "p226", "p227", "p228"]
    utt2spk = read_table(data / "test" / "utt2spk")
    assert sorted(set(utt2spk.values())) == sorted(s for s in cont + pre if s != "p228")  # 6 < 3 + 2 + 2: train only
    assert list(read_table(data / "train" / "utt2spk").values()).count("p228") == 6
    wav = read_table(data / "train" / "wav.scp")["p225_001"]
    assert "sox" in wav and "16000" in wav and wav.endswith("|")
    # a continual speaker that is not in the corpus is an error naming it
    cmd[-1] = cmd[-1].replace("--num_continual 2", "--continual_speakers p225,p999")
    proc = subprocess.run(cmd, cwd=RECIPE, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "'p999' is not a speaker" in proc.stderr
    # through run.sh: the layout is recognised and --continual_speakers chooses the continual split
    run = ["./run.sh", "--db_root", str(db), "--datadir", str(tmp_path / "d2"), "--expdir", str(tmp_path / "e2"),
           "--continual_speakers", "p226,p227",
           "--num_test", "3", "--num_dev", "2", "--stop_stage", "0"]
    proc = subprocess.run(run, cwd=RECIPE, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "d2" / "continual_speakers").read_text().split() == ["p226", "p227"]
    assert "corpus=vctk" in (tmp_path / "d2" / ".setup").read_text()
