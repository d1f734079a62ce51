"""WER scoring: hand-worked cases, Kaldi's exact lines and tie-breaking, cross-checks with jiwer
(and Kaldi's own code through kaldialign), per-language averages, WERR, CLI errors."""
from __future__ import annotations

import json
import random
import unicodedata

import pytest

from speechkit.bin.score_wer import main
from speechkit.scoring.wer import (
    EditCounts, WerResult, align, counts_of, edit_counts, kaldi_percent, score, tokenize, werr,
)
from speechkit.utils.fileio import DataError


def optimal_triples(ref, hyp) -> set[tuple[int, int, int]]:
    """Brute force: every (ins, del, sub) of every minimum-cost alignment (independent reference)."""
    R, H = len(ref), len(hyp)
    cost = [[r + h if r == 0 or h == 0 else 0 for h in range(H + 1)] for r in range(R + 1)]
    for r in range(1, R + 1):
        for h in range(1, H + 1):
            cost[r][h] = min(cost[r - 1][h - 1] + (ref[r - 1] != hyp[h - 1]), cost[r - 1][h] + 1, cost[r][h - 1] + 1)
    sets = [[set() for _ in range(H + 1)] for _ in range(R + 1)]
    sets[0][0] = {(0, 0, 0)}
    for r in range(R + 1):
        for h in range(H + 1):
            if r == h == 0:
                continue
            s = set()
            if r and h and cost[r - 1][h - 1] + (ref[r - 1] != hyp[h - 1]) == cost[r][h]:
                s |= {(i, d, x + (ref[r - 1] != hyp[h - 1])) for i, d, x in sets[r - 1][h - 1]}
            if r and cost[r - 1][h] + 1 == cost[r][h]:
                s |= {(i, d + 1, x) for i, d, x in sets[r - 1][h]}
            if h and cost[r][h - 1] + 1 == cost[r][h]:
                s |= {(i + 1, d, x) for i, d, x in sets[r][h - 1]}
            sets[r][h] = s
    return sets[R][H]


def _random_pairs(n, seed, vocab="abcde", max_len=9):
    rng = random.Random(seed)
    for _ in range(n):
        v = vocab[: rng.randint(1, len(vocab))]
        yield ([rng.choice(v) for _ in range(rng.randint(0, max_len))],
               [rng.choice(v) for _ in range(rng.randint(0, max_len))])


# ----------------------------------------------------------------------------- hand-worked
@pytest.mark.parametrize("ref, hyp, expect", [
    ("", "a b c", (0, 3, 0, 0)),              # empty reference: all insertions
    ("a b c", "", (3, 0, 3, 0)),              # empty hypothesis: all deletions
    ("a b c", "a b c", (3, 0, 0, 0)),
    ("a b c d", "a x c", (4, 0, 1, 1)),       # one sub, one del
    ("a b c", "a s x c", (3, 1, 0, 1)),       # kaldialign's README example
    ("a b", "b c", (2, 1, 1, 0)),             # tie: Kaldi takes del + ins, not two subs
    ("the cat sat", "a cat sat on", (3, 1, 0, 1)),
])
def test_hand_worked_counts(ref, hyp, expect):
    c = edit_counts(ref.split(), hyp.split())
    assert (c.ref_len, c.ins, c.dels, c.subs) == expect


def test_alignment_matches_counts():
    ali = align("a b c d".split(), "a x c e f".split())
    assert ali == [("a", "a"), ("b", "x"), ("c", "c"), ("d", "e"), (None, "f")]
    for ref, hyp in _random_pairs(500, seed=5):
        ali = align(ref, hyp)
        assert [a for a, _ in ali if a is not None] == ref and [b for _, b in ali if b is not None] == hyp
        assert counts_of(ali) == edit_counts(ref, hyp)


