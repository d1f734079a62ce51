"""Issue 38 case 7: re-running split-corpus or copy-data-dir into a dir that was since given features
and CMVN stats deleted feats.scp, utt2num_frames, cmvn.scp and cmvn_global.ark with no backup and no
log line ("stale extras" removal took the user's later work for stale). Now the one rule of
:func:`speechkit.data.datadir.update_data_dir`: later work describing the same utterances and audio
is kept, and whatever is replaced or removed is first backed up to DIR/.backup/N and logged."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speechkit.bin import copy_data_dir as copy_cli
from speechkit.bin import split_corpus as split_cli
from speechkit.bin import subset_data_dir as subset_cli
from speechkit.data.audio import write_wav
from speechkit.data.datadir import DataDir
from speechkit.data.speed_perturb import perturb_data_dir_speed

#: What compute-feats and compute-cmvn-stats add to a data dir (their content does not matter here).
LATER = {"feats.scp": b"later features\n", "utt2num_frames": b"later frames\n", "cmvn.scp": b"later cmvn\n",
         "cmvn_global.ark": b"later global stats", "feats.yaml": b"type: mfcc\n", "frame_shift": b"0.01\n"}


def _dir(path: Path, spks=("spkA", "spkB", "spkC", "spkD", "spkE"), n: int = 4) -> Path:
    utts = {f"{s}_u{i}": s for s in spks for i in range(n)}
    DataDir(wav_scp={u: f"/corpus/{u}.wav" for u in utts}, utt2spk=utts, text={u: "a b" for u in utts}).write(path)
    return path


def _add_later_work(d: Path) -> None:
    for name, data in LATER.items():
        (d / name).write_bytes(data)


def _later_files(d: Path) -> dict[str, bytes]:
    return {n: (d / n).read_bytes() for n in LATER if (d / n).is_file()}


def test_identical_split_corpus_keeps_the_parts_features_and_cmvn(tmp_path):
    src = _dir(tmp_path / "all")
    argv = [str(src), str(tmp_path / "sp"), "--dev", "0.2", "--test", "0.2", "--by-speaker", "--seed", "1"]
    assert split_cli.main(argv) == 0
    for part in ("train", "dev", "test"):
        _add_later_work(tmp_path / "sp" / part)
    assert split_cli.main(argv) == 0
    for part in ("train", "dev", "test"):
        d = tmp_path / "sp" / part
        assert _later_files(d) == LATER, part
        assert not (d / ".backup").exists(), part            # nothing replaced, nothing to back up


def test_another_split_backs_up_the_later_work_before_removing_it(tmp_path, capsys):
    src = _dir(tmp_path / "all")
    argv = [str(src), str(tmp_path / "sp"), "--dev", "0.2", "--test", "0.2", "--seed", "1"]
    assert split_cli.main(argv) == 0
    train = tmp_path / "sp" / "train"
    _add_later_work(train)
    old_utt2spk = (train / "utt2spk").read_bytes()
    argv[-1] = "2"
    capsys.readouterr()
    assert split_cli.main(argv) == 0
    assert _later_files(train) == {}                          # stale now: other utterances
    backup = train / ".backup" / "1"
    assert _later_files(backup) == LATER                      # ... but not lost
    assert (backup / "utt2spk").read_bytes() == old_utt2spk   # the whole previous dir, consistent
    said = [line for line in capsys.readouterr().err.splitlines() if "WARNING" in line and f"{train}:" in line]
    assert len(said) == 1 and "feats.scp" in said[0] and "cmvn_global.ark" in said[0] and str(backup) in said[0]


def test_copy_into_a_dir_given_features_since(tmp_path, capsys):
    src = _dir(tmp_path / "src")
    dest = tmp_path / "dest"
    assert copy_cli.main([str(src), str(dest)]) == 0
    _add_later_work(dest)
    assert copy_cli.main([str(src), str(dest)]) == 0          # the same source again: nothing removed
    assert _later_files(dest) == LATER and not (dest / ".backup").exists()
    (src / "text").write_text("".join(f"{u} c d\n" for u in DataDir.load(src).utts))
    assert copy_cli.main([str(src), str(dest)]) == 0          # other transcripts, same audio: features kept
    assert _later_files(dest) == LATER
    assert (dest / ".backup" / "1" / "text").read_text().endswith(" a b\n")  # the replaced text is backed up
    capsys.readouterr()
    assert subset_cli.main(["--first", "3", str(src), str(dest)]) == 0  # other utterances: removed, backed up
    assert _later_files(dest) == {} and _later_files(dest / ".backup" / "2") == LATER
    assert any("removed feats.scp utt2num_frames cmvn.scp" in line and f"{dest}/.backup/2" in line
               for line in capsys.readouterr().err.splitlines())


@pytest.mark.parametrize("same", [True, False])
def test_speed_perturbation_into_a_dir_given_features_since(tmp_path, same):
    utts = {f"spkA_u{i}": "spkA" for i in range(3)}
    for u in utts:
        write_wav(tmp_path / f"{u}.wav", np.zeros(1600, dtype=np.float32), 16000)
    src = DataDir(wav_scp={u: str(tmp_path / f"{u}.wav") for u in utts}, utt2spk=utts).write(tmp_path / "src")
    dest = tmp_path / "sp"
    perturb_data_dir_speed(0.9, src, dest)
    _add_later_work(dest)
    perturb_data_dir_speed(0.9 if same else 1.1, src, dest)
    if same:
        assert _later_files(dest) == LATER and not (dest / ".backup").exists()
    else:
        assert _later_files(dest) == {} and _later_files(dest / ".backup" / "1") == LATER
