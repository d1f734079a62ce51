"""Reproducible train/dev/test splits and speechkit-split-corpus."""
from __future__ import annotations

import pytest

from speechkit.bin.split_corpus import main
from speechkit.data.corpora._common import read_phone_alignments, write_phone_alignments
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.data.splits import PARTS, assign_speakers, assign_utterances, split_corpus, write_split
from speechkit.utils.fileio import DataError, write_table


def make_dir(path, sizes=(5, 7, 9, 11, 13, 15, 17, 19, 21, 23)):
    """A data dir with speakers s00.. having the given numbers of utterances, plus side files."""
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    rows = []
    for i, n in enumerate(sizes):
        spk = f"s{i:02d}"
        for j in range(n):
            utt = f"{spk}_u{j:03d}"
            d.utt2spk[utt], d.text[utt], d.wav_scp[utt] = spk, f"word{j}", f"/data/{utt}.wav"
            d.utt2lang[utt], d.utt2dur[utt] = "en", 1.0
            rows += [(utt, 0.0, 0.5, "a"), (utt, 0.5, 1.0, "sil")]
    d.write(path)
    write_phone_alignments(path / "phone_alignments", rows)
    write_table(path / "spk2gender", {f"s{i:02d}": "mf"[i % 2] for i in range(len(sizes))})
    (path / "frame_shift").write_text("0.01\n")
    return d


def test_utterance_split_counts_and_reproducibility():
    utts = [f"s_{i:03d}" for i in range(100)]
    a = assign_utterances(utts, 0.1, 0.2, seed=0)
    assert [len(a[p]) for p in PARTS] == [70, 10, 20]
    assert sorted(sum(a.values(), [])) == utts                               # a partition
    assert a == assign_utterances(list(reversed(utts)), 0.1, 0.2, seed=0)    # input order does not matter
    assert a != assign_utterances(utts, 0.1, 0.2, seed=1)
    with pytest.raises(DataError, match=r"dev part would be empty \(0.01 of 30 utterances rounds to 0\)"):
        assign_utterances(utts[:30], 0.01, 0.2, seed=0)
    for dev, test in ((0.0, 0.1), (0.5, 0.5), (1.2, 0.1)):
        with pytest.raises(ValueError):
            assign_utterances(utts, dev, test, seed=0)


def test_speaker_split_is_disjoint_and_near_the_fractions():
    sizes = (5, 7, 9, 11, 13, 15, 17, 19, 21, 23)
    utt2spk = {f"s{i}_u{j}": f"s{i}" for i, n in enumerate(sizes) for j in range(n)}
    n = len(utt2spk)
    for seed in range(20):
        parts = assign_speakers(utt2spk, 0.15, 0.15, seed)
        spk_sets = [{utt2spk[u] for u in parts[p]} for p in PARTS]
        assert not (spk_sets[0] & spk_sets[1] or spk_sets[0] & spk_sets[2] or spk_sets[1] & spk_sets[2])
        assert sum(len(parts[p]) for p in PARTS) == n
        for p in ("dev", "test"):                        # within half the largest speaker of the target
            assert abs(len(parts[p]) - 0.15 * n) <= max(sizes) / 2
    assert assign_speakers(utt2spk, 0.15, 0.15, 3) == assign_speakers(utt2spk, 0.15, 0.15, 3)
    with pytest.raises(DataError, match="train part would be empty"):
        assign_speakers({"a_1": "a", "b_1": "b"}, 0.3, 0.3, 0)
    ten_each = {f"{s}_{j}": s for s in "abc" for j in range(10)}
    with pytest.raises(DataError, match="dev part would be empty: 3 speakers"):   # no speaker fits 5 %
        assign_speakers(ten_each, 0.05, 0.3, 0)


def test_write_split_subsets_side_files(tmp_path):
    src = tmp_path / "data"
    make_dir(src)
    parts = write_split(src, tmp_path / "split", 0.1, 0.1, by_speaker=True, seed=7)
    ali_all = read_phone_alignments(src / "phone_alignments")
    seen = set()
    for p in PARTS:
        dest = tmp_path / "split" / p
        assert validate(dest, no_feats=True) == []
        d = DataDir.load(dest)
        assert d.utts == parts[p].utts and not (seen & set(d.utts))
        seen |= set(d.utts)
        ali = read_phone_alignments(dest / "phone_alignments")
        assert set(ali) == set(d.utts) and all(ali[u] == ali_all[u] for u in ali)
        genders = dict(line.split() for line in (dest / "spk2gender").read_text().splitlines())
        assert set(genders) == set(d.spk2utt)
        assert (dest / "frame_shift").read_text() == "0.01\n"
    assert len(seen) == 140
    # same command, same result
    again = split_corpus(src, 0.1, 0.1, by_speaker=True, seed=7)
    assert all(again[p].utts == parts[p].utts for p in PARTS)


