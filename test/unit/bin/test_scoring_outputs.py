"""The scoring tools' output files never overwrite what they read (speechkit.utils.outputs.check_output_files):
an output onto an input, onto a table or ark of an input dir, or onto another output is refused before any
work, naming the option and the input, and the inputs are left as they were."""
from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from speechkit.bin import make_abx_items, score_abx, score_bitrate, score_mcd, score_wer


def _snapshot(*dirs):
    return {p: p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def feats(tmp_path):
    """Two feature dirs (feats.scp + ark, feats.yaml, frame_shift) of two utterances."""
    dirs = []
    for name in ("ref", "hyp"):
        d = tmp_path / name
        d.mkdir()
        with kaldiio.WriteHelper(f"ark,scp:{d / 'raw.1.ark'},{d / 'feats.scp'}") as w:
            for utt in ("u1", "u2"):
                w(utt, np.ones((5, 3), dtype=np.float32))
        (d / "feats.yaml").write_text("type: world\nsample_rate: 16000\n")
        (d / "frame_shift").write_text("0.01\n")
        dirs.append(d)
    return dirs


def test_score_wer_outputs_onto_its_inputs_are_refused(tmp_path, capsys):
    ref, hyp = tmp_path / "ref", tmp_path / "hyp.trn"
    ref.write_text("u1 one two\n")
    hyp.write_text("u1 one\n")
    before = _snapshot(tmp_path)
    assert score_wer.main([str(ref), str(hyp), "--json", str(ref)]) == 1
    assert f"--json {ref} is REF" in capsys.readouterr().err
    # the sclite files go next to --json: hyp.trn there is HYP
    assert score_wer.main([str(ref), str(hyp), "--json", str(tmp_path / "wer.json")]) == 1
    assert f"the hyp.trn written next to --json {hyp} is HYP" in capsys.readouterr().err
    assert score_wer.main([str(ref), str(hyp), "--trn-dir", str(tmp_path)]) == 1
    assert f"--trn-dir's hyp.trn {hyp} is HYP" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before
    # elsewhere it scores; a re-run with its own JSON as the baseline must not write over it
    out = tmp_path / "out"
    assert score_wer.main([str(ref), str(hyp), "--json", str(out / "wer.json")]) == 0
    capsys.readouterr()
    assert score_wer.main([str(ref), str(hyp), "--json", str(out / "wer.json"),
                           "--baseline-json", str(out / "wer.json")]) == 1
    assert "is --baseline-json" in capsys.readouterr().err


def test_score_mcd_outputs_onto_its_input_dirs_are_refused(feats, capsys):
    ref, hyp = feats
    before = _snapshot(ref, hyp)
    for opt, out in (("--json", hyp / "feats.scp"), ("--per-utt", ref / "feats.yaml"), ("--json", hyp / "frame_shift")):
        assert score_mcd.main([str(ref), str(hyp), opt, str(out)]) == 1
        assert f"{opt} {out} would replace {out.name} of" in capsys.readouterr().err
    assert score_mcd.main([str(ref), str(hyp), "--json", str(ref / "raw.1.ark")]) == 1
    assert "is a feature file of" in capsys.readouterr().err
    assert score_mcd.main([str(ref), str(hyp), "--json", str(ref / "m.json"), "--per-utt", str(ref / "m.json")]) == 1
    assert f"--per-utt {ref / 'm.json'} is --json" in capsys.readouterr().err
    assert _snapshot(ref, hyp) == before


def test_score_bitrate_and_abx_outputs_onto_their_inputs_are_refused(feats, tmp_path, capsys):
    d, _ = feats
    item = tmp_path / "abx.item"
    item.write_text("#file onset offset #phone prev-phone next-phone speaker\nu1 0 0.05 a # b s1\n")
    before = _snapshot(d, tmp_path)
    assert score_bitrate.main([str(d), "--json", str(d / "feats.scp")]) == 1
    assert f"--json {d / 'feats.scp'} would replace feats.scp of FEATURE_DIR {d}" in capsys.readouterr().err
    assert score_abx.main([str(d), str(item), "--json", str(item)]) == 1
    assert f"--json {item} is ITEM_FILE" in capsys.readouterr().err
    assert score_abx.main([str(d), str(item), "--json", str(d)]) == 1
    assert f"--json {d} is FEATURE_DIR {d}" in capsys.readouterr().err
    assert _snapshot(d, tmp_path) == before
    # a new file in the feature dir is fine
    assert score_bitrate.main([str(d), "--json", str(d / "bitrate.json")]) == 0
    assert (d / "bitrate.json").is_file()


def test_make_abx_items_onto_a_table_of_the_data_dir_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "phone_alignments").write_text("s1_u1 0.0 0.1 a\ns1_u1 0.1 0.2 b\ns1_u1 0.2 0.3 c\n")
    (data / "utt2spk").write_text("s1_u1 s1\n")
    (data / "wav.scp").write_text("s1_u1 /x.wav\n")
    before = _snapshot(data)
    assert make_abx_items.main([str(data), str(data / "wav.scp")]) == 1
    assert f"OUT_ITEM {data / 'wav.scp'} would replace wav.scp of the data dir" in capsys.readouterr().err
    assert _snapshot(data) == before
