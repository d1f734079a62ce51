"""speechkit.data.datadir: validate / fix / subset / split / combine / copy, and their CLIs."""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.bin import combine_data_dirs as combine_cli
from speechkit.bin import fix_data_dir as fix_cli
from speechkit.bin import split_data_dir as split_cli
from speechkit.bin import subset_data_dir as subset_cli
from speechkit.bin import validate_data_dir as validate_cli
from speechkit.data.datadir import (
    DataDir,
    Segment,
    _split_groups,
    c_sorted,
    combine,
    combine_data_dirs,
    copy_data_dir,
    fmt_seconds,
    split,
    subset,
    subset_data_dir,
)
from speechkit.data.fix import fix_data_dir
from speechkit.data.validate import (
    MAX_PROBLEMS_PER_FILE,
    validate,
)
from speechkit.utils.fileio import DataError

# speaker -> number of utterances
SPEAKERS = {"spkA": 3, "spkB": 1, "spkC": 4, "spkD": 2}


def make_dir(path: Path, speakers=SPEAKERS, segments=False, feats=False, prefix="") -> DataDir:
    """A small valid data dir (wav paths need not exist: nothing here reads audio)."""
    d = DataDir(wav_scp={}, text={}, utt2dur={})
    if segments:
        d.segments = {}
    for spk, n in speakers.items():
        spk = prefix + spk
        for i in range(n):
            utt = f"{spk}_u{i:02d}"
            d.utt2spk[utt] = spk
            d.text[utt] = f"words of {utt}"
            d.utt2dur[utt] = 1.0 + i
            if segments:
                rec = f"{spk}_rec"
                d.wav_scp[rec] = f"/corpus/{rec}.wav"
                d.segments[utt] = Segment(rec, 2.0 * i, 2.0 * i + 1.0)
            else:
                d.wav_scp[utt] = f"/corpus/{utt}.wav"
    if feats:  # a real ark (validate checks that feats.scp points into arks that exist)
        import kaldiio

        ark = path.parent / f"{path.name}_raw.ark"
        ark.parent.mkdir(parents=True, exist_ok=True)
        with kaldiio.WriteHelper(f"ark,scp:{ark},{ark.with_suffix('.scp')}") as w:
            for k, u in enumerate(d.utts):
                w(u, np.zeros((100 + k, 2), np.float32))
        d.feats_scp = dict(ln.split(" ", 1) for ln in ark.with_suffix(".scp").read_text().splitlines())
        d.utt2num_frames = {u: 100 + k for k, u in enumerate(d.utts)}
    d.write(path)
    return d


@pytest.fixture
def ddir(tmp_path) -> Path:
    make_dir(tmp_path / "train")
    return tmp_path / "train"


def lines_of(problems, fname):
    """The problems reported at a line of ``fname``."""
    return [p for p in problems if re.search(rf"/{re.escape(fname)}:\d+: ", p)]


# ---------------------------------------------------------------- validate
def test_valid_dir_passes(tmp_path, ddir):
    assert validate(ddir, no_feats=True) == []
    assert validate(DataDir.load(ddir), no_feats=True) == []
    make_dir(tmp_path / "seg", segments=True, feats=True)
    assert validate(tmp_path / "seg") == []


def test_missing_feats_needs_no_feats(ddir):
    assert validate(ddir) == [f"{ddir}/feats.scp: missing (use --no-feats before features are computed)"]


def test_unsorted_duplicate_and_format_problems(ddir):
    text = ddir / "text"
    lines = text.read_text().splitlines()
    # swap lines 1 and 2, duplicate line 3 at the end, add an empty line, drop the final newline
    bad = [lines[1], lines[0], *lines[2:], "", lines[2]]
    text.write_text("\n".join(bad))
    n = len(bad)
    problems = validate(ddir, no_feats=True)
    assert f"{text}:2: not sorted in C-locale order: 'spkA_u00' after 'spkA_u01' (sort with LC_ALL=C, or run fix_data_dir.sh)" in problems
    assert f"{text}:{n - 1}: empty line" in problems
    assert f"{text}:{n}: duplicate id 'spkA_u02' (first on line 3)" in problems
    assert f"{text}:{n}: no newline at end of file" in problems


