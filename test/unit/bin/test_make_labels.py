"""speechkit-g2p then speechkit-make-labels end to end on a tiny data dir: fit on train, apply to test."""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile as sf
import yaml

from speechkit.bin.g2p import main as g2p_main
from speechkit.bin.make_labels import main
from speechkit.data.corpora._common import write_phone_alignments
from speechkit.utils.fileio import read_table, write_table

pytest.importorskip("phonemizer")

SR = 16000
TRAIN = {"spk_a": "bring three red apples", "spk_b": "the tree is green", "spk_c": "four seven two nine"}
TEST = {"spk_d": "bring the red tree", "spk_e": "seven green apples"}


def world_frames(num_samples: int) -> int:
    """WORLD's frame count at 5 ms (speechkit.features.world): 1 + floor(1000 N / (sr * 5))."""
    return 1 + (1000 * num_samples) // (SR * 5)


def make_dir(root: Path, texts: dict[str, str], seconds: float = 0.8) -> Path:
    """A word-level data dir with real WAV files, then its phone-level copy (speechkit-g2p), with
    utt2num_frames/frame_shift as the WORLD stage writes them, and fabricated phone alignments
    (sil 0.1 s, the phones evenly, sil to the end) in ``root/phone_alignments``."""
    src = root / "words"
    (src / "wav").mkdir(parents=True)
    rng = np.random.default_rng(0)
    n = int(seconds * SR)
    for u in texts:
        sf.write(src / "wav" / f"{u}.wav", (0.1 * rng.standard_normal(n)).astype(np.float32), SR)
    write_table(src / "wav.scp", {u: str(src / "wav" / f"{u}.wav") for u in texts})
    write_table(src / "text", texts)
    write_table(src / "utt2spk", {u: "spk" for u in texts})
    write_table(src / "spk2utt", {"spk": " ".join(sorted(texts))})
    write_table(src / "utt2lang", {u: "en" for u in texts})
    (src / "frame_shift").write_text("0.005\n")
    phn = root / "phn"
    assert g2p_main([str(src), str(phn)]) == 0
    write_table(phn / "utt2num_frames", {u: world_frames(n) for u in texts})
    rows = []
    for u, line in read_table(phn / "text").items():
        phones = line.split()
        t = np.linspace(0.1, seconds - 0.1, len(phones) + 1)
        rows += [(u, 0.0, 0.1, "sil"), (u, seconds - 0.1, seconds, "sil")]
        rows += [(u, float(a), float(b), p) for a, b, p in zip(t[:-1], t[1:], phones)]
    write_phone_alignments(root / "phone_alignments", rows)
    return phn


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    return root, make_dir(root / "train", TRAIN), make_dir(root / "test", TEST)


def read_labels(out: Path) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in kaldiio.load_scp(str(out / "labels.scp")).items()}


def test_fit_then_apply(dirs, capsys):
    root, train, test = dirs
    fe = root / "frontend"
    train_out = root / "train_out"
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(root / "train" / "phone_alignments"),
                 str(train_out)]) == 0
    out = capsys.readouterr().out
    doc = yaml.safe_load((fe / "frontend.yaml").read_text(encoding="utf-8"))
    dim = int((train_out / "label_dim").read_text())
    assert doc["dim"] == dim and f"label dim {dim}" in out
    n_phones = len((fe / "phones.txt").read_text(encoding="utf-8").splitlines())
    assert dim == 5 * (n_phones + 1) + 22 + 18 + 2
    labels = read_labels(train_out)
    frames = read_table(train / "utt2num_frames")
    assert sorted(labels) == sorted(TRAIN)
    for u, m in labels.items():
        assert m.shape == (int(frames[u]), dim) and m.dtype == np.float32
        ident = m[:, : 5 * (n_phones + 1)].reshape(len(m), 5, n_phones + 1)
        assert np.all(ident.sum(axis=2) == 1)  # exactly one symbol per context position
        assert 0 <= m[:, -2].min() and m[:, -2].max() <= 1 and 0 <= m[:, -1].min() and m[:, -1].max() <= 1
    # z-normalised real block has mean ~0 over the training phones (not sil)
    assert doc["real_stats"]["phones_in_utt"]["std"] > 0
    # apply the saved front end to other data
    assert main(["--frontend-dir", str(fe), str(test), str(root / "test" / "phone_alignments"),
                 str(root / "test_out")]) == 0
    labels = read_labels(root / "test_out")
    assert sorted(labels) == sorted(TEST)
    assert all(m.shape[1] == dim for m in labels.values())
    assert int((root / "test_out" / "label_dim").read_text()) == dim