# ----------------------------------------------------------------------------- cross-checks
def test_cross_check_with_jiwer():
    """Same error totals and WER as jiwer on every random pair; the same sub/ins/del split wherever
    the minimum-cost split is unique. Where several splits are optimal, jiwer (rapidfuzz's
    backtrace) and Kaldi (its forward tie rule) may pick different ones: both must be optimal."""
    jiwer = pytest.importorskip("jiwer")
    n_unique = n_tie = n_tie_differs = 0
    for ref, hyp in _random_pairs(3000, seed=0):
        if not ref:
            continue  # jiwer refuses an empty reference
        ours = edit_counts(ref, hyp)
        out = jiwer.process_words(" ".join(ref), " ".join(hyp) if hyp else "")
        theirs = (out.insertions, out.deletions, out.substitutions)
        assert ours.errors == sum(theirs)
        assert abs(100.0 * ours.errors / ours.ref_len - 100.0 * out.wer) < 1e-9
        opt = optimal_triples(ref, hyp)
        assert (ours.ins, ours.dels, ours.subs) in opt and theirs in opt
        if len(opt) == 1:
            n_unique += 1
            assert (ours.ins, ours.dels, ours.subs) == theirs
        else:
            n_tie += 1
            n_tie_differs += (ours.ins, ours.dels, ours.subs) != theirs
    assert n_unique > 2000 and n_tie > 100 and n_tie_differs > 0  # the test exercised both kinds


def test_cross_check_corpus_level_with_jiwer():
    """Corpus WER over realistic sentences (large vocabulary, random edits) equals jiwer's."""
    jiwer = pytest.importorskip("jiwer")
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(300)]
    refs, hyps = {}, {}
    for k in range(200):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 25))]
        hyp = []
        for w in ref:
            p = rng.random()
            if p < 0.08:
                continue
            hyp.append(rng.choice(vocab) if p < 0.2 else w)
            if rng.random() < 0.05:
                hyp.append(rng.choice(vocab))
        refs[f"u{k:03d}"], hyps[f"u{k:03d}"] = " ".join(ref), " ".join(hyp)
    res = score(refs, hyps).total
    out = jiwer.process_words(list(refs.values()), [hyps[k] for k in refs])
    assert res.errors == out.insertions + out.deletions + out.substitutions
    assert abs(res.wer - 100.0 * out.wer) < 1e-9


def test_cross_check_with_kaldi_code():
    """kaldialign wraps Kaldi's own edit-distance code: identical ins/del/sub on every pair."""
    kaldialign = pytest.importorskip("kaldialign")
    for ref, hyp in _random_pairs(3000, seed=2):
        ours = edit_counts(ref, hyp)
        k = kaldialign.edit_distance(ref, hyp)
        assert (ours.ins, ours.dels, ours.subs) == (k["ins"], k["del"], k["sub"]), (ref, hyp)


# ----------------------------------------------------------------------------- Kaldi lines
def test_kaldi_lines_exact():
    r = WerResult(num_words=454, ins=3, dels=10, subs=43, num_sent=10, sent_errs=5)
    assert r.kaldi_lines() == [
        "%WER 12.33 [ 56 / 454, 3 ins, 10 del, 43 sub ]",
        "%SER 50.00 [ 5 / 10 ]",
        "Scored 10 sentences, 0 not present in hyp.",
    ]
    r.num_absent = 2
    assert r.kaldi_lines()[0].endswith(" sub ] [PARTIAL]")
    assert r.kaldi_lines()[2] == "Scored 10 sentences, 2 not present in hyp."


def test_percent_rounds_like_kaldi_float():
    # 100 * 1462 / 1491 = 98.05499... in double but 98.05500 in a 32-bit float: Kaldi prints 98.06
    assert f"{100.0 * 1462 / 1491:.2f}" == "98.05"
    assert f"{kaldi_percent(1462, 1491):.2f}" == "98.06"
    assert kaldi_percent(1, 8) == 12.5