def test_mismatched_ids(ddir):
    with open(ddir / "text", "a") as f:
        f.write("spkZ_u00 stray\n")
    lines = (ddir / "utt2dur").read_text().splitlines()
    (ddir / "utt2dur").write_text("\n".join(lines[:-1]) + "\n")
    problems = validate(ddir, no_feats=True)
    n_text = len((ddir / "text").read_text().splitlines())
    assert f"{ddir}/text:{n_text}: utterance 'spkZ_u00' is not in utt2spk" in problems
    last = c_sorted(DataDir.load(ddir).utt2spk)[-1]
    assert f"{ddir}/utt2spk:{len(lines)}: utterance '{last}' has no entry in utt2dur" in problems


def test_speaker_prefix_and_spk2utt(tmp_path):
    d = DataDir(wav_scp={"a1": "x", "b1": "y"}, utt2spk={"a1": "zed", "b1": "bob"}, text={"a1": "a", "b1": "b"})
    d.write(tmp_path)
    problems = validate(tmp_path, no_feats=True)
    assert any("utt2spk:1: speaker id 'zed' is not a prefix of utterance id 'a1'" in p for p in problems)
    assert any("not in the same order when sorted by speaker" in p for p in problems)
    assert validate(tmp_path, no_feats=True, no_spk_sort=True) == []
    (tmp_path / "spk2utt").write_text("bob b1\n")
    assert f"{tmp_path}/utt2spk:1: speaker 'zed' has no entry in spk2utt" in validate(tmp_path, no_feats=True, no_spk_sort=True)
    (tmp_path / "spk2utt").write_text("bob a1 b1\nzed a1\n")
    assert f"{tmp_path}/spk2utt:1: utterances of speaker 'bob' disagree with utt2spk (extra a1)" in \
        validate(tmp_path, no_feats=True, no_spk_sort=True)
    (tmp_path / "spk2utt").unlink()
    assert any("spk2utt: missing" in p for p in validate(tmp_path, no_feats=True, no_spk_sort=True))


def test_segments_checks(tmp_path):
    make_dir(tmp_path, segments=True)
    seg = tmp_path / "segments"
    lines = seg.read_text().splitlines()
    lines[0] = lines[0].rsplit(" ", 1)[0]                      # 3 fields
    k, rec, s, e = lines[1].split()
    lines[1] = f"{k} {rec} {e} {s}"                              # end before start
    k, rec, s, e = lines[2].split()
    lines[2] = f"{k} nosuchrec -1 {e}"                          # negative start, unknown recording
    seg.write_text("\n".join(lines) + "\n")
    problems = validate(tmp_path, no_feats=True)
    assert f"{seg}:1: 'spkA_u00': needs 4 fields (<utt> <recording> <start> <end>), got 3" in problems
    assert f"{seg}:2: 'spkA_u01': end 2.000 is not after start 3.000" in problems
    assert f"{seg}:3: 'spkA_u02': start -1 is negative" in problems
    assert f"{seg}:3: 'spkA_u02': recording 'nosuchrec' is not in wav.scp" in problems
    # spkA_rec is now used by no valid segment? it is still used by lines 1-2
    assert not any("spkA_rec' is not used" in p for p in problems)
    with open(tmp_path / "wav.scp", "a") as f:
        f.write("zz_unused /corpus/zz.wav\n")
    assert any("wav.scp:" in p and "recording 'zz_unused' is not used by any segment" in p
               for p in validate(tmp_path, no_feats=True))


def test_wav_missing_and_no_wav(ddir):
    (ddir / "wav.scp").unlink()
    assert validate(ddir, no_feats=True) == [f"{ddir}/wav.scp: missing (use --no-wav if the data has no audio)"]
    assert validate(ddir, no_feats=True, no_wav=True) == []


