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


def _two_feature_dirs(tmp_path, matrix, feats_yaml, frame_shift):
    """``[<tmp>/ref, <tmp>/hyp]``, each a feature dir of utterances u1 and u2: feats.scp + raw.1.ark holding
    ``matrix()`` (called once per utterance, ref's first), feats.yaml and frame_shift with the given text."""
    dirs = []
    for name in ("ref", "hyp"):
        d = tmp_path / name
        d.mkdir()
        with kaldiio.WriteHelper(f"ark,scp:{d / 'raw.1.ark'},{d / 'feats.scp'}") as w:
            for utt in ("u1", "u2"):
                w(utt, matrix())
        (d / "feats.yaml").write_text(feats_yaml)
        (d / "frame_shift").write_text(frame_shift)
        dirs.append(d)
    return dirs


@pytest.fixture
def feats(tmp_path):
    """Two feature dirs (feats.scp + ark, feats.yaml, frame_shift) of two utterances."""
    return _two_feature_dirs(tmp_path, lambda: np.ones((5, 3), dtype=np.float32),
                             "type: world\nsample_rate: 16000\n", "0.01\n")


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


def _world_dirs(tmp_path):
    """REF and HYP as score-mcd reads them: 9-column WORLD features (mcep_dim 6, lf0, vuv, bap), feats.yaml,
    frame_shift."""
    rng = np.random.default_rng(0)
    return _two_feature_dirs(
        tmp_path,
        lambda: np.column_stack([rng.normal(size=(20, 6)), np.log(rng.uniform(90, 250, 20)),
                                 rng.uniform(size=20) > 0.3, rng.normal(size=20)]).astype(np.float32),
        "type: world\nsample_rate: 16000\nmcep_dim: 6\nframe_period: 5.0\n", "0.005\n")


def test_log_files_never_append_to_an_input(tmp_path, capsys):
    """Issue 38 case 3: --log-file was checked against nothing: score-mcd --log-file data/wr/feats.scp, score-abx
    --log-file abx.item and split-corpus --log-file data/lf/text appended log lines to what they read (exit 0).
    The log file is an output like --json (check_output_files), checked before it is opened."""
    from speechkit.bin import split_corpus

    ref, hyp = _world_dirs(tmp_path)
    item = tmp_path / "abx.item"
    item.write_text("#file onset offset #phone prev-phone next-phone speaker\nu1 0 0.05 a # b s1\n")
    data = tmp_path / "lf"
    data.mkdir()
    for name, lines in (("wav.scp", "a_1 x.wav\na_2 y.wav\nb_1 z.wav\nb_2 w.wav\n"),
                        ("text", "a_1 one\na_2 two\nb_1 three\nb_2 four\n"),
                        ("utt2spk", "a_1 a\na_2 a\nb_1 b\nb_2 b\n"), ("spk2utt", "a a_1 a_2\nb b_1 b_2\n")):
        (data / name).write_text(lines)
    before = _snapshot(tmp_path)
    for main, argv, log, msg in (
            (score_mcd.main, [ref, hyp], ref / "feats.scp", f"would replace feats.scp of REF_DIR {ref}"),
            (score_mcd.main, [ref, hyp, "--json", tmp_path / "m.json"], tmp_path / "m.json", "is --json"),
            (score_mcd.main, [ref, hyp], ref / "raw.1.ark", "is a feature file of"),
            (score_abx.main, [ref, item], item, "is ITEM_FILE"),
            (score_bitrate.main, [ref], ref / "frame_shift", "would replace frame_shift of FEATURE_DIR"),
            (split_corpus.main, [data, tmp_path / "parts", "--dev", "0.25", "--test", "0.25"], data / "text",
             f"would replace text of DATA {data}")):
        assert main([str(a) for a in argv] + ["--log-file", str(log)]) == 1, (argv, log)
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: --log-file {log} " in err and msg in err, err
    assert _snapshot(tmp_path) == before


def test_score_mcd_given_scp_files_protects_the_dirs_layout_files(tmp_path, capsys):
    """Issue 38 case 4: with REF/HYP given as scp files, --json hyp/feats.yaml (the layout file read from the scp's
    dir) and --per-utt ref/frame_shift were written over, exit 0."""
    ref, hyp = _world_dirs(tmp_path)
    assert score_mcd.main([str(ref / "feats.scp"), str(hyp / "feats.scp")]) == 0  # scores as they are
    before = _snapshot(ref, hyp)
    for opt, out in (("--json", hyp / "feats.yaml"), ("--per-utt", ref / "frame_shift"), ("--json", hyp / "feats.scp")):
        assert score_mcd.main([str(ref / "feats.scp"), str(hyp / "feats.scp"), opt, str(out)]) == 1
        err = capsys.readouterr().err
        assert f"{opt} {out} " in err and ("would replace" in err or " is " in err), err
    assert _snapshot(ref, hyp) == before
