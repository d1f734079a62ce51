"""Data-dir integrity (issue 12): no silent loss in fix/subset/split/copy, numbered backups, the
optional per-utterance files filtered along, and the validator making every check Kaldi's makes."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from speechkit.bin import fix_data_dir as fix_cli
from speechkit.bin import validate_data_dir as validate_cli
from speechkit.data.copy_data_dir import copy_data_dir
from speechkit.data.datadir import DataDir
from speechkit.data.split_data import split
from speechkit.data.subset_data_dir import subset_data_dir
from speechkit.data.fix import fix_data_dir
from speechkit.data.validate import validate

UTTS = {f"s{s}_u{i}": f"s{s}" for s in (1, 2, 3) for i in (1, 2)}   # 6 utterances, 3 speakers


def make_dir(path: Path, side_files: bool = True) -> Path:
    d = DataDir(wav_scp={u: f"/corpus/{u}.wav" for u in UTTS}, utt2spk=dict(UTTS),
                text={u: f"words of {u}" for u in UTTS}, utt2dur={u: 1.5 for u in UTTS})
    d.write(path)
    if side_files:
        (path / "phone_alignments").write_text(
            "".join(f"{u} 0.0000 0.5000 a\n{u} 0.5000 1.5000 b\n" for u in sorted(UTTS)))
        (path / "spk2gender").write_text("s1 f\ns2 m\ns3 f\n")
    return path


def _table(path: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in path.read_text().splitlines())


# ---------------------------------------------------------------------------------------- fix
def test_fix_counts_against_the_union_of_ids_and_names_what_it_drops(tmp_path, caplog, capsys):
    ddir = make_dir(tmp_path / "d")
    u2s = _table(ddir / "utt2spk")
    del u2s["s2_u2"]                           # in wav.scp and text, missing from utt2spk
    (ddir / "utt2spk").write_text("".join(f"{k} {v}\n" for k, v in u2s.items()))
    with caplog.at_level(logging.WARNING):
        assert fix_data_dir(ddir) == (5, 6)
    assert any("s2_u2" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert fix_cli.main([str(ddir)]) == 0
    assert "kept 5 utterances out of 5" in capsys.readouterr().out   # a second run: nothing to drop


def test_fix_keeps_numbered_backups_and_never_overwrites_one(tmp_path):
    ddir = make_dir(tmp_path / "d")
    original = (ddir / "text").read_bytes()
    (ddir / "text").write_text((ddir / "text").read_text().replace("s1_u1 words of s1_u1\n", ""))
    fix_data_dir(ddir)
    assert (ddir / ".backup" / "1" / "text").read_bytes() != original  # the first backup: the edited text
    first = (ddir / ".backup" / "1" / "utt2spk").read_bytes()
    (ddir / "text").write_text((ddir / "text").read_text().replace("s3_u2 words of s3_u2\n", ""))
    fix_data_dir(ddir)
    assert (ddir / ".backup" / "1" / "utt2spk").read_bytes() == first  # not overwritten
    assert "s1_u2" in (ddir / ".backup" / "2" / "utt2spk").read_text()
    assert "s1_u1" not in (ddir / ".backup" / "2" / "utt2spk").read_text()
    fix_data_dir(ddir)                          # nothing to fix: no third backup
    assert not (ddir / ".backup" / "3").exists()


def test_fix_filters_phone_alignments_and_spk2gender(tmp_path):
    ddir = make_dir(tmp_path / "d")
    text = _table(ddir / "text")
    for u in ("s1_u1", "s2_u1", "s2_u2"):       # s2 disappears entirely
        del text[u]
    (ddir / "text").write_text("".join(f"{k} {v}\n" for k, v in text.items()))
    assert fix_data_dir(ddir) == (3, 6)
    ali = (ddir / "phone_alignments").read_text().splitlines()
    assert {ln.split()[0] for ln in ali} == {"s1_u2", "s3_u1", "s3_u2"} and len(ali) == 6
    assert (ddir / "spk2gender").read_text() == "s1 f\ns3 f\n"
    assert validate(ddir, no_feats=True) == []


# ---------------------------------------------------------------------------------------- subset/split/copy
def test_subset_split_copy_carry_the_side_files_filtered(tmp_path):
    src = make_dir(tmp_path / "d")
    out = tmp_path / "sub"
    subset_data_dir(src, out, utt_list=_write(tmp_path / "l", "s1_u1\ns3_u2\n"))
    assert [ln.split()[0] for ln in (out / "phone_alignments").read_text().splitlines()] == ["s1_u1"] * 2 + ["s3_u2"] * 2
    assert (out / "spk2gender").read_text() == "s1 f\ns3 f\n"
    assert validate(out, no_feats=True) == []
    parts = split(src, 3)
    for j, part in enumerate(parts, 1):
        pdir = src / "split3" / str(j)
        assert {ln.split()[0] for ln in (pdir / "phone_alignments").read_text().splitlines()} == set(part.utts)
        assert set(_table(pdir / "spk2gender")) == set(part.spk2utt)
    copy_data_dir(src, tmp_path / "copy", utt_prefix="x-", spk_prefix="x-")
    assert (tmp_path / "copy" / "spk2gender").read_text() == "x-s1 f\nx-s2 m\nx-s3 f\n"
    assert (tmp_path / "copy" / "phone_alignments").read_text().startswith("x-s1_u1 0.0000 0.5000 a\n")
    assert validate(tmp_path / "copy", no_feats=True) == []


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_unlisted_utterances_are_reported(tmp_path):
    ddir = make_dir(tmp_path / "d", side_files=False)
    u2s = _table(ddir / "utt2spk")
    del u2s["s1_u2"]
    (ddir / "utt2spk").write_text("".join(f"{k} {v}\n" for k, v in u2s.items()))
    assert DataDir.load(ddir).unlisted() == {"wav.scp": ["s1_u2"], "text": ["s1_u2"], "utt2dur": ["s1_u2"]}


# ---------------------------------------------------------------------------------------- validate
def test_validate_rejects_global_key_in_cmvn_scp(tmp_path):
    ddir = make_dir(tmp_path / "d", side_files=False)
    (ddir / "cmvn.scp").write_text("global /x/cmvn.ark:7\n")
    problems = validate(ddir, no_feats=True)
    assert any("cmvn.scp" in p and "global" in p and "cmvn_global" in p for p in problems), problems
    assert validate_cli.main(["--no-feats", str(ddir)]) == 1


@pytest.mark.parametrize("name, content, expect", [
    ("spk2gender", "s1 f\ns2 x\ns3 m\n", "gender of 's2' must be m or f"),
    ("spk2gender", "s1 f\ns2 m\n", "speaker 's3' has no entry in spk2gender"),
    ("phone_alignments", "s1_u1 0.0 0.5 a\nzz 0.0 0.5 a\n", "'zz' is not in utt2spk"),
    ("utt2uniq", "s1_u1 a\n", "has no entry in utt2uniq"),
])
def test_validate_optional_files(tmp_path, name, content, expect):
    ddir = make_dir(tmp_path / "d", side_files=False)
    (ddir / name).write_text(content)
    problems = validate(ddir, no_feats=True)
    assert any(expect in p for p in problems), problems


@pytest.mark.parametrize("word", ["<s>", "</s>", "#0"])
def test_validate_rejects_kaldi_reserved_words_in_text(tmp_path, word):
    ddir = make_dir(tmp_path / "d", side_files=False)
    text = _table(ddir / "text")
    text["s2_u1"] = f"hello {word} world"
    (ddir / "text").write_text("".join(f"{k} {v}\n" for k, v in text.items()))
    problems = validate(ddir, no_feats=True)
    assert any(f"'{word}'" in p and "text:3" in p for p in problems), problems
    text["s2_u1"] = "a#0b <s>x"                 # not whole words: allowed (Kaldi greps -w)
    (ddir / "text").write_text("".join(f"{k} {v}\n" for k, v in text.items()))
    assert validate(ddir, no_feats=True) == []