def test_text_missing_and_no_text(ddir):
    (ddir / "text").unlink()
    assert validate(ddir, no_feats=True) == [f"{ddir}/text: missing (use --no-text if the data has no transcripts)"]
    assert validate(ddir, no_feats=True, no_text=True) == []


def test_feats_and_num_frames(tmp_path):
    make_dir(tmp_path, feats=True)
    nf = tmp_path / "utt2num_frames"
    lines = nf.read_text().splitlines()
    lines[0] = lines[0].split()[0] + " 0"
    lines[1] = lines[1].split()[0] + " 12.5"
    nf.write_text("\n".join(lines[:-1]) + "\n")
    problems = validate(tmp_path)
    assert f"{nf}:1: frame count of 'spkA_u00' must be a positive integer, got '0'" in problems
    assert f"{nf}:2: frame count of 'spkA_u01' must be a positive integer, got '12.5'" in problems
    assert any(p.startswith(f"{tmp_path}/feats.scp:") and "has no entry in utt2num_frames" in p for p in problems)
    assert validate(tmp_path, no_feats=True) == []


def test_utt2dur_and_cmvn(ddir):
    d = DataDir.load(ddir)
    d.cmvn_scp = {"spkA": "c.ark:1", "spkB": "c.ark:2", "spkC": "c.ark:3"}
    d.write()
    assert validate(ddir, no_feats=True) == [f"{ddir}/utt2spk:9: speaker 'spkD' has no entry in cmvn.scp"]
    d.cmvn_scp = {"global": "c.ark:1"}   # Kaldi: "speaker lists extracted from spk2utt and cmvn differ"
    d.write()
    assert validate(ddir, no_feats=True) == [
        f"{ddir}/cmvn.scp:1: key 'global' is not a speaker: Kaldi requires the keys of cmvn.scp to be exactly "
        "the speakers; global stats go in cmvn_global.ark (re-run speechkit-compute-cmvn-stats, or "
        "speechkit-fix-data-dir to move them)"]
    d.cmvn_scp = None
    d.write()
    assert validate(ddir, no_feats=True) == []
    (ddir / "utt2dur").write_text((ddir / "utt2dur").read_text().replace("spkA_u00 1.000", "spkA_u00 -1"))
    assert validate(ddir, no_feats=True) == [
        f"{ddir}/utt2dur:1: duration of 'spkA_u00' must be a positive number of seconds, got '-1'"]


def test_non_utf8_text_reported_with_line_and_others_continue(ddir):
    raw = (ddir / "text").read_bytes().split(b"\n")
    raw[4] = raw[4].split(b" ")[0] + b" caf\xe9 latin-1"
    (ddir / "text").write_bytes(b"\n".join(raw))
    (ddir / "utt2spk").write_bytes((ddir / "utt2spk").read_bytes() + b"\r\n")
    problems = validate(ddir, no_feats=True)
    assert any(p.startswith(f"{ddir}/text:5: not valid UTF-8") for p in problems)
    # a bad text file does not stop the report on other files
    assert any(p.startswith(f"{ddir}/utt2spk:") for p in problems)
    with pytest.raises(DataError, match=r"text:5: not valid UTF-8"):
        DataDir.load(ddir)


def test_report_is_capped_per_file(tmp_path):
    many = {f"s{i:03d}": 1 for i in range(60)}
    make_dir(tmp_path, speakers=many)
    (tmp_path / "text").write_text("")
    problems = validate(tmp_path, no_feats=True)
    assert len(lines_of(problems, "utt2spk")) == MAX_PROBLEMS_PER_FILE
    assert f"{tmp_path}/utt2spk: ... and {60 - MAX_PROBLEMS_PER_FILE} more problems in this file" in problems
    assert f"{tmp_path}/text: file is empty" in problems


def test_validate_cli(ddir, capsys):
    assert validate_cli.main([str(ddir), "--no-feats"]) == 0
    assert capsys.readouterr().out.strip() == f"Successfully validated data-directory {ddir}"
    (ddir / "utt2spk").write_text((ddir / "utt2spk").read_text()[::-1])
    assert validate_cli.main([str(ddir), "--no-feats"]) == 1
    err = capsys.readouterr().err
    assert f"{ddir}/utt2spk:1:" in err and "problem(s) in" in err
    assert validate_cli.main([str(ddir / "nope")]) == 1


