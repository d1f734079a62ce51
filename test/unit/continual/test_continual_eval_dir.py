"""Issue 36 item 1: speechkit-score-continual --eval-dir scores a run on other sentences (the dev utterances, how
egs/vctk_continual chooses EWC's lambda) into its own folder and leaves EXP/eval, the test evaluation, as it was;
an --eval-dir that is an episode's model dir or an input is refused. Reuses the scripted run of
test_continual_eval (fake synthesizer and encoder)."""
from __future__ import annotations

import json
import shutil

import numpy as np

from speechkit.bin.score_continual import main
from test_continual_eval import RA, FakeSynth, run  # noqa: F401  (run: the fixture)


def _dev_dir(root):
    """The dev sentences: the same scripted voices under other utterance ids."""
    dev = root / "dev"
    shutil.copytree(root / "test", dev)
    for f in ("labels.scp", "utt2spk"):  # the ids renamed, the arks (absolute paths into test/) kept
        lines = [ln.split(" ", 1) for ln in (dev / f).read_text().splitlines()]
        (dev / f).write_text("".join(f"{u.replace('_t', '_d')} {rest}\n" for u, rest in lines))
    return dev


def _cli(root, *extra):
    return main(["--test-dir", str(root / "test"), "--gt-train", str(root / "gt_train"), "--gt-test",
                 str(root / "gt_test"), "--num-utts", "2", "--no-plots", *extra, str(root / "exp")])


def test_dev_scores_go_to_their_own_dir_and_the_test_eval_is_kept(run, capsys):  # noqa: F811
    assert _cli(run) == 0
    test_eval = run / "exp" / "eval"
    before = {p.name: p.read_bytes() for p in test_eval.glob("*.json")}
    calls = FakeSynth.calls
    dev = _dev_dir(run)
    argv = ["--test-dir", str(dev), "--gt-train", str(run / "gt_train"), "--gt-test", str(run / "gt_test"),
            "--num-utts", "2", "--no-plots", "--eval-dir", str(run / "exp" / "eval_dev"), str(run / "exp")]
    assert main(argv) == 0
    assert "(on " in capsys.readouterr().out
    assert FakeSynth.calls == 2 * calls  # every episode synthesized again, from the dev labels
    s = json.loads((run / "exp" / "eval_dev" / "scores.json").read_text())
    np.testing.assert_allclose(s["retained_accuracy"], RA)  # the same scripted voices
    ep = json.loads((run / "exp" / "eval_dev" / "episode_03.json").read_text())
    assert {u["utt"] for u in ep["utterances"]} == {f"{s}_d{i}" for s in ("a", "b", "c") for i in range(2)}
    assert {p.name: p.read_bytes() for p in test_eval.glob("*.json")} == before  # the test results untouched
    # scored again: every dev episode reused (same inputs), the test eval still as it was
    assert main(argv) == 0 and FakeSynth.calls == 2 * calls
    assert {p.name: p.read_bytes() for p in test_eval.glob("*.json")} == before


def test_an_eval_dir_in_an_episode_or_an_input_is_refused(run, capsys):  # noqa: F811
    ep = run / "exp" / "episode_01_b"
    for bad, why in ((ep, "is EXP's episode dir"), (ep / "eval", "lies inside EXP's episode dir"),
                     (run / "exp", "is EXP"), (run / "test" / "eval", "lies inside --test-dir")):
        assert _cli(run, "--eval-dir", str(bad)) != 0
        err = capsys.readouterr().err
        assert f"--eval-dir {bad} {why}" in err, err
    assert FakeSynth.calls == 0 and not (ep / "eval").exists()
