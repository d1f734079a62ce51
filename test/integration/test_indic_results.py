"""egs/indic_multilingual/local/make_results.py on a hand-made experiment tree: WERR against the
monolingual models (Table 2), the one-hot fine-tuning row (Table 3), the tables labelled with the
paper's numbers (LSP in Table 2, LID-free decoding in Tables 4 and 5), Figure 2, Table 6 and both
switch-off sweeps of Table 7 (the paper's rule, eq. 1, and the recipe's own posterior variant)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "egs/indic_multilingual/local/make_results.py"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"indic_{name}", SCRIPT.parent / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # as `python local/make_results.py`: it imports its tables from local/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


@pytest.fixture(scope="module")
def make_results():
    return _load("make_results")


@pytest.fixture(scope="module")
def indic_tables():
    return _load("indic_tables")


def scored(d: Path, wer: float, cer: float, lid: float | None = None, t_avg: float = 2.0) -> None:
    (d / "scoring").mkdir(parents=True)
    for name, v in (("wer", wer), ("cer", cer)):
        j = {"wer": v, "avg_wer_unweighted": v,
             "per_language": {"aa": {"wer": v, "num_words": 10}, "bb": {"wer": v, "num_words": 10}}}
        (d / "scoring" / f"{name}.json").write_text(json.dumps(j))
    if lid is not None:
        (d / "scoring" / "lid.json").write_text(json.dumps({"accuracy": lid}))
    (d / "decode_stats.json").write_text(json.dumps(
        {"search": "beam", "beam": 4, "chunk_frames": 32, "t_avg": t_avg, "rtf": 0.01}))


def data_sets(data: Path, utts: dict[str, tuple[str, int]], sets=("train", "dev", "test")) -> None:
    """Data dirs ``data/<set>`` with utt2lang and utt2num_frames of ``{utt: (language, frames)}``."""
    for s in sets:
        (data / s).mkdir(parents=True)
        (data / s / "utt2lang").write_text("".join(f"{u} {lang}\n" for u, (lang, _) in utts.items()))
        (data / s / "utt2num_frames").write_text("".join(f"{u} {n}\n" for u, (_, n) in utts.items()))


def test_tables(tmp_path, make_results, indic_tables):
    exp, data = tmp_path / "exp", tmp_path / "data"
    data_sets(data, {"u1": ("aa", 100), "u2": ("bb", 200)})
    scored(exp / "mono/decode_test_oracle", 80.0, 50.0)
    scored(exp / "vanilla/decode_test", 100.0, 60.0, lid=70.0)
    scored(exp / "onehot/decode_test_oracle", 90.0, 55.0)
    scored(exp / "ft_onehot/decode_test_oracle", 85.0, 52.0)
    scored(exp / "multisoftmax/decode_test_oracle", 60.0, 40.0)
    scored(exp / "ft/decode_test_oracle", 58.0, 39.0)
    scored(exp / "multisoftmax_lsp/decode_test_oracle", 62.0, 41.0)
    scored(exp / "multisoftmax_lid/decode_test_oracle", 61.0, 40.0)
    scored(exp / "multisoftmax_lid/decode_test_lidfree", 64.0, 42.0, lid=90.0)
    scored(exp / "multisoftmax_lsp_lid/decode_test_oracle", 59.0, 39.5)
    scored(exp / "multisoftmax_lsp_lid/decode_test_lidfree", 63.0, 41.5, lid=91.0)
    scored(exp / "multisoftmax_lid/decode_test_lidfree_tau10_s5", 65.0, 43.0, lid=88.0, t_avg=1.4)
    scored(exp / "multisoftmax_lid/decode_test_lidfree_paper_tau1000ms_p0.5", 66.0, 43.5, lid=87.0, t_avg=1.9)
    scored(exp / "multisoftmax_lid/decode_test_lidfree_paper_tau30ms_p0.2", 67.0, 44.0, lid=85.0, t_avg=1.1)
    out = tmp_path / "RESULTS.md"
    results = tmp_path / "results"
    assert make_results.main(["--collect", "--exp", str(exp), "--data", str(data), "--run", "x",
                              "--results-dir", str(results), "--out", str(out)]) == 0
    text = out.read_text()
    # rendering reads only results/: the same page without exp/ and data/
    import shutil
    shutil.rmtree(exp)
    shutil.rmtree(data)
    out2 = tmp_path / "RESULTS2.md"
    assert make_results.main(["--results-dir", str(results), "--out", str(out2)]) == 0
    assert out2.read_text() == text
    assert "## Run `x`" in text and "No run records" in text

    def section(title: str) -> dict[str, list[str]]:
        body = text[text.index(title):]
        body = body[: body.find("\n#", 1)] if "\n#" in body[1:] else body
        return {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
                for ln in body.splitlines() if ln.startswith("| ")}

    rows = section("#### Table 2")
    # Table 2: WERR / CERR against the monolingual models: 100 (80 - 60) / 80 = 25.0
    assert rows["multi-softmax"][-2:] == ["25.0", "20.0"]
    assert rows["vanilla (union softmax)"][-2:] == ["-25.0", "-20.0"]
    assert "relative reduction against the monolingual" in text
    # Table 3: the one-hot fine-tuned row
    rows = section("#### Table 3")
    assert rows["one-hot fine-tuned per language (union softmax cut to the language)"][2] == "85.00"
    # Figure 2
    rows = section("#### Figure 2")
    assert rows["+ LSP + LID, LID-free"][-1] == "91.00"
    # the paper's numbering: LSP is a row of Table 2, LID-free decoding Tables 4 (WER) and 5 (LID)
    rows = section("#### Table 2, LSP row")
    assert rows["multi-softmax + LSP (prediction network per language)"][2] == "62.00"
    rows = section("#### Tables 4 and 5: LID-free decoding")
    assert rows["multi-softmax + LID, LID-free"][-1] == "90.00"
    assert "#### Table 4: language-specific" not in text and "#### Table 5:" not in text
    # the paired comparisons carry the paper's table numbers, one-hot vs vanilla among them
    tables = {what: table for _, _, what, table in indic_tables.PAIRS}
    assert tables["+ LSP vs multi-softmax"] == "2" and tables["+ LID: LID-free vs oracle language"] == "4"
    assert tables["one-hot vs vanilla"] == "2" and tables["+ LID, LID-free vs vanilla"] == "4"
    # Table 7: the paper's rule first, then the recipe's own variant, each starting with the plain
    # LID-free row; the variant's rows tau descending
    t7 = text[text.index("#### Table 7"):]
    gap, posterior = t7.split("The recipe's own variant (not in the paper)")
    assert "The paper's rule (section 6.3, eq. 1)" in gap and "Analysis: sweep on test, not used to choose" in gap
    assert "Operating point chosen on dev: not recorded" in gap   # no switch_off.json in this run
    assert "| 10 | 5 | 1.400 | 65.00 |" in gap and "| inf | inf | 2.000 | 64.00 |" in gap
    assert posterior.index("| inf | inf |") < posterior.index("| 1000 ms | 0.5 | 1.900 | 66.00") \
        < posterior.index("| 30 ms | 0.2 | 1.100 | 67.00")
    assert "1000 ms" not in gap
    # Table 6: the paper's counts beside the preset's (Table 1's inventories)
    rows = section("### Table 6")
    assert rows["multi-softmax + LSP"][:2] == ["118.94", "118.92"]
    assert rows["multi-softmax + LID"][3] == "1.58"


def test_collect_keeps_hand_written_notes(tmp_path, make_results):
    """--collect replaces results/<run>/ as a whole, but a hand-written NOTES.md survives it."""
    exp, data = tmp_path / "exp", tmp_path / "data"
    data_sets(data, {"u1": ("aa", 100)})
    scored(exp / "multisoftmax/decode_test_oracle", 60.0, 40.0)
    results = tmp_path / "results"
    args = ["--collect", "--exp", str(exp), "--data", str(data), "--run", "x",
            "--results-dir", str(results), "--out", str(tmp_path / "RESULTS.md")]
    assert make_results.main(args) == 0
    (results / "x" / "NOTES.md").write_text("# by hand\n")
    (results / "x" / "stale.json").write_text("{}")
    assert make_results.main(args) == 0
    assert (results / "x" / "NOTES.md").read_text() == "# by hand\n"
    # and the page links it, relative to the page
    assert "[`results/x/NOTES.md`](results/x/NOTES.md)" in (tmp_path / "RESULTS.md").read_text()
    assert not (results / "x" / "stale.json").exists()  # everything else is replaced
    assert (results / "x" / "multisoftmax").is_dir()


def test_data_hours_and_per_system_blank_penalties(tmp_path, make_results):
    """Hours from utt2num_frames, else utt2dur, else '-' (never 0); train_sp listed when present;
    systems decoded with different blank penalties are not summarised by one of them."""
    exp, data = tmp_path / "exp", tmp_path / "data"
    tables = {"train": {"utt2dur": "u1 1800.0\nu2 3600.0\n"},          # no features of train itself
              "train_sp": {"utt2num_frames": "u1 180000\nu2 360000\nu3 540000\n"},
              "dev": {},                                              # neither: hours unknown
              "test": {"utt2num_frames": "u1 360000\nu2 360000\n"}}
    for s, files in tables.items():
        (data / s).mkdir(parents=True)
        n = 3 if s == "train_sp" else 2
        (data / s / "utt2lang").write_text("".join(f"u{i} {'aa' if i == 1 else 'bb'}\n" for i in range(1, n + 1)))
        for name, body in files.items():
            (data / s / name).write_text(body)
    scored(exp / "mono/decode_test_oracle", 80.0, 50.0)
    scored(exp / "multisoftmax/decode_test_oracle", 60.0, 40.0)
    for sysname, bp in (("mono", 1.5), ("multisoftmax", 2.0)):
        f = exp / sysname / "decode_test_oracle" / "decode_stats.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "blank_penalty": bp}))
    out = tmp_path / "RESULTS.md"
    assert make_results.main(["--collect", "--exp", str(exp), "--data", str(data), "--run", "x",
                              "--results-dir", str(tmp_path / "results"), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| train | 0.500 h / 1 | 1.000 h / 1 | 1.500 h / 2 |" in text
    assert "| train_sp | 0.500 h / 1 | 2.500 h / 2 | 3.000 h / 3 |" in text
    assert "| dev | - / 1 | - / 1 | - / 2 |" in text
    assert "| test | 1.000 h / 1 | 1.000 h / 1 | 2.000 h / 2 |" in text
    assert "blank penalty per system (1.5 to 2 nats" in text and "blank penalty 1.5." not in text


def test_paired_comparisons(tmp_path, make_results):
    """utt_counts.json from the decodes' per_utt files (each decode to its own test set, the longest
    matching name), and the paired-bootstrap table rendered from it alone."""
    exp, data = tmp_path / "exp", tmp_path / "data"
    sets = ("train", "dev", "test", "test_unseen_voice")
    for s in sets:
        (data / s).mkdir(parents=True)
        (data / s / "utt2lang").write_text("".join(f"u{i} aa\n" for i in range(40)))
    for t in ("test", "test_unseen_voice"):
        for sysname, errs in (("mono", 3), ("multisoftmax", 1)):   # B: 1 error in 10 words, A: 3
            d = exp / sysname / f"decode_{t}_oracle"
            scored(d, 10.0 * errs, 5.0 * errs)
            (d / "scoring" / "per_utt").write_text(
                "".join(f"u{i} #csid {10 - errs} {errs} 0 0\n" for i in range(40)))
            (d / "scoring" / "per_utt.char").write_text(
                "".join(f"u{i} #csid {40 - errs} {errs} 0 0\n" for i in range(40)))
    results = tmp_path / "results"
    out = tmp_path / "RESULTS.md"
    assert make_results.main(["--collect", "--exp", str(exp), "--data", str(data), "--run", "x",
                              "--test-sets", "test test_unseen_voice",
                              "--results-dir", str(results), "--out", str(out)]) == 0
    counts = json.loads((results / "x" / "utt_counts.json").read_text())
    assert sorted(counts) == ["test", "test_unseen_voice"]
    assert sorted(counts["test"]["decodes"]) == ["mono/decode_test_oracle", "multisoftmax/decode_test_oracle"]
    assert counts["test"]["words"] == [10] * 40 and counts["test"]["chars"] == [40] * 40
    text = out.read_text()
    # every utterance 30 % -> 10 % WER: the difference is -20 points on every resample
    row = "| multi-softmax vs monolingual | 2 | 30.00 -> 10.00 | -20.00 [-20.00, -20.00] | 7.50 -> 2.50 | " \
          "-5.00 [-5.00, -5.00] | 1.000 | B better |"
    assert text.count(row) == 2   # one per test set


def test_decode_of_other_references_is_left_out(tmp_path, make_results, capsys):
    exp = tmp_path / "exp"
    for sysname, ref_words in (("mono", 10), ("multisoftmax", 11)):
        d = exp / sysname / "decode_test_oracle" / "scoring"
        d.mkdir(parents=True)
        (d / "per_utt").write_text(f"u1 #csid {ref_words} 0 0 0\n")
        (d / "per_utt.char").write_text("u1 #csid 30 0 0 0\n")
    counts = make_results.utterance_counts(exp, ["test"])
    assert list(counts["test"]["decodes"]) == ["mono/decode_test_oracle"]
    assert "multisoftmax/decode_test_oracle: reference lengths differ" in capsys.readouterr().err
