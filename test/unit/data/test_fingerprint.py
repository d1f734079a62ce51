"""Content fingerprints: tables and the arks/wavs they point to, never paths."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from speechkit.data.fingerprint import (
    DataInput, content_digest, diff_fingerprints, fingerprint_file, fingerprint_input, fingerprint_inputs,
)


def data_dir(d: Path, ark: Path, utts: int = 3) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    if not ark.exists():
        ark.parent.mkdir(parents=True, exist_ok=True)
        ark.write_bytes(os.urandom(4096))
    (d / "feats.scp").write_text("".join(f"u{i} {ark}:{100 * i}\n" for i in range(utts)))
    (d / "utt2spk").write_text("".join(f"u{i} s{i % 2}\n" for i in range(utts)))
    (d / "spk2utt").write_text("s0 u0\ns1 u1\n")
    return d


def test_copied_or_moved_dir_with_rewritten_ark_paths_is_the_same(tmp_path):
    a = data_dir(tmp_path / "a", tmp_path / "a" / "data" / "raw.ark")
    tables = ("feats.scp", "utt2spk", "spk2utt", "cmvn.scp")
    fp_a = fingerprint_input(DataInput(str(a), tables))
    # a copy elsewhere, its feats.scp pointing at the copied ark through a relative path
    b = tmp_path / "elsewhere" / "b"
    shutil.copytree(a, b)
    rel = os.path.relpath(b / "data" / "raw.ark")
    (b / "feats.scp").write_text("".join(f"u{i} {rel}:{100 * i}\n" for i in range(3)))
    fp_b = fingerprint_input(DataInput(str(b), tables))
    assert fp_a["path"] != fp_b["path"]
    assert diff_fingerprints({"k": fp_a}, {"k": fp_b}) == ([], [])
    assert content_digest(fp_a) == content_digest(fp_b)
    assert fp_a["files"]["cmvn.scp"] is None and fp_a["files"]["feats.scp"]["refs"] == 1


def test_each_kind_of_change_is_named(tmp_path):
    ark = tmp_path / "raw.ark"
    d = data_dir(tmp_path / "d", ark)
    inp = {"data.train_dir": DataInput(str(d), ("feats.scp", "utt2spk", "spk2utt", "cmvn.scp"))}
    old = fingerprint_inputs(inp)

    def what() -> str:
        changes, _ = diff_fingerprints(old, fingerprint_inputs(inp))
        assert len(changes) == 1 and changes[0].key == "data.train_dir" and changes[0].path == str(d)
        return changes[0].what

    data_dir(d, ark, utts=5)
    assert what() == "its feats.scp changed (3 -> 5 utterances)"
    data_dir(d, ark)
    (d / "utt2spk").write_text("u0 s1\nu1 s1\nu2 s0\n")
    assert what() == "its utt2spk changed (other content, 3 utterances as before)"
    data_dir(d, ark)
    (d / "spk2utt").write_text("s0 u0 u2\n")
    assert what() == "its spk2utt changed (2 -> 1 speakers)"
    data_dir(d, ark)
    ark.write_bytes(os.urandom(4096))  # same size, same offsets, other features
    assert what() == "the data its feats.scp points to changed (the content of its 1 referenced file)"
    old = fingerprint_inputs(inp)
    (d / "cmvn.scp").write_text("s0 x\n")
    assert what() == "it has a cmvn.scp now (it had none)"
    old = fingerprint_inputs(inp)
    (d / "utt2spk").unlink()
    assert what() == "its utt2spk is gone"


def test_file_and_tree_inputs(tmp_path):
    f = tmp_path / "codes"
    f.write_text("u1 1 2 3\nu2 4 5\n")
    assert fingerprint_file(f)["keys"] == 2
    assert fingerprint_file(tmp_path / "missing") is None
    bin_file = tmp_path / "best.pt"
    bin_file.write_bytes(b"\x80\x02\xff\xfe" * 10)
    assert fingerprint_file(bin_file)["keys"] is None
    old = fingerprint_inputs({"data.codes": DataInput(str(f)), "ckpt": DataInput(str(bin_file))})
    f.write_text("u1 1 2 3\nu2 4 6\n")
    bin_file.write_bytes(b"\x80\x02\xff\xfe" * 11)
    changes, _ = diff_fingerprints(old, fingerprint_inputs({"data.codes": DataInput(str(f)),
                                                           "ckpt": DataInput(str(bin_file))}))
    assert [(c.key, c.what) for c in changes] == [
        ("data.codes", "the file changed (other content, 2 entries as before)"),
        ("ckpt", "the file changed (other content, 40 -> 44 bytes)")]

    units = tmp_path / "units"
    (units / "hi").mkdir(parents=True)
    (units / "languages.txt").write_text("hi\n")
    (units / "hi" / "units.txt").write_text("a 1\nb 2\n")
    old = fingerprint_inputs({"data.units_dir": DataInput(str(units), tree=True)})
    (units / "hi" / "units.txt").write_text("a 1\nb 2\nc 3\n")
    changes, unmatched = diff_fingerprints(old, fingerprint_inputs({"data.units_dir": DataInput(str(units), tree=True),
                                                                   "data.new": DataInput(str(f))}))
    assert [c.what for c in changes] == ["its hi/units.txt changed (2 -> 3 entries)"] and unmatched == ["data.new"]