def test_modes_and_partial():
    refs = {"u1": "a b c", "u2": "d e", "u3": "f"}
    hyps = {"u1": "a b c", "u3": "g"}
    present = score(refs, hyps, mode="present")
    assert present.absent == ["u2"] and list(present.utts) == ["u1", "u3"]
    assert present.total.kaldi_lines() == ["%WER 25.00 [ 1 / 4, 0 ins, 0 del, 1 sub ] [PARTIAL]",
                                           "%SER 50.00 [ 1 / 2 ]", "Scored 2 sentences, 1 not present in hyp."]
    full = score(refs, hyps, mode="all")
    assert full.total.kaldi_lines() == ["%WER 50.00 [ 3 / 6, 0 ins, 2 del, 1 sub ] [PARTIAL]",
                                        "%SER 66.67 [ 2 / 3 ]", "Scored 3 sentences, 1 not present in hyp."]
    with pytest.raises(DataError, match="no hypothesis for utterance 'u2'"):
        score(refs, hyps, mode="strict")


def test_cer_tokens():
    assert tokenize("ab  c", "char") == ["a", "b", "c"]
    assert tokenize("नमस्ते जी", "char") == list("नमस्तेजी")
    s = score({"u": "ab cd"}, {"u": "abc d"}, unit="char")
    assert s.total.errors == 0 and s.total.num_words == 4


def test_per_language_by_hand():
    refs = {"hi_1": "a b c d", "hi_2": "e f", "ml_1": "g h i j k l", "ml_2": "m n"}
    hyps = {"hi_1": "a x c d", "hi_2": "e f", "ml_1": "g h i", "ml_2": "m n o"}
    u2l = {"hi_1": "hi", "hi_2": "hi", "ml_1": "ml", "ml_2": "ml"}
    s = score(refs, hyps, utt2lang=u2l)
    hi, ml = s.per_language["hi"], s.per_language["ml"]
    assert (hi.errors, hi.num_words) == (1, 6) and (ml.errors, ml.num_words) == (4, 8)
    avg = s.language_averages()
    assert avg["weighted"] == pytest.approx(100 * 5 / 14) == s.total.wer
    assert avg["unweighted"] == pytest.approx((100 / 6 + 50) / 2)


def test_werr():
    assert werr(20.0, 15.0) == pytest.approx(25.0)
    assert werr(20.0, 25.0) == pytest.approx(-25.0)
    assert werr(0.0, 1.0) is None and werr(None, 1.0) is None


def test_edit_counts_add():
    assert EditCounts(3, 1, 0, 1) + EditCounts(2, 0, 1, 0) == EditCounts(5, 1, 1, 1)


# ----------------------------------------------------------------------------- CLI
@pytest.fixture
def files(tmp_path):
    (tmp_path / "ref").write_text("hi_1 a b c d\nhi_2 x y\nml_1 p q r\nml_2\nml_3 s t\n", "utf-8")
    (tmp_path / "hyp").write_text("hi_1 a b x d e\nhi_2\nml_1 p q r\nml_2 z\n", "utf-8")
    (tmp_path / "utt2lang").write_text("hi_1 hi\nhi_2 hi\nml_1 ml\nml_2 ml\nml_3 ml\n", "utf-8")
    return tmp_path


