"""speechkit.utils.fileio readers: a UTF-8 byte-order mark starting a Kaldi table is dropped with a
warning naming the file; one starting a later line is an error naming the line."""
from __future__ import annotations

import logging
import re

import pytest

from speechkit.utils.fileio import DataError, read_lines, read_table


def test_a_leading_bom_is_dropped_with_a_warning_naming_the_file(tmp_path, caplog):
    f = tmp_path / "utt2spk"
    f.write_bytes(b"\xef\xbb\xbfu1 s1\nu2 s1\n")
    with caplog.at_level(logging.WARNING, logger="speechkit.utils.fileio"):
        assert read_table(f) == {"u1": "s1", "u2": "s1"}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and f"{f}: starts with a UTF-8 byte-order mark" in warned[0]
    assert read_lines(f) == ["u1 s1", "u2 s1"]
    # without a mark: nothing said, nothing changed
    g = tmp_path / "text"
    g.write_bytes(b"u1 \xef\xbb\xbfword\n")  # U+FEFF inside a value is left alone
    caplog.clear()
    assert read_table(g) == {"u1": "\ufeffword"} and not caplog.records


def test_a_bom_starting_a_later_line_is_an_error_naming_the_line(tmp_path):
    f = tmp_path / "text"
    f.write_bytes(b"\xef\xbb\xbfu1 a b\n\xef\xbb\xbfu2 c\n")  # two BOM files concatenated with cat
    with pytest.raises(DataError, match=re.escape(f"{f}:2: key '\\ufeffu2' starts with a UTF-8 byte-order mark")):
        read_table(f)


def test_id_file_keeps_ids_inside_their_directory(tmp_path):
    from speechkit.utils.fileio import id_file

    assert id_file(tmp_path, "spk1_u-01.x", ".wav") == tmp_path / "spk1_u-01.x.wav"
    for bad in ("", ".", "..", "../x", "/abs/x", "a/b", "a\0b"):
        with pytest.raises(DataError, match="cannot be a file name of the output"):
            id_file(tmp_path, bad, ".wav")


class _FullDisk:
    """A file object on a full disk: ``write``/``flush`` raise ``OSError(ENOSPC)`` naming no file, as the OS does."""

    def __init__(self, f):
        self._f = f

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def write(self, data):
        import errno
        import os

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_disk(monkeypatch):
    """Every file atomic_write opens is on a full disk (issue 38 case 18's simulation; a tiny tmpfs does it for real)."""
    import os

    from speechkit.utils import fileio

    real = os.fdopen
    monkeypatch.setattr(fileio.os, "fdopen", lambda *a, **k: _FullDisk(real(*a, **k)))


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    """Issue 38 case 18: on a full disk the error said 'No space left on device' without a path (compute-feats,
    record-run, score-abx --json). atomic_write and naming_write_errors name the destination; no temporary is
    left; other errors pass unchanged."""
    import errno
    import os

    from speechkit.utils.fileio import WriteError, atomic_write, naming_write_errors, write_table

    out = tmp_path / "scores.json"
    out.write_text("previous\n")
    full_disk(monkeypatch)
    with pytest.raises(WriteError) as e:
        with atomic_write(out) as f:
            f.write("{}\n")
    assert str(e.value) == f"cannot write {out}: No space left on device" and e.value.errno == errno.ENOSPC
    with pytest.raises(WriteError, match=f"cannot write {re.escape(str(tmp_path / 'text'))}: No space left"):
        write_table(tmp_path / "text", {"u1": "a"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.json"] and out.read_text() == "previous\n"
    with pytest.raises(WriteError, match="cannot write x.ark: Disk quota exceeded"):
        with naming_write_errors("x.ark"):
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
    for other in (FileNotFoundError(errno.ENOENT, "No such file or directory", "in.wav"), OSError(errno.EBADF, "x")):
        with pytest.raises(OSError) as e:
            with naming_write_errors("x.ark"):
                raise other
        assert e.value is other