# ---------------------------------------------------------------- fix
def test_fix_data_dir(ddir):
    orig = {f.name: f.read_bytes() for f in ddir.iterdir()}
    text = (ddir / "text").read_text().splitlines()
    # unsorted, a duplicate, an empty line, one utterance missing from text, a stray one
    (ddir / "text").write_text("\n".join([text[2], text[0], text[0].split()[0] + " dup", "", *text[3:],
                                          "zz_u00 stray"]))
    (ddir / "spk2utt").write_text("garbage\n")
    kept, total = fix_data_dir(ddir)
    assert (kept, total) == (9, 11)   # 10 utterances and the stray zz_u00 of text
    assert validate(ddir, no_feats=True) == []
    d = DataDir.load(ddir)
    assert "spkA_u01" not in d.utt2spk and "spkA_u01" not in d.wav_scp and "zz_u00" not in d.text
    assert d.text["spkA_u00"] == "words of spkA_u00"   # first of the duplicates kept
    assert (ddir / ".backup" / "1" / "spk2utt").read_text() == "garbage\n"
    assert (ddir / ".backup" / "1" / "utt2spk").read_bytes() == orig["utt2spk"]
    # a second run changes nothing, and keeps the first backup
    snapshot = {f.name: f.read_bytes() for f in ddir.iterdir() if f.is_file()}
    assert fix_data_dir(ddir) == (9, 9)
    assert {f.name: f.read_bytes() for f in ddir.iterdir() if f.is_file()} == snapshot
    assert (ddir / ".backup" / "1" / "spk2utt").read_text() == "garbage\n"
    assert not (ddir / ".backup" / "2").exists()


def test_fix_segments_prunes_recordings_and_bad_lines(tmp_path):
    make_dir(tmp_path, segments=True)
    seg = (tmp_path / "segments").read_text().replace("spkB_u00 spkB_rec 0.000 1.000", "spkB_u00 spkB_rec 1 0")
    (tmp_path / "segments").write_text(seg)
    wav = (tmp_path / "wav.scp").read_text().replace("spkD_rec /corpus/spkD_rec.wav\n", "")
    (tmp_path / "wav.scp").write_text(wav + "unused_rec /x.wav\n")
    assert fix_data_dir(tmp_path) == (10 - 1 - 2, 10)
    d = DataDir.load(tmp_path)
    assert set(d.wav_scp) == {"spkA_rec", "spkC_rec"}
    assert validate(tmp_path, no_feats=True) == []


def test_fix_nothing_left_modifies_nothing(ddir):
    (ddir / "text").write_text("other_u1 x\n")
    before = {f.name: f.read_bytes() for f in ddir.iterdir()}
    with pytest.raises(DataError, match="no utterance is in every file"):
        fix_data_dir(ddir)
    assert {f.name: f.read_bytes() for f in ddir.iterdir()} == before
    assert fix_cli.main([str(ddir)]) == 1


def test_fix_rebuilds_utt2spk_from_spk2utt(ddir):
    (ddir / "utt2spk").unlink()
    assert fix_data_dir(ddir) == (10, 10)
    assert validate(ddir, no_feats=True) == []


def test_fix_non_utf8_is_an_error(ddir):
    (ddir / "text").write_bytes(b"spkA_u00 \xff\n")
    with pytest.raises(DataError, match=r"text:1: not valid UTF-8.*nothing was modified"):
        fix_data_dir(ddir)
    assert not (ddir / ".backup").exists()


def test_fix_cli_prints_counts(ddir, capsys):
    assert fix_cli.main([str(ddir)]) == 0
    assert "kept 10 utterances out of 10" in capsys.readouterr().out


