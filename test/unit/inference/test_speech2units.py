"""speechkit.inference.speech2units: the unit extractor of a tiny VQ-VAE against the files
speechkit-extract-units writes for the same utterances; its options, errors and the row writers."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from speechkit.bin.extract_units import build_parser, main
from speechkit.inference.speech2units import UnitExtractor, check_extraction_options, extract_units
from speechkit.utils.cli import error_message, parameter_flags
from speechkit.utils.fileio import read_table

import zs_helpers as zs  # test/unit/tasks/zs_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny VQ-VAE trained on crops of 8 frames (so the default is windows of 8, hop 4)."""
    root = tmp_path_factory.mktemp("units")
    train = zs.write_feats_dir(root / "train", zs.two_speaker_lengths(4), seed=1)
    zs.train("vqvae", zs.vqvae_overrides(train, None, **{"trainer.best_metric": "train/loss",
                                                         "data.crop_frames": 8}), root / "vq")
    test = zs.write_feats_dir(root / "test", {"s7_a": 17, "s7_b": 4, "s8_a": 30, "s8_b": 9}, seed=5)
    return {"root": root, "exp": root / "vq", "test": test}


def cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.mark.parametrize("opts, kwargs", [
    ([], {}),                                                  # the training crop: windows of 8, hop 4
    (["--window", 0, "--unit-format", "onehot"], {"window": 0, "unit_format": "onehot"}),  # whole, batched
    (["--window", 12, "--hop", 4], {"window": 12, "hop": 4}),
])
def test_codes_equal_what_the_cli_writes(setup, tmp_path, opts, kwargs):
    out = tmp_path / "units"
    assert cli("--model-dir", setup["exp"], *opts, setup["test"], out) == 0
    ex = UnitExtractor.from_pretrained(setup["exp"], **kwargs)
    info = yaml.safe_load((out / "units.yaml").read_text())
    assert (ex.window, ex.hop, ex.phases, ex.stride) == (info["window"], info["hop"], 1, 4)
    utts, feats = ex.load_features(setup["test"])
    written = read_table(out / "codes")
    assert sorted(written) == utts
    for utt, x in zip(utts, feats):
        codes, z = ex(x)
        assert codes.shape == (-(-len(x) // 4),) and z.shape == (len(codes), 4)  # ceil(T / stride), De
        assert codes.tolist() == [int(c) for c in written[utt].split()]
        rows = (out / f"{utt}.txt").read_text().splitlines()
        assert rows == [ex.rows[k] for k in codes.tolist()]


def test_aux_phases_equal_what_the_cli_writes(setup, tmp_path):
    out = tmp_path / "z"
    assert cli("--model-dir", setup["exp"], "--aux", "--phases", "all", setup["test"], out) == 0
    ex = UnitExtractor.from_pretrained(setup["exp"], aux=True, phases="all")
    assert ex.phases == 4 and ex.rows is None
    utts, feats = ex.load_features(setup["test"])
    x = feats[utts.index("s8_a")]
    codes, z = ex.encode(x.numpy())  # an array works too
    assert z.shape == (30, 4)  # one row per input frame: ceil(T / (stride / 4))
    np.testing.assert_allclose(np.loadtxt(out / "s8_a.txt", ndmin=2), z.numpy(), rtol=1e-5, atol=1e-6)
    assert codes.tolist() == [int(c) for c in read_table(out / "codes")["s8_a"].split()]


def test_extract_units_writes_the_layout_and_batches_agree(setup, tmp_path):
    """The library writer: the same files as the CLI; whole utterances in padded batches (small
    batch_frames: one at a time) give the same codes."""
    ex = UnitExtractor.from_pretrained(setup["exp"], window=0)
    for name, batch_frames in (("a", 20000), ("b", 1)):
        (tmp_path / name).mkdir()
        info = extract_units(ex, setup["test"], tmp_path / name, batch_frames=batch_frames)
        assert info == yaml.safe_load((tmp_path / name / "units.yaml").read_text())
    assert info["num_utts"] == 4 and info["frame_shift"] == 0.04 and info["kind"] == "codebook"
    assert info["checkpoint"] == str(ex.checkpoint) and info["model"] == str(setup["exp"])
    assert (tmp_path / "a" / "codes").read_text() == (tmp_path / "b" / "codes").read_text()
    assert (tmp_path / "a" / "frame_shift").read_text() == "0.04\n"
    assert cli("--model-dir", setup["exp"], "--window", 0, setup["test"], tmp_path / "c") == 0
    for name in ("codes", "frame_shift", "s7_a.txt", "s8_a.txt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()
    with pytest.raises(ValueError, match="needs an extractor built with checkpoint="):
        extract_units(UnitExtractor(ex.model, ex.cfg), setup["test"], tmp_path / "a", nj=2)


def test_checkpoints_and_errors_name_the_option(setup):
    ex = UnitExtractor.from_pretrained(setup["exp"], "latest")
    assert ex.checkpoint.is_file() and ex.checkpoint.parent.name == "checkpoints"
    with pytest.raises(FileNotFoundError, match="avg3"):
        UnitExtractor.from_pretrained(setup["exp"], "avg3")
    model, cfg = ex.model, ex.cfg
    for kwargs, msg in [
        ({"hop": 0}, "hop must be >= 1 input frame, got 0"),
        ({"window": -8}, "window must be >= 0 (0 = whole utterances), got -8"),
        ({"window": 6}, "window 6 / hop 4: must be multiples of the model's stride 4"),
        ({"window": 8, "hop": 12}, "need 0 < hop <= window"),
        ({"phases": 2}, "phases 2: only with aux (the continuous z)"),
        ({"phases": 3, "aux": True}, "phases 3: phases must divide the model's stride 4, got 3"),
        ({"phases": "x", "aux": True}, "phases: expected a number or 'all', got 'x'"),
        ({"unit_format": "text"}, "unknown unit format 'text'"),
    ]:
        with pytest.raises(ValueError) as e:
            UnitExtractor(model, cfg, **kwargs)
        assert msg in str(e.value) and "--" not in str(e.value)
    flags = parameter_flags(build_parser())  # speechkit-extract-units spells the parameters as its flags
    with pytest.raises(ValueError) as e:
        UnitExtractor(model, cfg, phases="2")
    assert error_message(e.value, flags).startswith("--phases 2: only with --aux")
    assert check_extraction_options(phases="all") is None and check_extraction_options(phases="2") == 2
    with pytest.raises(ValueError) as e:
        check_extraction_options(batch_frames=0)
    assert error_message(e.value, flags) == "--batch-frames must be >= 1, got 0"
    with pytest.raises(ValueError, match="^nj must be >= 1, got 0$"):
        check_extraction_options(nj=0)