def test_missing_alignment_is_skipped_and_reported(dirs, tmp_path, capsys):
    root, train, _ = dirs
    ali = tmp_path / "ali"
    ali.write_text("".join(line + "\n" for line in (root / "train" / "phone_alignments").read_text().splitlines()
                           if not line.startswith("spk_b ")))
    assert main(["--fit", "--frontend-dir", str(tmp_path / "fe"), str(train), str(ali), str(tmp_path / "out")]) == 0
    cap = capsys.readouterr()
    assert "1 utterances left out (no alignment; first: spk_b)" in cap.err and "1 left out" in cap.out
    assert sorted(read_labels(tmp_path / "out")) == ["spk_a", "spk_c"]


def test_unknown_phone_and_mismatches_are_errors(dirs, tmp_path, capsys):
    root, train, _ = dirs
    fe = root / "frontend_err"
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(root / "train" / "phone_alignments"),
                 str(tmp_path / "o0")]) == 0
    capsys.readouterr()
    # a phone the training data never had: 'judge' -> dʒ ʌ dʒ
    other = make_dir(tmp_path / "other", {"spk_x": "judge"})
    ali = tmp_path / "other" / "phone_alignments"
    line = next(i for i, t in enumerate(ali.read_text(encoding="utf-8").splitlines(), 1) if t.endswith(" dʒ"))
    assert main(["--frontend-dir", str(fe), str(other), str(ali), str(tmp_path / "o1")]) == 1
    err = capsys.readouterr().err
    assert f"{ali}:{line}: phone 'dʒ' of utterance 'spk_x' is not in the label front end's inventory" in err
    assert not (tmp_path / "o1" / "labels.scp").exists()
    # frame count off by more than 2: error naming the utterance and both counts, nothing written
    frames = read_table(train / "utt2num_frames")
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in train.iterdir():
        if f.is_file():
            (bad / f.name).write_bytes(f.read_bytes())
    write_table(bad / "utt2num_frames", {**frames, "spk_b": int(frames["spk_b"]) + 5})
    assert main(["--frontend-dir", str(fe), str(bad), str(root / "train" / "phone_alignments"),
                 str(tmp_path / "o2")]) == 1
    err = capsys.readouterr().err
    assert "utterance 'spk_b': the alignment covers 160 frames" in err and f"have {int(frames['spk_b']) + 5}" in err
    assert not (tmp_path / "o2" / "labels.scp").exists()
    # aligned phones that differ from text
    write_table(bad / "utt2num_frames", frames)
    text = read_table(bad / "text")
    write_table(bad / "text", {**text, "spk_c": text["spk_c"].replace("s", "z", 1)})
    assert main(["--frontend-dir", str(fe), str(bad), str(root / "train" / "phone_alignments"),
                 str(tmp_path / "o3")]) == 1
    assert "utterance 'spk_c': the aligned phones (without sil) differ from" in capsys.readouterr().err
    # applying without a fitted front end
    assert main(["--frontend-dir", str(tmp_path / "none"), str(train), str(root / "train" / "phone_alignments"),
                 str(tmp_path / "o4")]) == 1
    assert "fit the front end first" in capsys.readouterr().err


def _files(d: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.rglob("*")) if p.is_file()}