# ---------------------------------------------------------------- subset
def test_subset_prunes_recordings_and_cmvn(tmp_path):
    d = make_dir(tmp_path / "a", segments=True)
    d.cmvn_scp = {s: f"c.ark:{i}" for i, s in enumerate(d.spk2utt)}
    s = subset(d, ["spkC_u01", "spkC_u03", "spkA_u00", "unknown"])
    assert s.utts == ["spkA_u00", "spkC_u01", "spkC_u03"]
    assert set(s.wav_scp) == {"spkA_rec", "spkC_rec"}
    assert set(s.cmvn_scp) == {"spkA", "spkC"}
    assert set(s.segments) == set(s.text) == set(s.utt2dur) == set(s.utts)
    assert validate(s, no_feats=True) == []
    with pytest.raises(DataError, match="none of the 1 requested utterances"):
        subset(d, ["nope"])


@pytest.mark.parametrize("argv,expect", [
    (["--first", "3"], ["spkA_u00", "spkA_u01", "spkA_u02"]),
    (["--last", "2"], ["spkD_u00", "spkD_u01"]),
])
def test_subset_cli_first_last(ddir, tmp_path, argv, expect):
    out = tmp_path / "sub"
    assert subset_cli.main([*argv, str(ddir), str(out)]) == 0
    assert DataDir.load(out).utts == expect
    assert validate(out, no_feats=True) == []
    # Kaldi's argument order: --first SRC N DEST
    out2 = tmp_path / "sub2"
    assert subset_cli.main([argv[0], str(ddir), argv[1], str(out2)]) == 0
    assert DataDir.load(out2).utts == expect


def test_subset_lists_and_random(ddir, tmp_path):
    (tmp_path / "utts").write_text("spkC_u02 x\nspkB_u00\n")
    assert subset_cli.main(["--utt-list", str(tmp_path / "utts"), str(ddir), str(tmp_path / "u")]) == 0
    assert DataDir.load(tmp_path / "u").utts == ["spkB_u00", "spkC_u02"]
    (tmp_path / "spks").write_text("spkD\nspkA\n")
    assert subset_cli.main(["--spk-list", str(tmp_path / "spks"), str(ddir), str(tmp_path / "s")]) == 0
    assert set(DataDir.load(tmp_path / "s").utt2spk.values()) == {"spkA", "spkD"}
    assert len(DataDir.load(tmp_path / "s")) == 5
    # random: reproducible with the seed, N SRC DEST or SRC N DEST
    assert subset_cli.main(["4", str(ddir), str(tmp_path / "r1")]) == 0
    assert subset_cli.main([str(ddir), "4", str(tmp_path / "r2")]) == 0
    assert subset_cli.main(["--seed", "1", "4", str(ddir), str(tmp_path / "r3")]) == 0
    r1, r2, r3 = (DataDir.load(tmp_path / r).utts for r in ("r1", "r2", "r3"))
    assert r1 == r2 and len(r1) == 4 and r1 != r3
    for r in ("u", "s", "r1", "r3"):
        assert validate(tmp_path / r, no_feats=True) == []


def test_subset_errors(ddir, tmp_path):
    with pytest.raises(DataError, match="cannot take 11 utterances, there are only 10"):
        subset_data_dir(ddir, tmp_path / "x", first=11)
    with pytest.raises(ValueError, match="exactly one"):
        subset_data_dir(ddir, tmp_path / "x", first=1, last=1)
    assert subset_cli.main(["--first", "11", str(ddir), str(tmp_path / "x")]) == 1
    assert subset_cli.main(["--first", "2", str(ddir), str(ddir)]) == 1
    with pytest.raises(SystemExit):
        subset_cli.main([str(ddir), str(tmp_path / "x")])  # no mode
    assert not (tmp_path / "x").exists()


def test_subset_copies_frame_shift(ddir, tmp_path):
    (ddir / "frame_shift").write_text("0.01\n")
    subset_data_dir(ddir, tmp_path / "x", first=2)
    assert (tmp_path / "x" / "frame_shift").read_text() == "0.01\n"


