"""The resampling pipe for what sox cannot read (issue 39, item 3): speechkit-resample, its in-process
reading in read_audio, and the wav.scp entries the corpus preparers write for MP3 and Opus."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.audio import parse_resample_pipe, read_audio, resample_pipe, resampled_wav_bytes
from speechkit.data.corpora._common import sox_reads, wav_entry
from speechkit.utils.fileio import DataError

BIN = Path(sys.executable).parent
ENV = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")


def tone(n: int, sr: int, f0: float = 440.0, channels: int = 1) -> np.ndarray:
    x = 0.5 * np.sin(2 * np.pi * f0 * np.arange(n) / sr).astype(np.float32)
    return np.stack([x, 0.5 * x], axis=1) if channels == 2 else x


@pytest.fixture
def mp3(tmp_path) -> Path:
    """One second of a 440 Hz tone as a 48 kHz MP3 (libsndfile writes MP3 through its LAME encoder)."""
    p = tmp_path / "clip.mp3"
    sf.write(p, tone(48000, 48000), 48000, format="MP3")
    return p


def test_mp3_is_resampled_to_the_rate_asked(mp3):
    data = resampled_wav_bytes(mp3, 16000)
    y, sr = sf.read(io.BytesIO(data), dtype="float32")
    info = sf.info(io.BytesIO(data))
    assert sr == 16000 and info.subtype == "PCM_16" and info.channels == 1
    assert y.shape == (16000,)
    # still a 440 Hz tone: the spectrum peaks there (bins of 1 Hz)
    assert abs(int(np.argmax(np.abs(np.fft.rfft(y)))) - 440) <= 2
    assert resampled_wav_bytes(mp3, 16000) == data  # no dither: the same bytes every time


def test_channels_are_averaged_and_the_native_rate_kept(tmp_path):
    p = tmp_path / "stereo.flac"
    x = tone(8000, 8000, channels=2)
    sf.write(p, x, 8000, subtype="PCM_16")
    y, sr = sf.read(io.BytesIO(resampled_wav_bytes(p, 8000)), dtype="float32")
    stored = sf.read(p, dtype="float32")[0]
    assert sr == 8000 and y.shape == (8000,)
    np.testing.assert_allclose(y, stored.mean(axis=1), atol=1 / 32767)


def test_read_audio_takes_the_pipe_in_process_with_the_commands_bytes(mp3):
    spec = resample_pipe(mp3, 16000)
    assert spec == f"speechkit-resample --rate 16000 {mp3} |" and parse_resample_pipe(spec) == (str(mp3), 16000)
    x, sr = read_audio(spec, key="u1")
    cli = subprocess.run(spec[:-1], shell=True, capture_output=True, env=ENV)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == resampled_wav_bytes(mp3, 16000)
    np.testing.assert_array_equal(x, sf.read(io.BytesIO(cli.stdout), dtype="float32")[0])
    # not exactly the pipe's form (something piped after it): the shell runs it
    assert parse_resample_pipe(spec[:-1] + "| cat |") is None and parse_resample_pipe(f"sox {mp3} -t wav - |") is None


def test_errors_name_the_file(tmp_path, mp3):
    (tmp_path / "empty.mp3").write_bytes(b"")
    (tmp_path / "junk.mp3").write_bytes(b"not audio at all" * 10)
    for name, why in (("absent.mp3", "no such file"), ("empty.mp3", "file is empty"),
                      ("junk.mp3", "not a readable audio file")):
        with pytest.raises(DataError, match=f"^{tmp_path / name}: {why}"):
            resampled_wav_bytes(tmp_path / name, 16000)
    with pytest.raises(DataError, match=r"wav.scp: 'u7': command 'speechkit-resample .*absent.mp3': .*no such file"):
        read_audio(resample_pipe(tmp_path / "absent.mp3", 16000), key="u7")
    cli = subprocess.run([str(BIN / "speechkit-resample"), "--rate", "16000", str(tmp_path / "absent.mp3")],
                         capture_output=True, text=True, env=ENV)
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr.strip() == f"speechkit-resample: error: {tmp_path / 'absent.mp3'}: no such file"


def test_wav_scp_entries_by_what_sox_reads(tmp_path, mp3):
    wav, opus = tmp_path / "a.wav", tmp_path / "b.ogg"
    sf.write(wav, tone(22050, 22050), 22050)
    sf.write(opus, tone(48000, 48000), 48000, format="OGG", subtype="OPUS")
    assert sox_reads(wav) and not sox_reads(mp3) and not sox_reads(opus)
    # WAV: as before (the path at its rate, a sox pipe at another)
    assert wav_entry(wav, 22050, 22050) == str(wav)
    assert wav_entry(wav, 22050, 16000) == f"sox -R {wav} -t wav -r 16000 -b 16 -c 1 - |"
    # MP3 / Opus: speechkit-resample whenever a rate is asked, the native one too (a later sox pipe,
    # e.g. speed perturbation, then reads WAV); no rate asked: the path, which libsndfile reads
    assert wav_entry(mp3, 48000, 16000) == f"speechkit-resample --rate 16000 {mp3} |"
    assert wav_entry(mp3, 48000, 48000) == f"speechkit-resample --rate 48000 {mp3} |"
    assert wav_entry(opus, 48000, 16000) == f"speechkit-resample --rate 16000 {opus} |"
    assert wav_entry(mp3, 48000) == str(mp3)
    x, sr = read_audio(wav_entry(opus, 48000, 16000))
    assert sr == 16000 and abs(len(x) - 16000) <= 1


@pytest.mark.skipif(shutil.which("sox") is None, reason="sox not installed")
def test_speed_perturbation_of_an_mp3_entry_reads(tmp_path, mp3):
    """Kaldi's 3-way speed perturbation wraps each entry in a sox pipe: sox reads the WAV the pipe writes."""
    from speechkit.data.datadir import DataDir
    from speechkit.data.speed_perturb import perturb_speed

    d = DataDir(wav_scp={"s1_u1": wav_entry(mp3, 48000, 16000)}, text={"s1_u1": "a"}, utt2spk={"s1_u1": "s1"})
    out = perturb_speed(d, 0.9)[0]
    spec = next(iter(out.wav_scp.values()))
    assert spec.startswith("speechkit-resample --rate 16000 ") and " | sox -R -t wav - -t wav - speed 0.9 |" in spec
    env_path = os.environ["PATH"]
    os.environ["PATH"] = ENV["PATH"]  # the shell that runs the pipeline finds speechkit-resample
    try:
        x, sr = read_audio(spec)
    finally:
        os.environ["PATH"] = env_path
    assert sr == 16000 and abs(len(x) - 16000 / 0.9) < 50


def test_out_never_replaces_its_input_and_is_written_whole(tmp_path, capsys):
    """--out FILE onto the file it reads replaced the input with its resampled copy (exit 0, the original lost);
    --out opened the output in place, so a failed write left part of it."""
    from speechkit.bin.resample import main

    wav = tmp_path / "in.wav"
    sf.write(wav, tone(16000, 16000), 16000, subtype="PCM_16")
    before = wav.read_bytes()
    assert main(["--rate", "8000", str(wav), "--out", str(wav)]) == 1
    assert capsys.readouterr().err.strip() == (f"speechkit-resample: error: --out {wav} is FILE: outputs never "
                                               "overwrite inputs or each other; choose another file")
    assert wav.read_bytes() == before
    data = tmp_path / "d"
    data.mkdir()
    (data / "utt2spk").write_text("u s\n")
    assert main(["--rate", "8000", str(wav), "--out", str(data / "wav.scp")]) == 1  # a data dir's table
    assert not (data / "wav.scp").exists()
    assert main(["--rate", "8000", str(wav), "--out", str(tmp_path / "out.wav")]) == 0
    assert sf.info(str(tmp_path / "out.wav")).samplerate == 8000
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
