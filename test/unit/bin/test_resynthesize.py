"""speechkit-resynthesize: wavs from the inverter's magnitudes through Griffin-Lim, plots, voices, errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from speechkit.bin.resynthesize import main
from speechkit.decode.griffin_lim import griffin_lim
from speechkit.tasks import get_task, load_model
from speechkit.utils.fileio import read_table, write_table

import zs_helpers as zs  # test/unit/tasks/zs_helpers.py (test/unit/conftest.py)


K, R = 8, 4


def voice_data(root: Path, speakers=("v1",), n: int = 4):
    rng = np.random.default_rng(0)
    codes, specs = {}, {}
    for spk in speakers:
        for i in range(n):
            c = rng.integers(0, K, size=6 + i)
            codes[f"{spk}_u{i}"] = c
            specs[f"{spk}_u{i}"] = rng.uniform(0.1, 1.0, size=(len(c) * R + 1, zs.SPEC_BINS)).astype(np.float32)
    feats = zs.write_feats_dir(root / "spec", {u: len(s) for u, s in specs.items()}, cmvn=False, feats=specs,
                               conf=zs.SPEC_CONF)
    write_table(root / "codes", {u: " ".join(map(str, c)) for u, c in codes.items()})
    return root / "codes", feats


def train_inverter(root: Path, codes: Path, feats: Path, num_speakers: int = 0) -> Path:
    o = {"data.codes": codes, "data.feats_dir": feats, "data.num_valid": 1, "model.codebook_size": K,
         "model.input_dim": 4, "model.output_dim": zs.SPEC_BINS, "model.upsample_ratio": R, "model.model_dim": 8,
         "model.conv_kernel_sizes": "[1,3]", "model.conv_layers": 1, "model.transformer_layers": 1,
         "model.attention_heads": 2, "model.ff_dim": 8, "model.num_speakers": num_speakers, "model.speaker_dim": 2,
         "trainer.max_epochs": 1, "trainer.num_threads": 1, "trainer.device": "cpu"}
    zs.train("inverter", [f"{k}={v}" for k, v in o.items()], root / "inv")
    return root / "inv"


@pytest.fixture(scope="module")
def one_voice(tmp_path_factory):
    root = tmp_path_factory.mktemp("resynth")
    codes, feats = voice_data(root)
    return {"codes": codes, "feats": feats, "inv": train_inverter(root, codes, feats)}


def run(args) -> int:
    return main([str(a) for a in args])


def test_wavs_are_griffin_lim_of_the_predicted_magnitudes(one_voice, tmp_path):
    out = tmp_path / "out"
    assert run(["--inverter-dir", one_voice["inv"], "--codes", one_voice["codes"], "--out-dir", out,
                "--reference-dir", one_voice["feats"], "--n-iter", 8, "--speaker", "v1"]) == 0
    wavs = read_table(out / "wav.scp")
    assert sorted(wavs) == ["v1_u0", "v1_u1", "v1_u2", "v1_u3"]
    t = get_task("inverter")
    t.init_from_vqvae = False
    model, _ = load_model(one_voice["inv"], t)
    codes = read_table(one_voice["codes"])
    for utt, path in wavs.items():
        y, sr = sf.read(path, dtype="float32")
        assert sr == zs.SPEC_CONF["sample_rate"]
        n_frames = len(codes[utt].split()) * R + 1  # the reference's length, not T' x r
        assert len(y) == zs.SPEC_CONF["hop_length"] * (n_frames - 1)
        # independent: predicted magnitude -> the same Griffin-Lim call -> same waveform (16-bit rounding)
        c = torch.tensor([[int(x) for x in codes[utt].split()]])
        with torch.no_grad():
            mag, _ = model(c, torch.tensor([c.shape[1]]), target_lengths=torch.tensor([n_frames]))
        ref = griffin_lim(mag[0].T.contiguous(), n_fft=16, hop_length=8, win_length=16, n_iter=8, seed=0).numpy()
        scale = min(1.0, 0.99 / np.abs(ref).max())
        np.testing.assert_allclose(y, ref * scale, atol=2 / 32768)
        assert (out / f"{utt}.png").stat().st_size > 1000


def test_subset_and_no_png(one_voice, tmp_path):
    out = tmp_path / "o"
    lst = tmp_path / "list"
    lst.write_text("v1_u2\n")
    assert run(["--inverter-dir", one_voice["inv"], "--codes", one_voice["codes"], "--out-dir", out,
                "--utt-list", lst, "--no-png", "--n-iter", 2]) == 0
    assert list(read_table(out / "wav.scp")) == ["v1_u2"] and not list(out.glob("*.png"))
    # without a reference: T' x r frames
    y, _ = sf.read(out / "v1_u2.wav")
    assert len(y) == zs.SPEC_CONF["hop_length"] * (8 * R - 1)
    assert run(["--inverter-dir", one_voice["inv"], "--codes", one_voice["codes"], "--out-dir", tmp_path / "p",
                "--max-utts", 1, "--no-png", "--n-iter", 1]) == 0
    assert list(read_table(tmp_path / "p" / "wav.scp")) == ["v1_u0"]


def test_voices_and_errors(tmp_path, capsys, one_voice):
    codes, feats = voice_data(tmp_path, speakers=("va", "vb"), n=3)
    inv = train_inverter(tmp_path, codes, feats, num_speakers=2)
    assert read_table(inv / "speakers") == {"va": "0", "vb": "1"}
    base = ["--inverter-dir", inv, "--codes", codes, "--no-png", "--n-iter", 1]
    assert run(base + ["--out-dir", tmp_path / "a", "--speaker", "vb"]) == 0
    assert run(base + ["--out-dir", tmp_path / "b"]) == 1
    assert "--speaker is required" in capsys.readouterr().err
    assert run(base + ["--out-dir", tmp_path / "b", "--speaker", "vz"]) == 1
    assert "'vz': not a voice of the inverter (va, vb)" in capsys.readouterr().err
    bad = tmp_path / "bad_codes"
    bad.write_text("v1_u0 1 2 99\n")
    assert run(["--inverter-dir", one_voice["inv"], "--codes", bad, "--out-dir", tmp_path / "c"]) == 1
    assert "bad_codes:1: 'v1_u0': code 99 outside [0, 8)" in capsys.readouterr().err


def test_rerun_replaces_the_output_whole_and_overlaps_are_refused(one_voice, tmp_path, capsys):
    """Issue 23 (sweep): a re-run into an existing --out-dir left the earlier run's wavs beside the
    new wav.scp; an --out-dir that is the --reference-dir or holds --codes was written into."""
    base = ["--inverter-dir", one_voice["inv"], "--codes", one_voice["codes"], "--no-png", "--n-iter", 1]
    out = tmp_path / "o"
    assert run(base + ["--out-dir", out]) == 0
    lst = tmp_path / "list"
    lst.write_text("v1_u2\n")
    assert run(base + ["--out-dir", out, "--utt-list", lst]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".backup", "v1_u2.wav", "wav.scp"]
    assert read_table(out / "wav.scp") == {"v1_u2": str(out / "v1_u2.wav")}
    assert sorted(read_table(out / ".backup" / "1" / "wav.scp")) == ["v1_u0", "v1_u1", "v1_u2", "v1_u3"]
    ref = one_voice["feats"]
    before = sorted(p.name for p in ref.iterdir())
    assert run(base + ["--out-dir", ref, "--reference-dir", ref]) == 1
    assert f"--out-dir {ref} is --reference-dir {ref}" in capsys.readouterr().err
    (tmp_path / "c").mkdir()
    codes = tmp_path / "c" / "codes"
    codes.write_bytes(one_voice["codes"].read_bytes())
    assert run(["--inverter-dir", one_voice["inv"], "--codes", codes, "--out-dir", tmp_path / "c"]) == 1
    assert f"--out-dir {tmp_path / 'c'} contains --codes {codes}" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["codes"]
    assert run(base + ["--out-dir", one_voice["inv"]]) == 1
    assert f"--out-dir {one_voice['inv']} is --inverter-dir" in capsys.readouterr().err
    assert sorted(p.name for p in ref.iterdir()) == before


@pytest.mark.parametrize("bad, msg", [("nan", "must be a finite number, got 'nan'"),
                                      ("inf", "must be a finite number, got 'inf'"),
                                      ("-0.5", "must be >= 0, got -0.5"), ("fast", "expected a number, got 'fast'")])
def test_bad_momentum_is_an_argparse_error_naming_the_option(tmp_path, capsys, bad, msg):
    """Audit 3 d10: --momentum nan ran Griffin-Lim (griffin_lim checks only momentum < 0) and wrote NaN audio."""
    with pytest.raises(SystemExit) as e:
        main(["--inverter-dir", str(tmp_path / "inv"), "--codes", str(tmp_path / "codes"),
              "--out-dir", str(tmp_path / "out"), f"--momentum={bad}"])
    assert e.value.code == 2
    assert f"speechkit-resynthesize: error: argument --momentum: {msg}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_momentum_range_follows_griffin_lim():
    from speechkit.bin.resynthesize import build_parser
    base = ["--inverter-dir", "inv", "--codes", "codes", "--out-dir", "out"]
    assert build_parser().parse_args(base).momentum == 0.99
    for ok in ("0", "0.5", "1.5"):  # griffin_lim: >= 0; above 1 it only warns
        assert build_parser().parse_args([*base, "--momentum", ok]).momentum == float(ok)