def test_refit_reuses_an_up_to_date_front_end_and_refuses_a_different_one(dirs, tmp_path, capsys):
    """Issue 23 item 4: --fit into an existing --frontend-dir replaced the front end trained models
    depend on. Same content: reused, nothing rewritten (the recipes re-run stage 4); other content:
    an error naming the dir and what changed; --overwrite re-fits and keeps the old one."""
    root, train, _ = dirs
    ali = root / "train" / "phone_alignments"
    fe = tmp_path / "frontend"
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(ali), str(tmp_path / "l1")]) == 0
    fitted = _files(fe)
    doc = yaml.safe_load((fe / "frontend.yaml").read_text(encoding="utf-8"))
    n_phones = doc["num_phones"]
    assert doc["fitted_on"]["utterances"] == 3 and doc["fitted_on"]["phones"] == n_phones
    capsys.readouterr()
    # the same content (another copy of the data dir: paths do not count) -> up to date
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in train.iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    assert main(["--fit", "--frontend-dir", str(fe), str(copy), str(ali), str(tmp_path / "l2")]) == 0
    assert f"{fe}: up to date" in capsys.readouterr().err
    assert _files(fe) == fitted
    assert (tmp_path / "l2" / "labels.scp").is_file()
    # other data: two of the three utterances aligned
    fewer = tmp_path / "ali2"
    fewer.write_text("".join(line + "\n" for line in ali.read_text(encoding="utf-8").splitlines()
                             if not line.startswith("spk_c ")), encoding="utf-8")
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(fewer), str(tmp_path / "l3")]) == 1
    err = capsys.readouterr().err
    assert (f"speechkit-make-labels: error: --frontend-dir {fe}: fitted on 3 utterances of {train} with {n_phones} "
            f"phones; now 2 utterances of {train} with ") in err
    assert "ALIGNMENTS differs" in err and "use --overwrite to refit" in err and f"{fe}/.backup/N" in err
    assert _files(fe) == fitted and not (tmp_path / "l3").exists()
    # --overwrite: re-fitted, the previous front end kept whole
    assert main(["--fit", "--overwrite", "--frontend-dir", str(fe), str(train), str(fewer), str(tmp_path / "l3")]) == 0
    assert yaml.safe_load((fe / "frontend.yaml").read_text(encoding="utf-8"))["fitted_on"]["utterances"] == 2
    assert {k: v[0] for k, v in _files(fe / ".backup" / "1").items()} == {k: v[0] for k, v in fitted.items()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ali2", "copy", "frontend", "l1", "l2", "l3"]
    assert main(["--overwrite", "--frontend-dir", str(fe), str(train), str(fewer), str(tmp_path / "l4")]) == 1
    assert "--overwrite applies to --fit only" in capsys.readouterr().err


def test_a_front_end_without_a_fingerprint_is_not_refitted_silently(dirs, tmp_path, capsys):
    """A front end written before the fingerprint existed: applying it still works; --fit into it
    is the 'differs' error (what it was fitted on is unknown)."""
    root, train, test = dirs
    ali = root / "train" / "phone_alignments"
    fe = tmp_path / "frontend"
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(ali), str(tmp_path / "l1")]) == 0
    doc = yaml.safe_load((fe / "frontend.yaml").read_text(encoding="utf-8"))
    del doc["fitted_on"]
    (fe / "frontend.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    old = _files(fe)
    capsys.readouterr()
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(ali), str(tmp_path / "l2")]) == 1
    err = capsys.readouterr().err
    assert f"--frontend-dir {fe}: holds a label front end that does not record what it was fitted on" in err
    assert "use --overwrite to refit" in err
    assert _files(fe) == old
    assert main(["--frontend-dir", str(fe), str(test), str(root / "test" / "phone_alignments"),
                 str(tmp_path / "l3")]) == 0


def test_outputs_overlapping_the_inputs_are_refused(dirs, tmp_path, capsys):
    root, train, _ = dirs
    ali = root / "train" / "phone_alignments"
    before = _files(train)
    for out, fe, msg in [
        (train, tmp_path / "fe", f"OUT_DIR {train} is DATA_DIR {train}"),
        (tmp_path / "o", tmp_path / "o" / "fe", f"OUT_DIR {tmp_path / 'o'} contains --frontend-dir"),
        (tmp_path / "o", train / "fe", f"--frontend-dir {train / 'fe'} lies inside DATA_DIR {train}"),
    ]:
        assert main(["--fit", "--frontend-dir", str(fe), str(train), str(ali), str(out)]) == 1
        assert msg in capsys.readouterr().err
    assert _files(train) == before
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "ali").mkdir()
    (tmp_path / "ali" / "phone_alignments").write_bytes(ali.read_bytes())
    assert main(["--fit", "--frontend-dir", str(tmp_path / "fe"), str(train),
                 str(tmp_path / "ali" / "phone_alignments"), str(tmp_path / "ali")]) == 1
    assert f"OUT_DIR {tmp_path / 'ali'} contains ALIGNMENTS" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "ali").iterdir()] == ["phone_alignments"]


def test_a_refit_that_fails_on_an_utterance_keeps_the_front_end(dirs, tmp_path, capsys):
    """--overwrite replaces the front end only once every label has been computed."""
    root, train, _ = dirs
    ali = root / "train" / "phone_alignments"
    fe = tmp_path / "frontend"
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(ali), str(tmp_path / "l1")]) == 0
    fitted = _files(fe)
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in train.iterdir():
        if f.is_file():
            (bad / f.name).write_bytes(f.read_bytes())
    frames = read_table(train / "utt2num_frames")
    write_table(bad / "utt2num_frames", {**frames, "spk_b": int(frames["spk_b"]) + 5})
    assert main(["--fit", "--overwrite", "--frontend-dir", str(fe), str(bad), str(ali), str(tmp_path / "l2")]) == 1
    assert "utterance 'spk_b'" in capsys.readouterr().err
    assert _files(fe) == fitted and not (tmp_path / "l2").exists()
