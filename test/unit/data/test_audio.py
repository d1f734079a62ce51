"""speechkit.data.audio: reading wav.scp entries, segments, bad files, atomic WAV writing."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.audio import probe_audio, read_audio, write_wav
from speechkit.data.datadir import DataDir, Segment, iter_audio
from speechkit.utils.fileio import DataError

SR = 16000


def _tone(n=SR, sr=SR, f0=440.0, amp=0.5):
    t = np.arange(n) / sr
    return (amp * np.sin(2 * np.pi * f0 * t)).astype(np.float32)


@pytest.fixture
def wav(tmp_path):
    p = tmp_path / "a.wav"
    sf.write(p, _tone(), SR, subtype="PCM_16")
    return p


def test_read_path_matches_soundfile(wav):
    x, sr = read_audio(str(wav))
    ref, ref_sr = sf.read(wav, dtype="float32")
    assert sr == ref_sr == SR
    assert x.dtype == np.float32 and x.shape == (SR,)
    np.testing.assert_array_equal(x, ref)
    assert np.max(np.abs(x)) <= 1.0


def test_read_command_pipe(wav):
    x, sr = read_audio(f"cat {wav} |")
    ref, _ = sf.read(wav, dtype="float32")
    np.testing.assert_array_equal(x, ref)
    # pipes and quoting inside the command work (bash -c)
    y, _ = read_audio(f"cat '{wav}' | cat |")
    np.testing.assert_array_equal(y, ref)


def test_read_flac_and_first_channel(tmp_path):
    stereo = np.stack([_tone(f0=200), _tone(f0=300)], axis=1)
    p = tmp_path / "s.flac"
    sf.write(p, stereo, SR)
    x, sr = read_audio(str(p))
    ref, _ = sf.read(p, dtype="float32")
    assert x.shape == (SR,)
    np.testing.assert_array_equal(x, ref[:, 0])


def test_segment(wav):
    x, _ = read_audio(str(wav), start=0.25, end=0.5)
    ref, _ = sf.read(wav, dtype="float32")
    np.testing.assert_array_equal(x, ref[4000:8000])
    # a small overshoot (< 0.5 s, as Kaldi's extract-segments) is cut at the end
    y, _ = read_audio(str(wav), start=0.75, end=1.2)
    np.testing.assert_array_equal(y, ref[12000:])
    # also through a command
    z, _ = read_audio(f"cat {wav} |", start=0.25, end=0.5)
    np.testing.assert_array_equal(z, x)


@pytest.mark.parametrize("start,end,msg", [
    (0.5, 2.0, "beyond the end of the audio"),
    (1.5, None, "beyond the end of the audio"),
    (0.5, 0.5, "not after its start"),
    (-0.1, 0.5, "negative"),
])
def test_segment_errors(wav, start, end, msg):
    with pytest.raises(DataError, match=msg) as e:
        read_audio(str(wav), key="u1", start=start, end=end, source="data/x/segments")
    assert "data/x/segments: 'u1'" in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"wav.scp: 'utt7': .*nope.wav: no such file"):
        read_audio(str(tmp_path / "nope.wav"), key="utt7")


def test_empty_file(tmp_path):
    p = tmp_path / "e.wav"
    p.write_bytes(b"")
    with pytest.raises(DataError, match=r"'k': .*e.wav: file is empty"):
        read_audio(str(p), key="k")
    with pytest.raises(DataError, match="file is empty"):
        probe_audio(str(p))


def test_truncated_wav(tmp_path, wav):
    p = tmp_path / "t.wav"
    p.write_bytes(wav.read_bytes()[:20000])
    # soundfile alone silently returns fewer samples here
    assert sf.info(p).frames < SR
    with pytest.raises(DataError, match=r"'k': .*t.wav: truncated file"):
        read_audio(str(p), key="k")
    with pytest.raises(DataError, match="truncated"):
        probe_audio(str(p))


def test_truncated_flac(tmp_path):
    p = tmp_path / "a.flac"
    sf.write(p, (np.random.default_rng(0).standard_normal(SR) * 0.1).astype(np.float32), SR)
    q = tmp_path / "t.flac"
    q.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(DataError, match=r"'k': .*t.flac: truncated"):
        read_audio(str(q), key="k")


def test_header_only_and_non_audio(tmp_path, wav):
    h = tmp_path / "h.wav"
    h.write_bytes(wav.read_bytes()[:30])
    t = tmp_path / "t.wav"
    t.write_text("this is a text file, not audio\n")
    for p in (h, t):
        with pytest.raises(DataError, match=rf"'k': .*{p.name}: not a readable audio file"):
            read_audio(str(p), key="k")


def test_failing_and_silent_commands():
    with pytest.raises(DataError, match=r"'k': command 'echo oops >&2; exit 3' failed with exit code 3: oops"):
        read_audio("echo oops >&2; exit 3 |", key="k")
    with pytest.raises(DataError, match="wrote no audio"):
        read_audio("true |", key="k")
    with pytest.raises(DataError, match="not a readable audio file"):
        read_audio("echo hello |", key="k")


def test_expected_sr(tmp_path):
    p = tmp_path / "n.wav"
    sf.write(p, _tone(8000, 8000), 8000)
    with pytest.raises(DataError, match=r"wav.scp: 'rec': has 8000 Hz, config expects 16000 Hz"):
        read_audio(str(p), key="rec", expected_sr=16000)
    assert read_audio(str(p), expected_sr=8000)[1] == 8000


def test_probe(wav):
    assert probe_audio(str(wav)) == (SR, SR)
    assert probe_audio(f"cat {wav} |") == (SR, SR)


def test_write_wav_roundtrip_and_atomic(tmp_path, monkeypatch):
    x = _tone()
    p = tmp_path / "sub" / "o.wav"
    write_wav(p, x, SR)
    info = sf.info(p)
    assert (info.samplerate, info.frames, info.subtype) == (SR, SR, "PCM_16")
    y, _ = read_audio(str(p))
    assert np.max(np.abs(y - x)) <= 1.0 / 32768 + 1e-7
    # clipping instead of wrap-around
    write_wav(p, np.array([2.0, -2.0, 0.0], dtype=np.float32), SR)
    np.testing.assert_allclose(sf.read(p, dtype="float32")[0], [32767 / 32768, -1.0, 0.0])
    # a failure while writing leaves the previous complete file and no temp file behind
    before = p.read_bytes()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(sf, "write", boom)
    with pytest.raises(RuntimeError):
        write_wav(p, x, SR)
    assert p.read_bytes() == before
    assert sorted(f.name for f in p.parent.iterdir()) == ["o.wav"]


def test_write_wav_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="NaN"):
        write_wav(tmp_path / "x.wav", np.array([0.0, np.nan]), SR)
    with pytest.raises(ValueError, match="shape"):
        write_wav(tmp_path / "x.wav", np.zeros(0), SR)


def test_iter_audio_plain(tmp_path):
    d = DataDir(wav_scp={}, utt2spk={}, path=tmp_path)
    for i, utt in enumerate(["s1_b", "s1_a", "s2_a"]):
        p = tmp_path / f"{utt}.wav"
        sf.write(p, _tone(1000 + i), SR)
        d.wav_scp[utt] = str(p)
        d.utt2spk[utt] = utt[:2]
    got = [(u, len(x), sr) for u, x, sr in iter_audio(d)]
    assert got == [("s1_a", 1001, SR), ("s1_b", 1000, SR), ("s2_a", 1002, SR)]


def test_iter_audio_segments_reads_each_recording_once(tmp_path, monkeypatch):
    import speechkit.data.audio as audio

    rec = tmp_path / "r.wav"
    sf.write(rec, _tone(), SR, subtype="PCM_16")
    rec2 = tmp_path / "r2.wav"
    sf.write(rec2, _tone(8000), SR, subtype="PCM_16")
    ref, _ = sf.read(rec, dtype="float32")
    # utterance order interleaves the two recordings: a-r, b-r2, c-r
    d = DataDir(
        wav_scp={"r": str(rec), "r2": str(rec2)},
        utt2spk={"s_a": "s", "s_b": "s", "s_c": "s"},
        segments={"s_a": Segment("r", 0.0, 0.25), "s_b": Segment("r2", 0.0, 0.1),
                  "s_c": Segment("r", 0.5, 1.0)},
        path=tmp_path,
    )
    calls = []
    real = audio.read_audio

    def counting(spec, **kw):
        calls.append(kw["key"])
        return real(spec, **kw)

    monkeypatch.setattr(audio, "read_audio", counting)
    out = {u: x for u, x, _ in iter_audio(d)}
    assert list(out) == ["s_a", "s_b", "s_c"]
    assert sorted(calls) == ["r", "r2"]
    np.testing.assert_array_equal(out["s_a"], ref[:4000])
    np.testing.assert_array_equal(out["s_c"], ref[8000:16000])
    assert len(out["s_b"]) == 1600


def test_iter_audio_errors_name_file_and_key(tmp_path):
    d = DataDir(wav_scp={"r": str(tmp_path / "gone.wav")}, utt2spk={"s_a": "s"},
                segments={"s_a": Segment("r", 0.0, 1.0)}, path=tmp_path)
    with pytest.raises(DataError, match=r"wav.scp: 'r': .*gone.wav: no such file"):
        list(iter_audio(d))
    d.segments = {"s_a": Segment("zz", 0.0, 1.0)}
    with pytest.raises(DataError, match=r"segments: utterance 's_a' refers to recording 'zz'"):
        list(iter_audio(d))
    sf.write(tmp_path / "ok.wav", _tone(), SR)
    d.wav_scp = {"r": str(tmp_path / "ok.wav")}
    d.segments = {"s_a": Segment("r", 0.0, 3.0)}
    with pytest.raises(DataError, match=r"segments: 's_a': segment ends at 3.000 s, beyond the end"):
        list(iter_audio(d))


@pytest.mark.skipif(__import__("shutil").which("sox") is None, reason="sox not installed")
def test_streamed_wav_from_pipe_is_not_truncated(tmp_path):
    """sox writing WAV to a pipe from input of unknown length puts a placeholder size in the header."""
    raw = tmp_path / "x.raw"
    raw.write_bytes((_tone() * 32767).astype("<i2").tobytes())
    x, sr = read_audio(f"cat {raw} | sox -t raw -r 16000 -e signed -b 16 -c 1 - -t wav - |")
    assert sr == SR and len(x) == SR
    np.testing.assert_allclose(x, _tone(), atol=3 / 32768)


def test_ogg_end_of_stream_shortfall_is_not_truncation(tmp_path, monkeypatch):
    """Ogg Vorbis may decode a few samples fewer than libsndfile's frame count (granule position)."""
    import soundfile as sf

    from speechkit.data import audio

    path = tmp_path / "a.ogg"
    sf.write(path, np.zeros(16000, dtype=np.float32), 16000, format="OGG", subtype="VORBIS")
    real_read = sf.SoundFile.read

    def short_read(self, frames=-1, **kw):  # what libsndfile does on 451 msc_malayalam files
        return real_read(self, frames, **kw)[:-8]

    monkeypatch.setattr(sf.SoundFile, "read", short_read)
    x, sr = audio.read_audio(str(path), key="k")
    assert sr == 16000 and len(x) == 16000 - 8
    with pytest.raises(DataError, match="truncated"):  # a segment inside the file must be complete
        audio.read_audio(str(path), key="k", start=0.0, end=0.5)
