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
    assert main(["--fit", "--frontend-dir", str(fe), str(train), str(root / "train" / "phone_alignments"),
                 str(train)]) == 0
    out = capsys.readouterr().out
    doc = yaml.safe_load((fe / "frontend.yaml").read_text(encoding="utf-8"))
    dim = int((train / "label_dim").read_text())
    assert doc["dim"] == dim and f"label dim {dim}" in out
    n_phones = len((fe / "phones.txt").read_text(encoding="utf-8").splitlines())
    assert dim == 5 * (n_phones + 1) + 22 + 18 + 2
    labels = read_labels(train)
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