# ---------------------------------------------------------------- split
def _brute_best(counts: list[int], n: int) -> int:
    """Smallest possible largest part over all contiguous splits into n non-empty parts."""
    from itertools import combinations

    best = None
    for cuts in combinations(range(1, len(counts)), n - 1):
        b = [0, *cuts, len(counts)]
        worst = max(sum(counts[b[i]:b[i + 1]]) for i in range(n))
        best = worst if best is None else min(best, worst)
    return best


def test_split_groups_per_utt():
    items = [f"u{i}" for i in range(10)]
    g = _split_groups(items, 4)
    assert [len(x) for x in g] == [3, 3, 2, 2]
    assert sum(g, []) == items


def test_split_groups_by_speaker_hand_worked():
    # start from even speaker boundaries [a b | c d] (sizes 2 | 11); moving b right (1 | 12) or
    # c left (12 | 1) would not reduce the difference, so the split stays.
    w = {"a": 1, "b": 1, "c": 10, "d": 1}
    assert _split_groups(list(w), 2, w) == [["a", "b"], ["c", "d"]]
    # [a b | c d] = 10 | 2; moving b right gives 5 | 7 (better); nothing improves after that.
    w = {"a": 5, "b": 5, "c": 1, "d": 1}
    assert _split_groups(list(w), 2, w) == [["a"], ["b", "c", "d"]]


def test_split_groups_properties_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ns = int(rng.integers(1, 9))
        n = int(rng.integers(1, ns + 1))
        counts = [int(c) for c in rng.choice([1, 1, 2, 3, 5, 8], size=ns)]
        spk = [f"s{i}" for i in range(ns)]
        g = _split_groups(spk, n, dict(zip(spk, counts)))
        assert sum(g, []) == spk and len(g) == n and all(g)      # contiguous, complete, non-empty
        sizes = [sum(counts[spk.index(s)] for s in x) for x in g]
        # the local search is not always optimal, but never far from it on small cases
        assert max(sizes) <= _brute_best(counts, n) + max(counts)


def test_split_by_speaker_and_per_utt(ddir):
    parts = split(ddir, 3)
    top = ddir / "split3"
    assert [p.path for p in parts] == [top / "1", top / "2", top / "3"]
    speakers = [sorted(set(DataDir.load(top / str(j)).utt2spk.values())) for j in (1, 2, 3)]
    # A3 B1 C4 D2 -> even speaker boundaries [A B | C | D] = 4 / 4 / 2; no move helps
    assert speakers == [["spkA", "spkB"], ["spkC"], ["spkD"]]
    for j in (1, 2, 3):
        assert validate(top / str(j), no_feats=True) == []
    assert sum((DataDir.load(top / str(j)).utts for j in (1, 2, 3)), []) == DataDir.load(ddir).utts
    parts = split(ddir, 3, by_speaker=False)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert (ddir / "split3utt" / "3" / "utt2spk").is_file()


def test_split_errors(ddir, capsys):
    with pytest.raises(DataError, match="cannot split 4 speakers into 5 parts"):
        split(ddir, 5)
    with pytest.raises(DataError, match="cannot split 10 utterances into 11 parts"):
        split(ddir, 11, by_speaker=False)
    assert split_cli.main([str(ddir), "5"]) == 1
    assert "cannot split 4 speakers" in capsys.readouterr().err
    assert split_cli.main([str(ddir), "2"]) == 0
    assert "utterances per part: 4 6" in capsys.readouterr().out


def test_split_is_reused_only_when_newer(ddir):
    split(ddir, 2)
    marker = ddir / "split2" / "1" / "marker"
    marker.write_text("x")
    old = time.time() - 100
    for f in ddir.iterdir():
        if f.is_file():
            os.utime(f, (old, old))
    split(ddir, 2)
    assert marker.exists()                       # reused
    d = DataDir.load(ddir)
    del d.utt2spk["spkA_u00"], d.text["spkA_u00"], d.wav_scp["spkA_u00"], d.utt2dur["spkA_u00"]
    d.write()
    parts = split(ddir, 2)
    assert not marker.exists()                   # rebuilt from the newer source
    assert "spkA_u00" not in DataDir.load(ddir / "split2" / "1").utt2spk
    assert sum(len(p) for p in parts) == 9
    assert sorted(p.name for p in ddir.iterdir() if p.name.startswith(".split")) == []