def test_extras_follow_the_source_stale_ones_are_removed(tmp_path):
    """Audit 3 d7: a source without frame_shift / feats.yaml left the parts with those of an earlier
    split; the extras follow the rule of every other tool (``_copy_extras``): the source's are copied, one
    it lacks is removed from the part. The whole source's cmvn_global.ark describes no part: never carried,
    an earlier one removed."""
    src = tmp_path / "data"
    make_dir(src, sizes=(4, 4, 4, 4))
    (src / "feats.yaml").write_text("type: mfcc\n")
    (src / "cmvn_global.ark").write_bytes(b"stats")
    (tmp_path / "split" / "dev").mkdir(parents=True)
    (tmp_path / "split" / "dev" / "cmvn_global.ark").write_bytes(b"an earlier part's stats")
    write_split(src, tmp_path / "split", 0.25, 0.25, seed=0)
    for p in PARTS:
        dest = tmp_path / "split" / p
        assert (dest / "frame_shift").read_text() == "0.01\n" and (dest / "feats.yaml").read_text() == "type: mfcc\n"
        assert not (dest / "cmvn_global.ark").exists()
    for name in ("frame_shift", "feats.yaml", "cmvn_global.ark"):
        (src / name).unlink()
    write_split(src, tmp_path / "split", 0.25, 0.25, seed=0)
    for p in PARTS:
        dest = tmp_path / "split" / p
        assert not any((dest / n).exists() for n in ("frame_shift", "feats.yaml", "cmvn_global.ark")), p
        assert validate(dest, no_feats=True) == []


def test_cli(tmp_path, capsys):
    src = tmp_path / "data"
    make_dir(src, sizes=(10, 10, 10, 10))
    assert main([str(src), str(tmp_path / "out"), "--dev", "0.25", "--test", "0.25", "--by-speaker", "--seed", "1"]) == 0
    assert "train 20 utts / 2 spks, dev 10 utts / 1 spks, test 10 utts / 1 spks" in capsys.readouterr().out
    # a part that would be empty: error, exit 1, nothing written
    assert main([str(src), str(tmp_path / "bad"), "--dev", "0.05", "--test", "0.25", "--by-speaker"]) == 1
    assert "dev part would be empty" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert main([str(src), str(src), "--dev", "0.1", "--test", "0.1"]) == 1


def test_parts_overlapping_the_source_are_refused_beside_it_allowed(tmp_path, capsys):
    """Issue 23 sweep: OUT inside DATA (data/all/split) wrote the parts into the source dir; only
    OUT = DATA and a part = DATA were refused. OUT may hold DATA (data/all -> data/train ...)."""
    src = tmp_path / "data" / "all"
    make_dir(src, sizes=(10, 10, 10, 10))
    before = sorted(p.name for p in src.iterdir())
    for out, msg in [(src / "split", f"the train part {src / 'split' / 'train'} lies inside the source DATA {src}"),
                     (src, "lies inside the source DATA")]:
        assert main([str(src), str(out), "--dev", "0.25", "--test", "0.25"]) == 1
        assert msg in capsys.readouterr().err
    assert sorted(p.name for p in src.iterdir()) == before
    assert main([str(src), str(tmp_path / "data"), "--dev", "0.25", "--test", "0.25"]) == 0
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["all", "dev", "test", "train"]
    assert main([str(tmp_path / "data" / "train"), str(tmp_path / "data"), "--dev", "0.25", "--test", "0.25"]) == 1
    assert f"the train part {tmp_path / 'data' / 'train'} is the source DATA" in capsys.readouterr().err


def test_an_unwritable_log_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert main([str(tmp_path / "nope"), str(tmp_path / "out"), "--dev", "0.1", "--test", "0.1",
                 "--log-file", str(tmp_path / "afile" / "x.log")]) == 1
    err = capsys.readouterr().err
    assert f"speechkit-split-corpus: error: cannot write {tmp_path / 'afile'}: Not a directory" in err
