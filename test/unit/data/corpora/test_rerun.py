"""Re-running a corpus preparation into its own earlier output (speechkit.data.corpora._common.finish).

finish wrote the tables first (DataDir.write, which removes what the new dir lacks) and the side files after:
every identical re-run of a preparer with spk2gender or phone_alignments (timit, mini, vctk, ljspeech, ...)
backed up the whole dir to OUT/.backup/N and warned "removed spk2gender phone_alignments (the source has
none)", then wrote them back: backups piled up (one per re-run) for nothing."""
from __future__ import annotations

import logging

from speechkit.data.corpora._common import finish, read_phone_alignments
from speechkit.data.datadir import DataDir


def _dir() -> DataDir:
    return DataDir(wav_scp={"s1_a": "/x/a.wav", "s2_b": "/x/b.wav"}, text={"s1_a": "hi there", "s2_b": "yes"},
                   utt2spk={"s1_a": "s1", "s2_b": "s2"})


ROWS = [("s2_b", 0.0, 0.2, "y"), ("s1_a", 0.1, 0.3, "i"), ("s1_a", 0.0, 0.1, "h"), ("gone", 0.0, 1.0, "x")]


def test_an_identical_rerun_backs_up_and_warns_about_nothing(tmp_path, caplog):
    out = tmp_path / "data"
    finish(_dir(), out, spk2gender={"s1": "f", "s2": "m"}, phone_alignments=ROWS, corpus="t")
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert (out / "phone_alignments").read_text() == ("s1_a 0.0000 0.1000 h\ns1_a 0.1000 0.3000 i\n"
                                                      "s2_b 0.0000 0.2000 y\n")
    assert (out / "spk2gender").read_text() == "s1 f\ns2 m\n"
    for _ in range(2):
        with caplog.at_level(logging.INFO):
            finish(_dir(), out, spk2gender={"s1": "f", "s2": "m"}, phone_alignments=ROWS, corpus="t")
        assert not (out / ".backup").exists()  # was .backup/1, then .backup/2
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert read_phone_alignments(out / "phone_alignments")["s1_a"][0][:3] == (0.0, 0.1, "h")


def test_a_side_file_the_corpus_no_longer_has_is_still_removed_and_backed_up(tmp_path, caplog):
    out = tmp_path / "data"
    finish(_dir(), out, spk2gender={"s1": "f", "s2": "m"}, phone_alignments=ROWS, corpus="t")
    with caplog.at_level(logging.WARNING):
        finish(_dir(), out, spk2gender={"s1": "f"}, corpus="t")  # gender of s2 unknown now, no alignments
    assert not (out / "spk2gender").exists() and not (out / "phone_alignments").exists()
    assert sorted(p.name for p in (out / ".backup" / "1").iterdir()) >= ["phone_alignments", "spk2gender"]
    assert "removed spk2gender phone_alignments" in caplog.text