def test_split_is_rebuilt_for_other_content_with_older_times(ddir, tmp_path):
    """Issue 23 audit: a source restored with its old times (cp -p, mv from .backup) is new content."""
    keep = tmp_path / "kept"
    keep.mkdir()
    for f in ddir.iterdir():
        if f.is_file():
            shutil.copy2(f, keep / f.name)           # the data dir as it was, times included
    d = DataDir.load(ddir)
    del d.utt2spk["spkA_u00"], d.text["spkA_u00"], d.wav_scp["spkA_u00"], d.utt2dur["spkA_u00"]
    d.write()
    assert sum(len(p) for p in split(ddir, 2)) == 9
    for f in keep.iterdir():                         # restore the older version, older times and all
        os.replace(f, ddir / f.name)
    parts = split(ddir, 2)
    assert sum(len(p) for p in parts) == 10
    assert "spkA_u00" in DataDir.load(ddir / "split2" / "1").utt2spk


def test_split_in_memory():
    d = DataDir(utt2spk={f"s{i}_u": f"s{i}" for i in range(4)})
    assert [p.utts for p in split(d, 2)] == [["s0_u", "s1_u"], ["s2_u", "s3_u"]]


# ---------------------------------------------------------------- combine / copy
def test_combine(tmp_path):
    a = make_dir(tmp_path / "a", speakers={"spkA": 2, "spkB": 1})
    make_dir(tmp_path / "b", speakers={"spkC": 2})
    (tmp_path / "a" / "utt2lang").write_text("".join(f"{u} en\n" for u in a.utts))
    out = combine_data_dirs(tmp_path / "ab", [tmp_path / "a", tmp_path / "b"])
    assert len(out) == 5 and out.utt2lang is None      # only one source has utt2lang
    assert validate(tmp_path / "ab", no_feats=True) == []
    assert not (tmp_path / "ab" / "utt2lang").exists()


