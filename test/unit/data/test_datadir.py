"""speechkit.data.datadir (the DataDir core, subset), validate / fix and their CLIs.

subset_data_dir / split_data / combine_data / copy_data_dir: test_<module>.py beside this file
(they use :func:`make_dir` and the ``ddir`` fixture from here)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.bin import fix_data_dir as fix_cli
from speechkit.bin import validate_data_dir as validate_cli
from speechkit.data.datadir import (
    DataDir,
    Segment,
    c_sorted,
    fmt_seconds,
    subset,
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
    d.cmvn_scp = _real_cmvn(ddir, ["spkA", "spkB", "spkC"])
    d.write()
    assert validate(ddir, no_feats=True) == [f"{ddir}/utt2spk:9: speaker 'spkD' has no entry in cmvn.scp"]
    d.cmvn_scp = _real_cmvn(ddir, ["global"])   # Kaldi: "speaker lists extracted from spk2utt and cmvn differ"
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
    d.cmvn_scp = _real_cmvn(ddir, ["spkA", "spkC", "spkD", "spkZ"])
    d.write()
    assert validate(ddir, no_feats=True) != []
    assert fix_data_dir(ddir) == (9, 10)              # spkB's one utterance goes
    assert set(DataDir.load(ddir).cmvn_scp) == {"spkA", "spkC", "spkD"}
    assert validate(ddir, no_feats=True) == []


def _real_cmvn(ddir: Path, speakers: list[str]) -> dict[str, str]:
    """cmvn.scp entries into a real ark of 2 x 3 statistics (validate reads what cmvn.scp points at)."""
    import kaldiio
    import numpy as np

    scp = ddir.parent / "cmvn_stats.scp"
    kaldiio.save_ark(str(ddir.parent / "cmvn_stats.ark"), {s: np.ones((2, 3)) for s in speakers}, scp=str(scp))
    return dict(line.split(" ", 1) for line in scp.read_text().splitlines())
