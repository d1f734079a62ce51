"""speechkit.inference.frame_labels: make_labels (the library form of speechkit-make-labels), fit_record,
describe_change, on a hand-made phone data dir (no G2P needed)."""
from __future__ import annotations

import logging

import kaldiio
import pytest

from speechkit.inference.frame_labels import FIT_FILES, describe_change, fit_record, make_labels
from speechkit.utils.cli import error_message
from speechkit.utils.fileio import write_table

PHONES = {"u1": "b a t", "u2": "t a b a"}


def _data(root, frames=40, frame_shift="0.005"):
    d = root / "phn"
    d.mkdir(parents=True)
    write_table(d / "text", PHONES)
    write_table(d / "utt2spk", {u: "spk" for u in PHONES})
    write_table(d / "spk2utt", {"spk": " ".join(sorted(PHONES))})
    write_table(d / "utt2num_frames", {u: frames for u in PHONES})
    write_table(d / "phone_info", {u: " ".join(["1:0:0"] * len(p.split())) for u, p in PHONES.items()})
    if frame_shift:
        (d / "frame_shift").write_text(frame_shift + "\n")
    rows = []
    for u, p in PHONES.items():
        ph = p.split()
        step = (frames * 0.005 - 0.04) / len(ph)
        rows.append(f"{u} 0.000 0.020 sil")
        rows += [f"{u} {0.02 + i * step:.3f} {0.02 + (i + 1) * step:.3f} {x}" for i, x in enumerate(ph)]
        rows.append(f"{u} {frames * 0.005 - 0.02:.3f} {frames * 0.005:.3f} sil")
    (root / "ali").write_text("\n".join(rows) + "\n")
    return d, root / "ali"


def test_fit_load_and_rerun(tmp_path, caplog):
    data, ali = _data(tmp_path)
    fe, log = tmp_path / "fe", logging.getLogger("test-labels")
    with caplog.at_level(logging.INFO):
        res = make_labels(data, ali, tmp_path / "out", fe, fit=True, log=log)
    assert res == {"utterances": 2, "frames": 80, "dim": res["dim"], "skipped": 0, "frontend": "fitted"}
    assert any(r.name == "test-labels" and r.message.startswith("fitted the label front end") for r in caplog.records)
    mats = dict(kaldiio.load_scp(str(tmp_path / "out" / "labels.scp")))
    assert sorted(mats) == ["u1", "u2"] and mats["u1"].shape == (40, res["dim"])
    assert int((tmp_path / "out" / "label_dim").read_text()) == res["dim"]
    assert make_labels(data, ali, tmp_path / "out", fe, fit=True)["frontend"] == "up to date"
    assert make_labels(data, ali, tmp_path / "out2", fe)["frontend"] == "loaded"
    # other content: refused (naming what changed) unless overwrite
    write_table(data / "utt2num_frames", {u: 41 for u in PHONES})
    with pytest.raises(ValueError, match=r"data_dir/utt2num_frames differs.*use overwrite") as e:
        make_labels(data, ali, tmp_path / "out", fe, fit=True)
    spelled = error_message(e.value, {"frontend_dir": "--frontend-dir", "overwrite": "--overwrite",
                                      "data_dir": "DATA_DIR"})  # as speechkit-make-labels' parser spells them
    assert spelled.startswith(f"--frontend-dir {fe}: ") and "DATA_DIR/utt2num_frames differs" in spelled
    assert spelled.endswith("use --overwrite to refit (the old one is kept in " f"{fe}/.backup/N) or another --frontend-dir")
    assert make_labels(data, ali, tmp_path / "out", fe, fit=True, overwrite=True)["frontend"] == "refitted"
    assert (fe / ".backup" / "1" / "frontend.yaml").is_file()


def test_refusals_and_a_missing_frame_shift(tmp_path, caplog):
    data, ali = _data(tmp_path, frame_shift=None)
    with pytest.raises(ValueError, match="^overwrite applies to fit only"):
        make_labels(data, ali, tmp_path / "out", tmp_path / "fe", overwrite=True)
    with caplog.at_level(logging.WARNING):
        make_labels(data, ali, tmp_path / "out", tmp_path / "fe", fit=True)
    assert "frame_shift missing; assuming 0.005 s (WORLD)" in caplog.text
    (data / "phone_info").unlink()
    with pytest.raises(FileNotFoundError, match="phone_info: missing"):
        make_labels(data, ali, tmp_path / "out", tmp_path / "fe")


def test_fit_record_and_describe_change(tmp_path):
    data, ali = _data(tmp_path)
    rec = fit_record(data, ali, 0.005, 2, {"a", "b", "t"})
    assert set(rec["files"]) == set(FIT_FILES) | {"ALIGNMENTS"} and rec["phones"] == 4  # sil counted
    assert fit_record(data, ali, 0.005, 2, {"a"})["fingerprint"] == rec["fingerprint"]  # content, not counts
    other = fit_record(data, ali, 0.01, 2, {"a", "b", "t"})
    assert other["fingerprint"] != rec["fingerprint"]
    msg = describe_change(tmp_path / "fe", rec, other)
    assert "frame_shift 0.005 -> 0.01" in msg and "use `overwrite`" in msg  # a reference, spelled by the CLI
    assert "older speechkit-make-labels" in describe_change(tmp_path / "fe", None, other)
