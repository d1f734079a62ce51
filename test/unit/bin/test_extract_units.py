"""speechkit-extract-units: ZeroSpeech 2019 layout, codebook / one-hot / aux files against the model, errors,
atomic output."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from speechkit.bin.extract_units import main
from speechkit.features.io import load_features
from speechkit.scoring.bitrate import bitrate
from speechkit.scoring.feature_dir import FeatureDir
from speechkit.tasks import load_model
from speechkit.utils.fileio import read_table

import zs_helpers as zs  # test/unit/tasks/zs_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("extract_units")
    train = zs.write_feats_dir(root / "train", zs.two_speaker_lengths(4), seed=1)
    zs.train("vqvae", zs.vqvae_overrides(train, None, **{"trainer.best_metric": "train/loss"}), root / "vq")
    test = zs.write_feats_dir(root / "test", {"s7_a": 17, "s7_b": 4, "s8_a": 30, "s8_b": 9}, seed=5)
    return {"root": root, "exp": root / "vq", "test": test}


def run(args) -> int:
    return main([str(a) for a in args])


def test_onehot_layout_matches_the_model(setup, tmp_path):
    out = tmp_path / "units"
    assert run(["--model-dir", setup["exp"], "--unit-format", "onehot", setup["test"], out]) == 0
    model, cfg = load_model(setup["exp"])
    utts, feats = load_features(setup["test"], "speaker")  # what the model saw: per-speaker CMVN
    codes = read_table(out / "codes")
    assert sorted(codes) == utts
    for utt, x in zip(utts, feats):
        with torch.no_grad():
            ref, _, _, n = model.encode(x[None], torch.tensor([len(x)]))
        ref = ref[0, : int(n[0])].tolist()
        assert len(ref) == -(-len(x) // zs.STRIDE)  # ceil(T / stride) code frames
        assert [int(c) for c in codes[utt].split()] == ref
        m = np.loadtxt(out / f"{utt}.txt", ndmin=2)
        assert m.shape == (len(ref), 8)
        assert set(np.unique(m)) <= {0.0, 1.0} and (m.sum(1) == 1).all()
        assert m.argmax(1).tolist() == ref
    assert (out / "frame_shift").read_text().strip() == "0.04"
    info = yaml.safe_load((out / "units.yaml").read_text())
    assert info["kind"] == "onehot" and info["codebook_size"] == 8 and info["stride"] == 4 and info["num_utts"] == 4
    # the scoring tools read the directory as four utterances (the 'codes' table is not a .txt file)
    assert FeatureDir(out).utts == utts


def test_default_writes_codebook_vectors_at_the_same_bitrate(setup, tmp_path):
    """The default form: each frame is e_k of its code k (ZeroSpeech 2019 VQ submissions); the
    codes file is unchanged and the bitrate equals the one-hot form's (one symbol per code)."""
    assert run(["--model-dir", setup["exp"], setup["test"], tmp_path / "cb"]) == 0
    assert run(["--model-dir", setup["exp"], "--unit-format", "onehot", setup["test"], tmp_path / "oh"]) == 0
    model, _ = load_model(setup["exp"])
    codebook = model.quantizer.codebook.numpy()
    codes = read_table(tmp_path / "cb" / "codes")
    assert (tmp_path / "cb" / "codes").read_bytes() == (tmp_path / "oh" / "codes").read_bytes()
    for utt, line in codes.items():
        c = [int(k) for k in line.split()]
        m = np.loadtxt(tmp_path / "cb" / f"{utt}.txt", ndmin=2)
        assert m.shape == (len(c), codebook.shape[1])
        np.testing.assert_allclose(m, codebook[c], rtol=1e-6, atol=1e-7)
    assert yaml.safe_load((tmp_path / "cb" / "units.yaml").read_text())["kind"] == "codebook"
    durs = {u: 1.0 for u in codes}
    rates = []
    for form in ("cb", "oh"):
        fd = FeatureDir(tmp_path / form)
        feats = fd.load_all(fd.utts)
        rates.append(bitrate(feats, durs).bitrate)
    assert rates[0] == pytest.approx(rates[1], abs=1e-9) and rates[0] > 0


def test_aux_writes_the_continuous_z(setup, tmp_path):
    out = tmp_path / "aux"
    assert run(["--model-dir", setup["exp"], "--aux", setup["test"], out]) == 0
    model, _ = load_model(setup["exp"])
    utts, feats = load_features(setup["test"], "speaker")
    x = feats[utts.index("s8_a")]
    with torch.no_grad():
        _, z, _, n = model.encode(x[None], torch.tensor([len(x)]))
    np.testing.assert_allclose(np.loadtxt(out / "s8_a.txt", ndmin=2), z[0, : int(n[0])].numpy(), rtol=1e-4, atol=1e-5)


