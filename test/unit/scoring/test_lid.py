"""LID scoring: hand-worked confusion matrix, accuracy line, missing hypotheses, CLI errors, plot."""
from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from speechkit.bin.score_lid import main
from speechkit.scoring.lid import MISSING, score_lid

REF = {"u1": "hi", "u2": "hi", "u3": "ml", "u4": "ml", "u5": "ta"}
HYP = {"u1": "hi", "u2": "ml", "u3": "ml", "u4": "en"}


def test_confusion_by_hand():
    r = score_lid(REF, HYP)
    assert r.labels == ["hi", "ml", "ta"]
    assert r.hyp_labels == ["hi", "ml", "ta", "en", MISSING]
    assert r.confusion.tolist() == [[1, 1, 0, 0, 0], [0, 1, 0, 1, 0], [0, 0, 0, 0, 1]]
    assert (r.correct, r.total) == (2, 5) and r.accuracy == pytest.approx(40.0)
    assert r.recall() == {"hi": 50.0, "ml": 50.0, "ta": 0.0}
    assert r.precision() == {"hi": 100.0, "ml": 50.0, "ta": None}
    assert r.balanced_accuracy() == pytest.approx(100 / 3)
    assert r.missing == ["u5"]
    assert r.summary_line() == "LID accuracy: 40.00 % [ 2 / 5 ]"


def test_against_brute_force_counting():
    rng = random.Random(0)
    langs = ["gu", "hi", "ta"]
    ref = {f"u{i:03d}": rng.choice(langs) for i in range(400)}
    hyp = {u: (lab if rng.random() < 0.9 else rng.choice(langs)) for u, lab in ref.items()}
    r = score_lid(ref, hyp)
    pairs = Counter((ref[u], hyp[u]) for u in ref)
    for i, a in enumerate(r.labels):
        for j, b in enumerate(r.hyp_labels):
            assert r.confusion[i, j] == pairs[(a, b)]
    n_ok = sum(ref[u] == hyp[u] for u in ref)
    assert r.summary_line() == f"LID accuracy: {100 * n_ok / 400:.2f} % [ {n_ok} / 400 ]"
    assert np.trace(r.confusion) == n_ok


def test_hyp_not_in_ref():
    with pytest.raises(ValueError, match="not in the reference"):
        score_lid({"a": "hi"}, {"a": "hi", "b": "ml"})


def test_cli(tmp_path, capsys):
    (tmp_path / "ref").write_text("".join(f"{u} {lab}\n" for u, lab in REF.items()), "utf-8")
    (tmp_path / "hyp").write_text("".join(f"{u} {lab}\n" for u, lab in HYP.items()), "utf-8")
    rc = main([str(tmp_path / "ref"), str(tmp_path / "hyp"), "--json", str(tmp_path / "lid.json"),
               "--plot", str(tmp_path / "lid.png")])
    assert rc == 0
    cap = capsys.readouterr()
    out = cap.out.splitlines()
    assert out[-1] == "LID accuracy: 40.00 % [ 2 / 5 ]"
    assert out[0].split()[1:] == ["hi", "ml", "ta", "en", MISSING, "total", "recall%"]
    assert out[1].split() == ["hi", "1", "1", "0", "0", "0", "2", "50.00"]
    assert "have no hypothesis" in cap.err and "u5" in cap.err
    res = json.loads((tmp_path / "lid.json").read_text("utf-8"))
    assert res["correct"] == 2 and res["confusion"][2] == [0, 0, 0, 0, 1]
    assert (tmp_path / "lid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors(tmp_path, capsys):
    (tmp_path / "ref").write_text("u1 hi\nu2 ml\n", "utf-8")
    (tmp_path / "hyp").write_text("u1 hi\nu9 ml\n", "utf-8")
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 1
    assert f"{tmp_path / 'hyp'}:2: utterance 'u9' is not in the reference" in capsys.readouterr().err
    (tmp_path / "hyp").write_text("", "utf-8")   # a system that attached no language to any utterance
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[-1] == "LID accuracy: 0.00 % [ 0 / 2 ]"
    assert "2 of 2 reference utterances have no hypothesis" in cap.err
    (tmp_path / "hyp").write_text("u1 hi en\n", "utf-8")
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 1
    assert f"{tmp_path / 'hyp'}:1: expected '<utt> <lang>'" in capsys.readouterr().err


def test_help_says_what_an_empty_hypothesis_does(tmp_path, capsys):
    """Issue 23 item 17b: the help listed 'an empty HYP' among the exit-1 errors, but an empty HYP (a
    system that attached no language to any utterance, issue 11) scores 0 % and exits 0."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "an empty HYP;" not in help_text
    assert "An empty HYP (a system that attached no language to any utterance) therefore scores 0 %" in help_text
    assert "and exits 0" in help_text
    (tmp_path / "ref").write_text("u1 hi\n", "utf-8")
    (tmp_path / "hyp").write_text("", "utf-8")
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 0
    (tmp_path / "ref").write_text("", "utf-8")   # an empty REF stays an error
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 1
    assert "empty reference utt2lang file" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--plot", "--json"])
def test_unwritable_output_fails_before_anything_is_printed(tmp_path, capsys, option):
    """Issue 23 item 17b: an unwritable --plot printed the accuracy, then failed."""
    (tmp_path / "ref").write_text("u1 hi\nu2 ml\n", "utf-8")
    (tmp_path / "hyp").write_text("u1 hi\nu2 hi\n", "utf-8")
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    other = "--json" if option == "--plot" else "--plot"
    for bad, msg in ((tmp_path / "file" / "out", f"cannot write {tmp_path / 'file'}: Not a directory"),
                     (tmp_path / "dir", f"cannot write {tmp_path / 'dir'}: Is a directory")):
        rc = main([str(tmp_path / "ref"), str(tmp_path / "hyp"), other, str(tmp_path / "ok" / "other"),
                   option, str(bad)])
        cap = capsys.readouterr()
        assert rc == 1
        assert cap.out == ""
        assert cap.err.strip().splitlines()[-1] == f"speechkit-score-lid: error: {msg}"
        assert not (tmp_path / "ok" / "other").exists()


def test_output_that_is_an_input_is_refused(tmp_path, capsys):
    (tmp_path / "ref").write_text("u1 hi\nu2 ml\n", "utf-8")
    (tmp_path / "hyp").write_text("u1 hi\nu2 hi\n", "utf-8")
    for argv, msg in ((["--json", str(tmp_path / "hyp")], f"--json {tmp_path / 'hyp'} is HYP"),
                      (["--plot", str(tmp_path / "ref")], f"--plot {tmp_path / 'ref'} is REF"),
                      (["--json", str(tmp_path / "x"), "--plot", str(tmp_path / "x")],
                       f"--plot {tmp_path / 'x'} is --json")):
        assert main([str(tmp_path / "ref"), str(tmp_path / "hyp"), *argv]) == 1
        cap = capsys.readouterr()
        assert cap.out == "" and msg in cap.err
    assert (tmp_path / "hyp").read_text("utf-8") == "u1 hi\nu2 hi\n"
    assert (tmp_path / "ref").read_text("utf-8") == "u1 hi\nu2 ml\n"
    assert not (tmp_path / "x").exists()
