"""Issue 38 cases 9 and 17: one byte-order-mark rule for every table reader. A UTF-8 BOM starting
``utt2spk`` became part of the first id in fix-data-dir (that utterance dropped from every table:
"kept 5 of 7") and made validate-data-dir print a dozen problems, none naming the BOM, while the
other readers (:func:`speechkit.utils.fileio.read_lines`) drop it with a warning naming the file."""
from __future__ import annotations

from pathlib import Path

from speechkit.bin import fix_data_dir as fix_cli
from speechkit.bin import validate_data_dir as validate_cli
from speechkit.data.datadir import DataDir
from speechkit.data.speakers import read_speakers
from speechkit.data.validate import validate

BOM = b"\xef\xbb\xbf"


def _dir(path: Path, n: int = 7) -> Path:
    utts = {f"spk{i % 2}_u{i}": f"spk{i % 2}" for i in range(n)}
    DataDir(wav_scp={u: f"/corpus/{u}.wav" for u in utts}, utt2spk=utts, text={u: "a b" for u in utts}).write(path)
    return path


def _with_bom(f: Path) -> bytes:
    plain = f.read_bytes()
    f.write_bytes(BOM + plain)
    return plain


def test_fix_data_dir_drops_a_bom_with_a_warning_and_keeps_every_utterance(tmp_path, capsys):
    d = _dir(tmp_path / "d")
    plain = _with_bom(d / "utt2spk")
    assert fix_cli.main([str(d)]) == 0
    cap = capsys.readouterr()
    assert "kept 7 utterances out of 7" in cap.out
    assert f"{d}/utt2spk: starts with a UTF-8 byte-order mark" in cap.err and "WARNING" in cap.err
    assert (d / "utt2spk").read_bytes() == plain                   # rewritten without it
    assert (d / ".backup" / "1" / "utt2spk").read_bytes() == BOM + plain
    assert len(DataDir.load(d).text) == 7
    assert validate(d, no_feats=True) == []


def test_validate_names_the_bom_once(tmp_path, capsys):
    d = _dir(tmp_path / "d")
    _with_bom(d / "utt2spk")
    problems = validate(d, no_feats=True)
    assert len(problems) == 1 and problems[0].startswith(f"{d}/utt2spk:1: starts with a UTF-8 byte-order mark")
    assert validate_cli.main(["--no-feats", str(d)]) == 1
    cap = capsys.readouterr()
    assert "byte-order mark" in cap.out + cap.err


def test_a_bom_inside_a_file_is_named_at_its_line(tmp_path):
    d = _dir(tmp_path / "d")
    lines = (d / "text").read_bytes().splitlines(keepends=True)
    (d / "text").write_bytes(b"".join(lines[:3]) + BOM + b"".join(lines[3:]))  # two files concatenated
    problems = validate(d, no_feats=True)
    assert any(p.startswith(f"{d}/text:4: id ") and "byte-order mark" in p for p in problems), problems


def test_the_speakers_file_of_an_experiment_drops_a_bom(tmp_path):
    f = tmp_path / "speakers"
    f.write_bytes(BOM + b"spka\nspkb\n")
    assert read_speakers(f) == ["spka", "spkb"]


def test_compute_cmvn_stats_recognises_a_legacy_global_entry_behind_a_bom(tmp_path):
    """A cmvn.scp holding only the older 'global' entry is moved aside when global stats are written;
    behind a BOM its key read as '\\ufeffglobal' and the legacy file stayed beside cmvn_global.ark."""
    import kaldiio
    import numpy as np

    from speechkit.features.cmvn_stats import compute_cmvn_stats

    d = _dir(tmp_path / "d", n=2)
    kaldiio.save_ark(str(tmp_path / "f.ark"), {u: np.ones((3, 2), dtype=np.float32) for u in DataDir.load(d).utts},
                     scp=str(d / "feats.scp"))
    kaldiio.save_ark(str(tmp_path / "g.ark"), {"global": np.ones((2, 3))}, scp=str(tmp_path / "g.scp"))
    (d / "cmvn.scp").write_bytes(BOM + (tmp_path / "g.scp").read_bytes())
    compute_cmvn_stats(d)
    assert not (d / "cmvn.scp").exists() and (d / "cmvn_global.ark").is_file()
    assert (d / ".backup" / "1" / "cmvn.scp").read_bytes().startswith(BOM)