def test_parallel_jobs_give_the_same_files(setup, tmp_path):
    assert run(["--model-dir", setup["exp"], setup["test"], tmp_path / "a"]) == 0
    assert run(["--model-dir", setup["exp"], "--nj", "2", "--batch-frames", "20", setup["test"], tmp_path / "b"]) == 0
    for name in ("codes", "frame_shift", "s7_a.txt", "s8_a.txt", "s8_b.txt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_bad_input_names_the_utterance_and_keeps_earlier_output(setup, tmp_path, capsys):
    out = tmp_path / "units"
    assert run(["--model-dir", setup["exp"], setup["test"], out]) == 0
    before = (out / "codes").read_bytes()
    short = zs.write_feats_dir(tmp_path / "short", {"s7_a": 17, "s7_tiny": 3}, seed=3)
    assert run(["--model-dir", setup["exp"], short, out]) == 1
    err = capsys.readouterr().err
    assert "'s7_tiny' has 3 frames, shorter than the total stride 4 (model.stride)" in err
    assert (out / "codes").read_bytes() == before  # the failed run left the finished output alone
    assert not list(tmp_path.glob(".units.*"))  # and no temporary directory behind
    bad = np.ones((12, zs.DIM), np.float32)
    bad[5, 0] = np.inf
    nan_dir = zs.write_feats_dir(tmp_path / "nan", {"s7_a": 12, "s7_inf": 12}, cmvn=False,
                                 feats={"s7_a": np.ones((12, zs.DIM), np.float32) + np.arange(12)[:, None], "s7_inf": bad})
    (nan_dir / "cmvn.scp").write_text((setup["test"] / "cmvn.scp").read_text())  # s7's stats
    assert run(["--model-dir", setup["exp"], nan_dir, tmp_path / "x"]) == 1
    assert "'s7_inf': NaN or Inf in frame 5" in capsys.readouterr().err
    assert run(["--model-dir", tmp_path / "nowhere", setup["test"], tmp_path / "y"]) == 1
    assert "nowhere: no such checkpoint" in capsys.readouterr().err


def test_feature_kind_must_match_training(setup, tmp_path, capsys):
    d = zs.write_feats_dir(tmp_path / "d", {"s7_a": 17}, seed=1, conf={"type": "logmel", "n_mels": 6})
    (setup["root"] / "train" / "feats.yaml").write_text(yaml.safe_dump({"type": "mfcc", "n_mfcc": 2}))
    try:
        assert run(["--model-dir", setup["exp"], d, tmp_path / "u"]) == 1
        assert "features differ from the training set's" in capsys.readouterr().err
    finally:
        (setup["root"] / "train" / "feats.yaml").unlink()


def test_windowed_encoding_against_window_by_window_reference(setup, tmp_path):
    """--window: every code frame is the one its nearest-centred containing window gives when that
    window is encoded alone (brute force), a window covering the utterance is the whole-utterance
    encoding, and --nj gives the same files."""
    from speechkit.models.vqvae import encode_windowed, window_starts

    model, cfg = load_model(setup["exp"])
    model.eval()
    s = cfg.model.stride
    utts, feats = load_features(setup["test"], "speaker")
    x = feats[utts.index("s8_a")]  # 30 frames
    assert window_starts(30, 8, 4) == [0, 4, 8, 12, 16, 20, 24] and window_starts(5, 8, 4) == [0]
    for window, hop in ((8, 4), (12, 8), (8, 8)):
        codes, z = encode_windowed(model, x, window, hop)
        assert len(codes) == -(-len(x) // s)
        starts = window_starts(len(x), window, hop)
        for t in range(len(codes)):
            mid = (t * s + min((t + 1) * s, len(x))) / 2
            best = min((a for a in starts if a <= mid < min(a + window, len(x))),
                       key=lambda a: abs(mid - (a + min(window, len(x) - a) / 2)))
            piece = x[best: best + window]
            with torch.no_grad():
                c, ze, _, _ = model.encode(piece[None], torch.tensor([len(piece)]))
            assert int(c[0, t - best // s]) == int(codes[t])
            torch.testing.assert_close(ze[0, t - best // s], z[t])
    whole_c, whole_z, _, n = model.encode(x[None], torch.tensor([len(x)]))
    codes, z = encode_windowed(model, x, 32)
    assert codes.tolist() == whole_c[0, : int(n[0])].tolist()
    with pytest.raises(ValueError, match="multiples of the stride"):
        encode_windowed(model, x, 6 if s == 4 else 3 * s + 1, None)
    a, b = tmp_path / "w1", tmp_path / "w2"
    assert run(["--model-dir", setup["exp"], "--window", 8, setup["test"], a]) == 0
    assert run(["--model-dir", setup["exp"], "--window", 8, "--nj", 2, setup["test"], b]) == 0
    assert (a / "codes").read_text() == (b / "codes").read_text()
    assert yaml.safe_load((a / "units.yaml").read_text())["window"] == 8
    assert run(["--model-dir", setup["exp"], "--window", 8, "--hop", 12, setup["test"], tmp_path / "bad"]) == 1
    # the default: the model's training crop (whole utterances when it was trained without crops)
    assert run(["--model-dir", setup["exp"], setup["test"], tmp_path / "d"]) == 0
    assert yaml.safe_load((tmp_path / "d" / "units.yaml").read_text())["window"] == \
        int(cfg.data.crop_frames or 0) // s * s
    assert run(["--model-dir", setup["exp"], "--window", 0, setup["test"], tmp_path / "w0"]) == 0
    assert yaml.safe_load((tmp_path / "w0" / "units.yaml").read_text())["window"] == 0


def test_phases_against_shifted_input_reference(setup, tmp_path):
    """--phases: row r of the stitched z is frame r // P of the encoding of the input shifted by the
    phase's offset (edge frames repeated), built here independently by index clamping; P = 1 is the
    plain encoding; the CLI writes stride / P frame shifts, needs --aux and a divisor of the stride."""
    from speechkit.models.vqvae import encode_phases, encode_windowed, phase_offsets

    model, cfg = load_model(setup["exp"])
    model.eval()
    s = cfg.model.stride
    assert s == 4
    assert phase_offsets(4, 4) == [-1, 0, 1, 2] and phase_offsets(4, 2) == [-1, 1] and phase_offsets(4, 1) == [0]
    utts, feats = load_features(setup["test"], "speaker")
    for utt in ("s8_a", "s7_a", "s7_b"):  # 30, 17, 4 frames
        x = feats[utts.index(utt)]
        T = len(x)
        for P, window in ((4, 0), (2, 0), (4, 8)):
            z = encode_phases(model, x, P, window)
            step = s // P
            assert z.shape == (-(-T // step), cfg.model.codebook_dim)
            for r in range(len(z)):
                p, i = r % P, r // P
                a = phase_offsets(s, P)[p]
                idx = torch.arange(a, max(T, a + s)).clamp(0, T - 1)  # the shifted input, edges repeated
                xs = x[idx]
                if window:
                    _, ref = encode_windowed(model, xs, window)
                else:
                    with torch.no_grad():
                        ref = model.encode(xs[None], torch.tensor([len(xs)]))[1][0]
                torch.testing.assert_close(z[r], ref[i])
        _, z1 = encode_windowed(model, x, 8)
        torch.testing.assert_close(encode_phases(model, x, 1, 8), z1)
    with pytest.raises(ValueError, match="must divide"):
        encode_phases(model, feats[0], 3)
    out = tmp_path / "z10"
    assert run(["--model-dir", setup["exp"], "--aux", "--phases", "all", "--nj", 2, setup["test"], out]) == 0
    assert float((out / "frame_shift").read_text()) == pytest.approx(0.01)
    info = yaml.safe_load((out / "units.yaml").read_text())
    assert info["phases"] == 4 and info["kind"] == "aux"
    x = feats[utts.index("s8_a")]
    z = np.loadtxt(out / "s8_a.txt", ndmin=2)
    np.testing.assert_allclose(z, encode_phases(model, x, 4, info["window"]).numpy(), rtol=1e-5, atol=1e-6)
    assert len(read_table(out / "codes")["s8_a"].split()) == len(z) == 30
    assert run(["--model-dir", setup["exp"], "--aux", "--phases", 2, setup["test"], tmp_path / "z20"]) == 0
    assert float((tmp_path / "z20" / "frame_shift").read_text()) == pytest.approx(0.02)
    for bad in (["--phases", 2], ["--aux", "--phases", 3], ["--aux", "--phases", "x"]):
        assert run(["--model-dir", setup["exp"], *bad, setup["test"], tmp_path / "bad"]) == 1
        assert not (tmp_path / "bad").exists()


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_output_onto_the_data_dir_or_the_model_is_refused_before_any_work(setup, tmp_path, capsys):
    """Issue 23 item 1: OUT_DIR = DATA_DIR deleted the data dir, OUT_DIR = --model-dir the trained
    model; both are refused by name and left byte for byte as they were."""
    import shutil

    data = zs.write_feats_dir(tmp_path / "data", {"s7_a": 17, "s8_a": 30}, seed=5)
    exp = tmp_path / "vq"
    shutil.copytree(setup["exp"], exp)
    before_data, before_exp = _tree(data), _tree(exp)
    assert run(["--model-dir", exp, data, data]) == 1
    err = capsys.readouterr().err
    assert f"OUT_DIR {data} is DATA_DIR {data}" in err and "choose another output dir" in err
    assert run(["--model-dir", exp, data, exp]) == 1
    assert f"OUT_DIR {exp} is --model-dir {exp}" in capsys.readouterr().err
    assert run(["--model-dir", exp, data, data / "units"]) == 1
    assert f"OUT_DIR {data / 'units'} lies inside DATA_DIR {data}" in capsys.readouterr().err
    assert run(["--model-dir", exp, data, tmp_path]) == 1  # contains both
    assert "contains" in capsys.readouterr().err
    assert _tree(data) == before_data and _tree(exp) == before_exp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "vq"]
    # inside the experiment dir is ESPnet's layout, and allowed
    assert run(["--model-dir", exp, data, exp / "units" / "test"]) == 0
    assert (exp / "units" / "test" / "codes").is_file()


def test_an_existing_file_as_out_dir_is_an_error_and_kept(setup, tmp_path, capsys):
    f = tmp_path / "units"
    f.write_text("keep me\n")
    assert run(["--model-dir", setup["exp"], setup["test"], f]) == 1
    assert f"cannot write {f}: Not a directory" in capsys.readouterr().err
    assert f.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["units"]  # no hidden .units.old-PID


def test_a_rerun_replaces_the_output_whole_and_keeps_the_previous_one(setup, tmp_path):
    out = tmp_path / "units"
    assert run(["--model-dir", setup["exp"], "--unit-format", "onehot", setup["test"], out]) == 0
    first = _tree(out)
    (out / "stale.txt").write_text("1 0\n")  # not an utterance of this run: must not stay in OUT_DIR
    assert run(["--model-dir", setup["exp"], setup["test"], out]) == 0
    assert not (out / "stale.txt").exists()
    assert yaml.safe_load((out / "units.yaml").read_text())["kind"] == "codebook"
    assert _tree(out / ".backup" / "1") == {**first, "stale.txt": b"1 0\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["units"]


@pytest.mark.parametrize("opts, msg", [
    (["--hop", 0], "--hop must be >= 1 input frame, got 0"),
    (["--hop", -4], "--hop must be >= 1 input frame, got -4"),
    (["--window", -8], "--window must be >= 0 (0 = whole utterances), got -8"),
    (["--window", 0, "--hop", 4], "--hop 4: only with windows"),
    (["--nj", 0], "--nj must be >= 1, got 0"),
    (["--batch-frames", 0], "--batch-frames must be >= 1, got 0"),
    (["--aux", "--phases", 0], "--phases must be >= 1 (or 'all'), got 0"),
    (["--aux", "--phases", 3], "--phases 3: phases must divide the model's stride 4, got 3"),
])
def test_out_of_range_options_are_rejected_by_name(setup, tmp_path, capsys, opts, msg):
    """Issue 23 item 18: --hop 0 was taken as 'the default hop'."""
    out = tmp_path / "units"
    assert run(["--model-dir", setup["exp"], *opts, setup["test"], out]) == 1
    assert msg in capsys.readouterr().err
    assert not out.exists()


def test_an_out_dir_holding_the_cmvn_ark_a_data_dir_reads_is_refused(setup, tmp_path, capsys):
    """Issue 38 case 8: OUT_DIR cmvnX held the per-speaker CMVN ark that DATA_DIR/cmvn.scp reads; the ark was moved
    into cmvnX/.backup/1 and cmvn.scp dangled (validate-data-dir still exited 0). Refused before any work."""
    import shutil

    from speechkit.features.cmvn_stats import compute_cmvn_stats

    data = tmp_path / "abx"
    shutil.copytree(setup["test"], data)
    compute_cmvn_stats(data, tmp_path / "cmvnX", per_speaker=True)
    ark = next((tmp_path / "cmvnX").glob("*.ark"))
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    assert run(["--model-dir", setup["exp"], data, tmp_path / "cmvnX"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"speechkit-extract-units: error: OUT_DIR {tmp_path / 'cmvnX'} contains a file {data / 'cmvn.scp'} "
                   f"reads {ark}: outputs never overlap inputs (replacing it would delete or mix with what is read); "
                   "choose another output dir")
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before


def test_help_is_a_help_text(capsys):
    """--help ran past 60 lines (95) and quoted results (ABX figures); those are the recipe README's."""
    import re

    from speechkit.bin.extract_units import build_parser

    text = build_parser().format_help()
    assert len(text.splitlines()) <= 60
    assert not re.search(r"\d+\.\d+ %", text)  # no measurement quoted
    for opt in ("--unit-format", "--aux", "--phases", "--window", "--hop", "--nj", "frame_shift", "codes", "units.yaml"):
        assert opt in text
