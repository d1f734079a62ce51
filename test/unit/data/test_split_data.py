"""speechkit.data.split_data and speechkit-split-data-dir (Kaldi's split_data.sh)."""
from __future__ import annotations

import os
import shutil
import time

import numpy as np
import pytest
from test_datadir import ddir  # noqa: F401  (the data dir fixture: tests are not a package)

from speechkit.bin import split_data_dir as split_cli
from speechkit.data.datadir import DataDir
from speechkit.data.split_data import _split_groups, split
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError



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
    with pytest.raises(DataError, match=r"cannot split 4 speakers into 5 parts \(use by_speaker=false, or fewer"):
        split(ddir, 5)
    with pytest.raises(DataError, match="cannot split 10 utterances into 11 parts"):
        split(ddir, 11, by_speaker=False)
    assert split_cli.main([str(ddir), "5"]) == 1
    assert "cannot split 4 speakers into 5 parts (use --per-utt, or fewer jobs)" in capsys.readouterr().err
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


def test_help_describes_reuse_by_content_not_by_time(capsys):
    """--help said "An existing split newer than every source file is reused"; the split is reused
    by the content hash of the source files (split{N}/.source), times are not compared."""
    with pytest.raises(SystemExit) as e:
        split_cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    assert "newer than" not in out
    assert "same content" in out and "SHA-256" in out and ".source" in out
