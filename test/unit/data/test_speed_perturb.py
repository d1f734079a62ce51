"""Speed perturbation (Kaldi's perturb_data_dir_speed.sh / _3way.sh): ids, durations, segments, the sox
pipes' audio length, validation, utils/ wrappers and errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.bin import perturb_data_dir_speed as cli
from speechkit.data.audio import read_audio
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.data.speed_perturb import perturb_data_dir_speed, perturb_data_dir_speed_3way, speed_prefix
from speechkit.utils.fileio import read_table

pytestmark = pytest.mark.skipif(shutil.which("sox") is None, reason="needs sox")
ROOT = Path(__file__).resolve().parents[3]
SR = 16000
LENGTHS = {"a-u1": 16000, "a-u2": 8000, "b-u1": 12000}  # samples: 1 s, 0.5 s, 0.75 s


@pytest.fixture
def src(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    wav = {}
    for utt, n in LENGTHS.items():
        path = tmp_path / "audio" / f"{utt}.wav"
        path.parent.mkdir(exist_ok=True)
        t = np.arange(n) / SR
        sf.write(path, (0.3 * np.sin(2 * np.pi * 220 * t) + 0.01 * rng.normal(size=n)).astype(np.float32), SR)
        wav[utt] = str(path)
    wav["b-u1"] = f"cat {wav['b-u1']} |"  # a pipe entry
    d = DataDir(wav_scp=wav, utt2spk={u: u.split("-")[0] for u in LENGTHS},
                text={u: "hello world" for u in LENGTHS}, utt2lang={u: "en" for u in LENGTHS},
                utt2dur={u: n / SR for u, n in LENGTHS.items()}, spk2gender={"a": "f", "b": "m"},
                phone_alignments={"a-u1": ["0.100 0.300 h", "0.300 0.900 e"]})
    out = tmp_path / "src"
    d.write(out)
    (out / "utt2uniq").write_text("".join(f"{u} {u}\n" for u in sorted(LENGTHS)))
    (out / "frame_shift").write_text("0.01\n")
    return out


def test_prefix():
    assert (speed_prefix(0.9), speed_prefix(1.1), speed_prefix(1.0), speed_prefix(1)) == \
        ("sp0.9-", "sp1.1-", "sp1.0-", "sp1.0-")
    with pytest.raises(ValueError, match="positive"):
        speed_prefix(0)


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_single_factor_ids_durations_audio_and_validation(src, tmp_path, factor):
    dest = tmp_path / "sp"
    perturb_data_dir_speed(factor, src, dest)
    assert validate(dest, no_feats=True) == []
    d = DataDir.load(dest)
    p = f"sp{factor}-"
    assert d.utts == sorted(p + u for u in LENGTHS)
    assert d.utt2spk[p + "a-u2"] == p + "a" and d.spk2gender == {p + "a": "f", p + "b": "m"}
    assert d.text[p + "a-u1"] == "hello world" and d.utt2lang[p + "b-u1"] == "en"
    assert read_table(dest / "utt2uniq") == {p + u: u for u in LENGTHS}
    times = np.array([[float(v) for v in line.split()[:2]] for line in d.phone_alignments[p + "a-u1"]])
    np.testing.assert_allclose(times, np.array([[0.1, 0.3], [0.3, 0.9]]) / factor, atol=1e-6)
    assert [line.split()[2] for line in d.phone_alignments[p + "a-u1"]] == ["h", "e"]
    assert not (dest / "feats.scp").exists() and not (dest / "frame_shift").exists()
    for u, n in LENGTHS.items():
        assert d.utt2dur[p + u] == pytest.approx(n / SR / factor, abs=1e-3)
        assert f"speed {factor} |" in d.wav_scp[p + u]
        x, sr = read_audio(d.wav_scp[p + u], key=p + u)  # runs the sox pipe
        assert sr == SR
        assert len(x) == pytest.approx(n / factor, abs=2)  # audio length scaled by 1 / factor
        # the same samples every time the pipe runs (sox -R: no random dither after resampling)
        np.testing.assert_array_equal(read_audio(d.wav_scp[p + u], key=p + u)[0], x)
    assert d.wav_scp[p + "b-u1"].startswith("cat ") and "| sox -R -t wav - -t wav - speed" in d.wav_scp[p + "b-u1"]


def test_segments_are_scaled_and_recordings_prefixed(src, tmp_path):
    d = DataDir.load(src)
    rec = DataDir(wav_scp={"reca": d.wav_scp["a-u1"]}, utt2spk={"a-s1": "a", "a-s2": "a"},
                  segments={"a-s1": ("reca", 0.1, 0.4), "a-s2": ("reca", 0.5, 0.95)})
    from speechkit.data.datadir import Segment

    rec.segments = {k: Segment(*v) for k, v in rec.segments.items()}
    rec.write(tmp_path / "seg")
    perturb_data_dir_speed(1.1, tmp_path / "seg", tmp_path / "seg_sp")
    assert validate(tmp_path / "seg_sp", no_feats=True, no_text=True) == []
    out = DataDir.load(tmp_path / "seg_sp")
    assert sorted(out.wav_scp) == ["sp1.1-reca"]
    s = out.segments["sp1.1-a-s2"]
    assert s.recording == "sp1.1-reca" and (s.start, s.end) == pytest.approx((0.5 / 1.1, 0.95 / 1.1), abs=1e-6)
    assert out.utt2dur["sp1.1-a-s1"] == pytest.approx(0.3 / 1.1, abs=1e-6)  # from the segments
    x, _ = read_audio(out.wav_scp["sp1.1-reca"], start=s.start, end=s.end)
    assert len(x) == pytest.approx(0.45 / 1.1 * SR, abs=2)


def test_utt2dur_is_computed_when_missing(src, tmp_path):
    (src / "utt2dur").unlink()
    out = perturb_data_dir_speed(0.9, src, tmp_path / "sp")
    assert out.utt2dur["sp0.9-a-u2"] == pytest.approx(0.5 / 0.9, abs=1e-6)


def _sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def test_3way_through_utils_script(src, tmp_path):
    r = _sh(f"{ROOT}/utils/perturb_data_dir_speed_3way.sh {src} {tmp_path / 'sp3'}", tmp_path)
    assert r.returncode == 0, r.stderr
    assert validate(tmp_path / "sp3", no_feats=True) == []
    d = DataDir.load(tmp_path / "sp3")
    assert len(d) == 3 * len(LENGTHS)
    assert set(d.spk2utt) == {"a", "b", "sp0.9-a", "sp0.9-b", "sp1.1-a", "sp1.1-b"}
    assert d.utt2dur["a-u1"] == pytest.approx(1.0) and d.utt2dur["sp1.1-a-u1"] == pytest.approx(1 / 1.1, abs=1e-3)
    uniq = read_table(tmp_path / "sp3" / "utt2uniq")
    assert uniq["sp0.9-b-u1"] == "b-u1" and uniq["b-u1"] == "b-u1"
    assert d.wav_scp["a-u1"] == DataDir.load(src).wav_scp["a-u1"]  # the source plays unchanged
    # --always-include-prefix: the source gets sp1.0- (no sox pipe needed)
    out = perturb_data_dir_speed_3way(src, tmp_path / "sp3p", always_include_prefix=True)
    assert validate(tmp_path / "sp3p", no_feats=True) == []
    assert all(u.startswith("sp") for u in out.utts) and out.wav_scp["sp1.0-a-u1"].endswith("a-u1.wav")
    r = _sh(f"{ROOT}/utils/perturb_data_dir_speed.sh 0.9 {src} {tmp_path / 'sp09'}", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "sp09" / "wav.scp").read_text().startswith("sp0.9-a-u1 sox ")


def test_errors_exit_1_with_a_clear_message(src, tmp_path, capsys):
    assert cli.main(["0", str(src), str(tmp_path / "x")]) == 1
    assert "positive number" in capsys.readouterr().err
    assert cli.main(["fast", str(src), str(tmp_path / "x")]) == 1
    assert "FACTOR must be a number" in capsys.readouterr().err
    assert cli.main(["0.9", str(src), str(src)]) == 1
    assert f"DEST {src} is SRC {src}" in capsys.readouterr().err
    assert cli.main(["0.9", str(tmp_path / "nowhere"), str(tmp_path / "y")]) == 1
    assert "no such data directory" in capsys.readouterr().err
    (src / "wav.scp").unlink()
    assert cli.main(["0.9", str(src), str(tmp_path / "z")]) == 1
    assert "no wav.scp" in capsys.readouterr().err


def test_source_that_cannot_give_a_valid_dir_is_refused_before_writing(src, tmp_path, capsys):
    """Issue 23: a source whose speaker ids are not utterance prefixes was accepted and gave a dir that
    speechkit-validate-data-dir rejects, although the help says the result validates."""
    (src / "utt2spk").write_text("a-u1 a\na-u2 a\nb-u1 zed\n")
    (src / "spk2utt").write_text("a a-u1 a-u2\nzed b-u1\n")
    (src / "spk2gender").write_text("a f\nzed m\n")
    for argv in (["0.9", str(src), str(tmp_path / "sp")], ["--3way", str(src), str(tmp_path / "sp")]):
        assert cli.main(argv) == 1
        err = capsys.readouterr().err
        assert f"{src}/utt2spk:3: speaker id 'zed' is not a prefix of utterance id 'b-u1'" in err
        assert not (tmp_path / "sp").exists()
    # any other problem the result would have is caught before anything is written
    (src / "utt2spk").write_text("a-u1 a\na-u2 a\nb-u1 b\n")
    (src / "spk2utt").write_text("a a-u1 a-u2\nb b-u1\n")
    (src / "spk2gender").write_text("a f\nb x\n")
    assert cli.main(["0.9", str(src), str(tmp_path / "sp")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'sp'}: the perturbed dir would not validate" in err and "spk2gender" in err
    assert not (tmp_path / "sp").exists()


def test_options_and_destinations_refused_by_name(src, tmp_path, capsys):
    for opt in (["--always-include-prefix"], ["--always-include-prefix", "true"], ["--always_include_prefix=false"]):
        assert cli.main(["0.9", str(src), str(tmp_path / "sp"), *opt]) == 1
        assert "--always-include-prefix applies to --3way only" in capsys.readouterr().err
        assert not (tmp_path / "sp").exists()
    before = sorted(p.name for p in src.iterdir())
    for dest, why in ((src / "sp", "lies inside"), (tmp_path, "contains")):
        assert cli.main(["--3way", str(src), str(dest)]) == 1
        assert f"DEST {dest} {why} SRC {src}" in capsys.readouterr().err
    assert sorted(p.name for p in src.iterdir()) == before


@pytest.mark.parametrize("three_way", [False, True])
def test_stale_feature_extras_in_dest_are_removed(src, tmp_path, three_way):
    """Audit 3 d7: a DEST holding an earlier feature setup kept feats.yaml, frame_shift and
    cmvn_global.ark (feats.scp and cmvn.scp were removed): they describe features of other
    utterances, which the perturbed dir does not have."""
    dest = tmp_path / "sp"
    dest.mkdir()
    stale = {"feats.scp": "x a.ark:1\n", "cmvn.scp": "a a.ark:1\n", "frame_shift": "0.01\n",
             "feats.yaml": "type: mfcc\n", "cmvn_global.ark": "stale\n"}
    for name, text in stale.items():
        (dest / name).write_text(text)
    (src / "feats.yaml").write_text("type: fbank\n")       # the source's own are not carried either
    (src / "cmvn_global.ark").write_text("src stats\n")
    if three_way:
        perturb_data_dir_speed_3way(src, dest)
    else:
        perturb_data_dir_speed(0.9, src, dest)
    assert [name for name in stale if (dest / name).exists()] == []
    assert validate(dest, no_feats=True) == []