def test_cli_output_json_and_trn(files, capsys):
    out = files / "exp" / "wer.json"
    rc = main([str(files / "ref"), str(files / "hyp"), "--json", str(out), "--utt2lang", str(files / "utt2lang")])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["%WER 55.56 [ 5 / 9, 2 ins, 2 del, 1 sub ] [PARTIAL]", "%SER 75.00 [ 3 / 4 ]",
                         "Scored 4 sentences, 1 not present in hyp."]
    assert sum("WER " in line for line in lines) == 1  # best_wer.sh sees only the overall line
    assert any(line.split()[:2] == ["hi", "66.67"] for line in lines)
    assert any(line.split()[:2] == ["ml", "33.33"] for line in lines)
    res = json.loads(out.read_text("utf-8"))
    assert res["errors"] == 5 and res["num_words"] == 9 and res["absent"] == ["ml_3"]
    assert res["per_language"]["hi"]["wer"] == pytest.approx(400 / 6)
    assert res["avg_wer_weighted"] == pytest.approx(500 / 9)
    assert res["avg_wer_unweighted"] == pytest.approx((400 / 6 + 100 / 3) / 2)
    assert (files / "exp" / "ref.trn").read_text("utf-8") == "a b c d (hi_1)\nx y (hi_2)\np q r (ml_1)\n(ml_2)\n"
    assert (files / "exp" / "hyp.trn").read_text("utf-8") == "a b x d e (hi_1)\n(hi_2)\np q r (ml_1)\nz (ml_2)\n"
    per_utt = (files / "exp" / "per_utt").read_text("utf-8").splitlines()
    assert per_utt[:4] == ["hi_1 ref a b c d ***", "hi_1 hyp a b x d e", "hi_1 op C C S C I", "hi_1 #csid 3 1 1 0"]

    # WERR against that run: all mode adds 2 deletions -> 7/11
    rc = main([str(files / "ref"), str(files / "hyp"), "--mode", "all", "--baseline-json", str(out),
               "--json", str(files / "b" / "wer.json"), "--utt2lang", str(files / "utt2lang")])
    assert rc == 0
    res2 = json.loads((files / "b" / "wer.json").read_text("utf-8"))
    assert res2["werr"] == pytest.approx(100 * (5 / 9 - 7 / 11) / (5 / 9))
    assert res2["werr_per_language"]["hi"] == pytest.approx(0.0)
    assert "werr: -14.55 %" in capsys.readouterr().out