def test_combine_duplicate_ids_name_both_dirs(tmp_path):
    make_dir(tmp_path / "a", speakers={"spkA": 2})
    make_dir(tmp_path / "b", speakers={"spkA": 1})
    with pytest.raises(DataError, match=rf"utterance 'spkA_u00' is in both {tmp_path}/a and {tmp_path}/b"):
        combine([tmp_path / "a", tmp_path / "b"])
    assert combine_cli.main([str(tmp_path / "c"), str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert not (tmp_path / "c").exists()
    assert combine_cli.main([str(tmp_path / "a"), str(tmp_path / "a")]) == 1


def test_combine_mixed_segments(tmp_path):
    make_dir(tmp_path / "a", speakers={"spkA": 2}, segments=True)
    # b has no segments and no utt2dur: durations come from the audio headers
    b = tmp_path / "b"
    b.mkdir()
    sf.write(b / "x.wav", np.zeros(8000, dtype=np.float32), 16000)
    DataDir(wav_scp={"spkB_u00": str(b / "x.wav")}, utt2spk={"spkB_u00": "spkB"}, text={"spkB_u00": "hi"}).write(b)
    assert combine_cli.main([str(tmp_path / "ab"), str(tmp_path / "a"), str(b)]) == 0
    d = DataDir.load(tmp_path / "ab")
    assert d.segments["spkB_u00"] == Segment("spkB_u00", 0.0, 0.5)
    assert d.utt2dur is None
    assert validate(tmp_path / "ab", no_feats=True) == []


def test_copy_with_prefix(tmp_path):
    d = make_dir(tmp_path / "a", feats=True)
    d.cmvn_scp = {s: "c.ark:1" for s in d.spk2utt}
    d.write()
    out = copy_data_dir(tmp_path / "a", tmp_path / "b", utt_prefix="sp1.1-", spk_prefix="sp1.1-")
    assert out.utts[0] == "sp1.1-spkA_u00" and out.utt2spk["sp1.1-spkA_u00"] == "sp1.1-spkA"
    assert set(out.cmvn_scp) == {"sp1.1-" + s for s in d.spk2utt}
    assert validate(tmp_path / "b") == []
    make_dir(tmp_path / "s", segments=True)
    out = copy_data_dir(tmp_path / "s", tmp_path / "t", utt_prefix="x-", spk_prefix="x-")
    assert set(out.wav_scp) == {f"{s}_rec" for s in SPEAKERS}      # recordings keep their ids
    assert validate(tmp_path / "t", no_feats=True) == []


def test_fmt_seconds_keeps_precision():
    assert fmt_seconds(1.5) == "1.500"
    assert fmt_seconds(1234 / 16000) == "0.077125"
    d = DataDir(utt2spk={"a": "a"}, segments={"a": Segment("r", 1234 / 16000, 0.5)})
    assert d.tables()["segments"]["a"] == "r 0.077125 0.500"


# ---------------------------------------------------------------- bad audio through the validate CLI
def _audio_dir(tmp_path: Path, sr=16000) -> Path:
    """Three one-second recordings a_1, a_2, a_3 of speaker a; real files."""
    d = tmp_path / "d"
    rng = np.random.default_rng(0)
    wav = {}
    for i in (1, 2, 3):
        p = tmp_path / f"a_{i}.wav"
        sf.write(p, (rng.standard_normal(sr) * 0.1).astype(np.float32), sr, subtype="PCM_16")
        wav[f"a_{i}"] = str(p)
    DataDir(wav_scp=wav, utt2spk={u: "a" for u in wav}, text={u: "x" for u in wav}).write(d)
    return d


@pytest.mark.parametrize("damage,expected", [
    (lambda p: p.unlink(), "no such file"),
    (lambda p: p.write_bytes(b""), "file is empty"),
    (lambda p: p.write_bytes(p.read_bytes()[:10000]), "truncated file"),
    (lambda p: p.write_text("not audio at all\n"), "not a readable audio file"),
    (lambda p: sf.write(p, np.zeros(800, dtype=np.float32), 8000), "has 8000 Hz, config expects 16000 Hz"),
])
def test_validate_check_audio_bad_files(tmp_path, capsys, damage, expected):
    d = _audio_dir(tmp_path)
    assert validate_cli.main(["--no-feats", "--check-audio", "--sample-rate", "16000", str(d)]) == 0
    capsys.readouterr()
    damage(tmp_path / "a_2.wav")
    assert validate_cli.main(["--no-feats", "--check-audio", "--sample-rate", "16000", str(d)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{d}/wav.scp:2: 'a_2': ") and expected in err[0], err
    assert len(err) == 2        # one problem + the summary: the other recordings are fine
    # without --check-audio, Kaldi's checks do not open the audio
    assert validate(d, no_feats=True) == []


def test_validate_check_audio_segment_past_end(tmp_path):
    d = _audio_dir(tmp_path)
    dd = DataDir.load(d)
    dd.segments = {"a_1-s1": Segment("a_1", 0.0, 0.9), "a_1-s2": Segment("a_1", 0.5, 2.0)}
    dd.utt2spk = {u: "a" for u in dd.segments}
    dd.text = {u: "x" for u in dd.segments}
    dd.wav_scp = {"a_1": dd.wav_scp["a_1"]}
    dd.write()
    assert validate(d, no_feats=True, check_audio=True) == [
        f"{d}/segments:2: 'a_1-s2': ends at 2.000 s, beyond the end of recording 'a_1' (1.000 s)"]


def test_fix_drops_speakers_without_cmvn(ddir):
    d = DataDir.load(ddir)
    d.cmvn_scp = {"spkA": "c.ark:1", "spkC": "c.ark:2", "spkD": "c.ark:3", "spkZ": "c.ark:4"}
    d.write()
    assert validate(ddir, no_feats=True) != []
    assert fix_data_dir(ddir) == (9, 10)              # spkB's one utterance goes
    assert set(DataDir.load(ddir).cmvn_scp) == {"spkA", "spkC", "spkD"}
    assert validate(ddir, no_feats=True) == []