def test_cli_cer(files, capsys):
    assert main([str(files / "ref"), str(files / "hyp"), "--cer", "--trn-dir", str(files / "t")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 55.56 [ 5 / 9, 2 ins, 2 del, 1 sub ] [PARTIAL]"
    assert (files / "t" / "ref.char.trn").is_file() and not (files / "t" / "ref.trn").exists()


def test_cli_errors(files, capsys):
    ref, hyp = str(files / "ref"), files / "hyp"
    hyp.write_text("hi_1 a\nzz_9 b\n", "utf-8")   # compute-wer ignores an id not in the reference, and so do we
    assert main([ref, str(hyp)]) == 0
    err = capsys.readouterr().err
    assert "1 hypothesis utterance(s)" in err and "are ignored: zz_9" in err
    hyp.write_text("", "utf-8")
    assert main([ref, str(hyp)]) == 1
    assert f"{hyp}: empty hypothesis file" in capsys.readouterr().err
    hyp.write_text("hi_1 a b c d\n", "utf-8")
    assert main([ref, str(hyp), "--mode", "strict"]) == 1
    assert "no hypothesis for utterance 'hi_2'" in capsys.readouterr().err
    (files / "u2l").write_text("hi_1 hi\n", "utf-8")
    assert main([ref, str(hyp), "--utt2lang", str(files / "u2l")]) == 1
    assert f"{ref}:2: utterance 'hi_2' has no language" in capsys.readouterr().err
    (files / "b.json").write_text(json.dumps({"wer": 10.0, "unit": "char"}), "utf-8")
    assert main([ref, str(hyp), "--baseline-json", str(files / "b.json")]) == 1
    assert "baseline scored chars" in capsys.readouterr().err


def test_cli_hyp_line_with_only_id_is_empty_hypothesis(files, capsys):
    (files / "hyp").write_text("hi_1\n", "utf-8")
    assert main([str(files / "ref"), str(files / "hyp")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 100.00 [ 4 / 4, 0 ins, 4 del, 0 sub ] [PARTIAL]"



def test_tokens_split_on_ascii_whitespace_only():
    from speechkit.scoring.wer import tokenize

    assert tokenize("a\u00a0b  c\td\u3000e") == ["a\u00a0b", "c", "d\u3000e"]
    assert tokenize("a b\u00a0", "char") == ["a", "b", "\u00a0"]


def test_cli_nfc_normalises_both_sides(tmp_path, capsys):
    # U+0958 (precomposed QA) decomposes under NFC to KA + NUKTA; the hypothesis is written NFC
    (tmp_path / "ref").write_text("u1 \u0958\u0932\u092e\n", "utf-8")
    (tmp_path / "hyp").write_text("u1 " + unicodedata.normalize("NFC", "\u0958\u0932\u092e") + "\n", "utf-8")
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 0.00 [ 0 / 1, 0 ins, 0 del, 0 sub ]"
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp"), "--no-nfc"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 100.00 [ 1 / 1, 0 ins, 0 del, 1 sub ]"


def test_cli_reference_with_a_byte_order_mark(tmp_path, capsys):
    """A reference saved with a UTF-8 BOM (Windows editors): its first id is 'u1', not '\\ufeffu1'."""
    (tmp_path / "ref").write_bytes("\ufeffu1 a b\nu2 c d\n".encode("utf-8"))
    (tmp_path / "hyp").write_text("u1 a b\nu2 c x\n", "utf-8")
    assert main([str(tmp_path / "ref"), str(tmp_path / "hyp")]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[:3] == ["%WER 25.00 [ 1 / 4, 0 ins, 0 del, 1 sub ]", "%SER 50.00 [ 1 / 2 ]",
                                        "Scored 2 sentences, 0 not present in hyp."]
    assert "byte-order mark" in cap.err and "not in the reference" not in cap.err


def test_cli_werr_only_between_runs_on_one_reference_set(tmp_path, capsys):
    """Issue 23: a WERR was printed for a partial run (2 of 4 utterances) against a full baseline, and
    between different reference sets, with no warning."""
    ref = tmp_path / "ref"
    ref.write_text("u1 a b c\nu2 d e f\nu3 g h i\nu4 j k l\n", "utf-8")
    (tmp_path / "base").write_text("u1 a b x\nu2 d e f\nu3 g x i\nu4 j k l\n", "utf-8")
    base = tmp_path / "base.json"
    assert main([str(ref), str(tmp_path / "base"), "--json", str(base)]) == 0
    saved = json.loads(base.read_text("utf-8"))
    assert saved["ref_utterances"] == 4 and saved["ref_fingerprint"].startswith("sha256:")
    capsys.readouterr()

    def werr_line(hyp_text: str, baseline=base, ref_file=ref, rc=0, out=None):
        (tmp_path / "hyp").write_text(hyp_text, "utf-8")
        argv = [str(ref_file), str(tmp_path / "hyp"), "--baseline-json", str(baseline)]
        assert main(argv + (["--json", str(out)] if out else [])) == rc
        cap = capsys.readouterr()
        return next((line for line in cap.out.splitlines() if line.startswith("werr:")), None), cap.err

    # complete against complete on the same references: a bare WERR
    line, _ = werr_line("u1 a b c\nu2 d e f\nu3 g x i\nu4 j k l\n", out=tmp_path / "full.json")
    assert line == f"werr: 50.00 % relative to {base} (wer% 16.67 -> 8.33)"
    assert json.loads((tmp_path / "full.json").read_text("utf-8"))["werr_flags"] == []
    # 2 of 4 hypotheses: never a bare WERR
    line, _ = werr_line("u1 a b c\nu2 d e f\n", out=tmp_path / "part.json")
    assert line.endswith("(wer% 16.67 -> 0.00) [PARTIAL 2/4]")
    assert json.loads((tmp_path / "part.json").read_text("utf-8"))["werr_flags"] == ["PARTIAL 2/4"]
    # ... nor against a partial baseline
    line, _ = werr_line("u1 a b c\nu2 d e f\nu3 g x i\nu4 j k l\n", baseline=tmp_path / "part.json")
    assert line.endswith("[baseline PARTIAL 2/4]")
    # other reference sets (other ids; same ids, other text) are refused, nothing written or printed
    for name, text in (("ref5", "u1 a b c\nu2 d e f\nu3 g h i\nu4 j k l\nu5 m\n"),
                       ("ref_other", "u1 a b c\nu2 d e f\nu3 g h i\nu4 j k m\n")):
        (tmp_path / name).write_text(text, "utf-8")
        line, err = werr_line("u1 a b c\n", ref_file=tmp_path / name, rc=1, out=tmp_path / f"{name}.json")
        assert line is None and f"{base}: scored on another reference set than {tmp_path / name}" in err
        assert not (tmp_path / f"{name}.json").exists()
    # spacing is not the reference text
    (tmp_path / "ref_spaced").write_text("u1 a  b c\nu2 d e f\nu3 g h i\nu4 j k l\n", "utf-8")
    line, _ = werr_line("u1 a b c\nu2 d e f\nu3 g x i\nu4 j k l\n", ref_file=tmp_path / "ref_spaced")
    assert line.endswith("(wer% 16.67 -> 8.33)")
    # a JSON of an older version (no fingerprint): said on the result line
    old = {k: v for k, v in saved.items() if k not in ("ref_fingerprint", "ref_utterances")}
    (tmp_path / "old.json").write_text(json.dumps(old), "utf-8")
    line, _ = werr_line("u1 a b c\nu2 d e f\nu3 g x i\nu4 j k l\n", baseline=tmp_path / "old.json")
    assert "(wer% 16.67 -> 8.33) [UNCHECKED: the baseline JSON records no reference fingerprint" in line


def test_score_files_library_call(tmp_path, caplog):
    """score_files (the library behind speechkit-score-wer): the report lines and the JSON it writes,
    warnings on the logger given, the per-language table with utt2lang."""
    from speechkit.scoring.wer import score_files

    (tmp_path / "ref").write_text("u1 a b c d\nu2 e f\n")
    (tmp_path / "hyp").write_text("u1 a c d e\nu9 x\n")
    (tmp_path / "u2l").write_text("u1 en\nu2 hi\n")
    with caplog.at_level("WARNING", logger="speechkit.scoring.wer"):
        lines, result = score_files(tmp_path / "ref", tmp_path / "hyp", utt2lang=tmp_path / "u2l",
                                    json_path=tmp_path / "s/wer.json")
    assert lines[:3] == ["%WER 50.00 [ 2 / 4, 1 ins, 1 del, 0 sub ] [PARTIAL]", "%SER 100.00 [ 1 / 1 ]",
                         "Scored 1 sentences, 1 not present in hyp."]
    assert lines[3].startswith("per-language (2 languages")
    assert json.loads((tmp_path / "s/wer.json").read_text()) == result
    assert result["absent"] == ["u2"] and result["trn_dir"] == str(tmp_path / "s")
    assert (tmp_path / "s/per_utt").is_file() and (tmp_path / "s/hyp.trn").read_text() == "a c d e (u1)\n"
    assert "are not in the reference" in caplog.text and "u9" in caplog.text
    with pytest.raises(DataError, match="no hypothesis for utterance 'u2'"):
        score_files(tmp_path / "ref", tmp_path / "hyp", mode="strict")


# ----------------------------------------------------------------------------- issue 39: trn input, split warnings
def _trn_case(tmp_path):
    """TIMIT-like transcripts: two utterances start with 'she' (a trn read as Kaldi text: duplicate key)."""
    (tmp_path / "ref").write_text("fcjf0_sa1 she had your dark suit\nmdab0_sa1 she had your dark suit\n"
                                  "fdaw0_si1 in greasy wash water all year\n", "utf-8")
    (tmp_path / "hyp").write_text("fcjf0_sa1 she had your suit\nmdab0_sa1 she had a dark suit too\n"
                                  "fdaw0_si1\n", "utf-8")
    return tmp_path / "ref", tmp_path / "hyp"


def test_cli_reads_the_trn_files_it_writes(tmp_path, capsys):
    """score-wer wrote sclite .trn but read it as Kaldi text ('ref.trn:2: duplicate key 'she'')."""
    ref, hyp = _trn_case(tmp_path)
    for cer, sfx in ((False, ""), (True, ".char")):
        opts = ["--cer"] if cer else []
        assert main([str(ref), str(hyp), "--trn-dir", str(tmp_path / "t"), *opts]) == 0
        first = capsys.readouterr().out.splitlines()
        assert cer or first[0] == "%WER 56.25 [ 9 / 16, 1 ins, 7 del, 1 sub ]"
        ref_trn, hyp_trn = tmp_path / "t" / f"ref{sfx}.trn", tmp_path / "t" / f"hyp{sfx}.trn"
        assert hyp_trn.read_text("utf-8").splitlines()[2] == "(fdaw0_si1)"  # the empty hypothesis
        assert main([str(ref_trn), str(hyp_trn), *opts]) == 0
        cap = capsys.readouterr()
        assert cap.out.splitlines() == first and "as sclite trn" in cap.err
        # by content too: the same files under other names; and Kaldi text against trn
        (tmp_path / "r.txt").write_text(ref_trn.read_text("utf-8"), "utf-8")
        assert main([str(tmp_path / "r.txt"), str(hyp), *opts]) == 0
        assert capsys.readouterr().out.splitlines() == first
        assert main([str(tmp_path / "r.txt"), str(hyp), "--format", "kaldi", *opts]) == 1
        assert f"r.txt:2: duplicate key '{'s' if cer else 'she'}'" in capsys.readouterr().err


def test_read_trn_errors(tmp_path):
    from speechkit.scoring.wer import read_trn, transcript_format

    f = tmp_path / "a.trn"
    f.write_text("a b (u1)\nc d (u1)\n", "utf-8")
    with pytest.raises(DataError, match=r"a.trn:2: duplicate utterance id '\(u1\)' \(first on line 1\)"):
        read_trn(f)
    f.write_text("a b (u1)\nc d\n", "utf-8")
    with pytest.raises(DataError, match=r"a.trn:2: not an sclite trn line"):
        read_trn(f)
    f.write_text("a (laugh) b (u1)\n(u2)\n", "utf-8")
    assert read_trn(f) == {"u1": "a (laugh) b", "u2": ""}
    g = tmp_path / "text"
    g.write_text("u1 a b (noise)\nu2 c (noise)\n", "utf-8")  # parenthesised words, not distinct: Kaldi text
    assert transcript_format(g)[0] == "kaldi"


def test_cli_warns_on_hypotheses_split_otherwise(tmp_path, capsys):
    """A hypothesis file separated by commas scored 100 % with exit 0 and no word of warning."""
    ref, hyp = _trn_case(tmp_path)
    hyp.write_text("fcjf0_sa1 she,had,your,dark,suit\nmdab0_sa1 she,had,your,dark,suit\n"
                   "fdaw0_si1 in,greasy,wash,water,all,year\n", "utf-8")
    assert main([str(ref), str(hyp)]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("%WER 100.00")
    assert (f"{hyp}: 3 of 3 hypotheses hold ',', which no reference holds (e.g. fcjf0_sa1, mdab0_sa1, fdaw0_si1)"
            in cap.err)
    hyp.write_text("fcjf0_sa1 she\u00a0had your dark suit\nmdab0_sa1 she had your dark suit\n", "utf-8")
    assert main([str(ref), str(hyp)]) == 0
    assert "1 of 2 hypotheses hold U+00A0 (no-break space)" in capsys.readouterr().err
    hyp.write_text("fcjf0_sa1 she_had_your_dark_suit\nmdab0_sa1 she_had_your_dark_suit\nfdaw0_si1 in greasy\n",
                   "utf-8")
    assert main([str(ref), str(hyp)]) == 0
    assert "2 of the 3 hypotheses whose reference has 3 words or more are one word" in capsys.readouterr().err
    hyp.write_text("fcjf0_sa1 she had your suit\nmdab0_sa1 she had, a dark suit\n", "utf-8")
    (tmp_path / "ref2").write_text(ref.read_text("utf-8").replace("had ", "had, "), "utf-8")
    assert main([str(tmp_path / "ref2"), str(hyp)]) == 0  # the references hold commas too: no warning
    assert "hypotheses hold" not in capsys.readouterr().err


def test_cli_refuses_a_hyp_with_no_reference_id(tmp_path, capsys):
    """'utt,words' lines: every id unknown; --mode all scored that 100 % with exit 0."""
    ref, hyp = _trn_case(tmp_path)
    hyp.write_text("fcjf0_sa1,she had your dark suit\nmdab0_sa1,she had\n", "utf-8")
    for mode in ("present", "all"):
        assert main([str(ref), str(hyp), "--mode", mode]) == 1
        assert (f"{hyp}: none of its 2 utterance ids is in the reference {ref} (first: 'fcjf0_sa1,she' in HYP, "
                "'fcjf0_sa1' in REF)") in capsys.readouterr().err


def test_transcript_format_by_content_and_name(tmp_path):
    from speechkit.scoring.wer import transcript_format

    f = tmp_path / "hyp.trn"
    f.write_text("u1 one\n", "utf-8")  # a Kaldi text named .trn: read as Kaldi text
    assert transcript_format(f) == ("kaldi", "its name ends in .trn but not every line ends in '(utt-id)'")
    f.write_text("a (u1)\nb (u1)\n", "utf-8")  # .trn with a repeated id: trn (read_trn then names the line)
    assert transcript_format(f)[0] == "trn"
    g = tmp_path / "hyp"
    g.write_text("a (u1)\nb (u1)\n", "utf-8")
    assert transcript_format(g)[0] == "kaldi"
    g.write_text("a b (u1)\n(u2)\n", "utf-8")
    assert transcript_format(g) == ("trn", "every line ends in a distinct '(utt-id)'")


def test_a_kaldi_text_ending_in_distinct_parenthesised_words_is_read_as_kaldi(tmp_path, capsys):
    """A Kaldi text whose every line ends in a distinct '(word)' (non-speech tags) was read as sclite trn: its ids
    became the tags, REF and HYP lines were paired by tag, and a hypothesis hearing the tags in another order
    scored 75 % instead of 25 %, exit 0 (or, against a plain Kaldi HYP, 'none of its ids is in the reference')."""
    from speechkit.scoring.wer import resolve_formats, transcript_format

    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text("u1 a b (laughter)\nu2 c d (noise)\nu3 e (cough)\n", "utf-8")
    hyp.write_text("u1 a b (noise)\nu2 c d (laughter)\nu3 e (cough)\n", "utf-8")
    assert transcript_format(ref)[0] == "either"
    assert main([str(ref), str(hyp)]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[0] == "%WER 25.00 [ 2 / 8, 0 ins, 0 del, 2 sub ]"
    assert "say --format trn if they are sclite trn" in cap.err  # both readings fit: said, Kaldi text taken
    plain = tmp_path / "plain.txt"
    plain.write_text("u1 a b\nu2 c d\nu3 e\n", "utf-8")
    assert main([str(ref), str(plain)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 37.50 [ 3 / 8, 0 ins, 3 del, 0 sub ]"
    # a trn not named .trn whose first words happen to be distinct pairs with a Kaldi HYP by its (utt-id)s
    trn = tmp_path / "r"
    trn.write_text("a b (u1)\nc d (u2)\ne (u3)\n", "utf-8")
    assert resolve_formats(trn, plain) == ("trn", "kaldi")
    assert main([str(trn), str(plain)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "%WER 0.00 [ 0 / 5, 0 ins, 0 del, 0 sub ]"
    assert main([str(ref), str(hyp), "--format", "trn"]) == 0  # asked for: as before
    assert capsys.readouterr().out.splitlines()[0] == "%WER 75.00 [ 6 / 8, 0 ins, 0 del, 6 sub ]"
