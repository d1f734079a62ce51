"""speechkit.decode.audio_out: the peak limit, the wav and PNG of a synthesized clip, the short-clip warning;
speechkit.decode.vocode's job runner and WORLD vocoder errors."""
from __future__ import annotations

import logging
import operator

import numpy as np
import pytest
import soundfile as sf

from speechkit.decode.audio_out import PEAK, limit_peak, write_synthesized, warn_unplotted
from speechkit.decode.vocode import world_vocode
from speechkit.utils.jobs import map_jobs
from speechkit.utils.fileio import DataError


def test_limit_peak():
    loud = np.array([0.5, -2.0, 1.0], np.float32)
    out = limit_peak(loud)
    assert PEAK == 0.99 and out.dtype == np.float32
    np.testing.assert_allclose(out, loud * (0.99 / 2.0))
    assert np.abs(out).max() == pytest.approx(0.99)
    quiet = np.array([0.1, -0.99, 0.3])
    assert limit_peak(quiet) is quiet  # never scaled up, not copied
    empty = np.zeros(0)
    assert limit_peak(empty) is empty
    assert np.abs(limit_peak(loud, peak=0.5)).max() == pytest.approx(0.5)


def _tone(n: int, amp: float) -> np.ndarray:
    return amp * np.sin(2 * np.pi * 440 * np.arange(n) / 16000)


def test_write_synthesized(tmp_path):
    seconds, plotted = write_synthesized(tmp_path / "a" / "u1.wav", _tone(8000, 3.0), 16000, "u1: test")
    assert seconds == 0.5 and plotted and (tmp_path / "a" / "u1.png").stat().st_size > 1000
    x, sr = sf.read(tmp_path / "a" / "u1.wav")
    assert sr == 16000 and len(x) == 8000 and sf.info(tmp_path / "a" / "u1.wav").subtype == "PCM_16"
    assert np.abs(x).max() == pytest.approx(0.99, abs=1e-4)  # limited, not clipped
    # no title: no PNG; limit=False: the samples as given
    assert write_synthesized(tmp_path / "u2.wav", _tone(1600, 0.5), 16000) == (0.1, False)
    assert not (tmp_path / "u2.png").exists()
    write_synthesized(tmp_path / "u3.wav", _tone(1600, 0.995), 16000, limit=False)
    assert np.abs(sf.read(tmp_path / "u3.wav")[0]).max() == pytest.approx(0.995, abs=1e-4)


def test_a_clip_shorter_than_one_window_gets_no_png_and_a_warning(tmp_path, caplog):
    results = []
    for utt, n in (("long", 400), ("short", 399)):  # 25 ms at 16 kHz = 400 samples
        seconds, plotted = write_synthesized(tmp_path / f"{utt}.wav", _tone(n, 0.5), 16000, utt)
        results.append((utt, str(tmp_path / f"{utt}.wav"), seconds, plotted))
    assert [r[3] for r in results] == [True, False]
    assert (tmp_path / "long.png").is_file() and not (tmp_path / "short.png").exists()
    assert (tmp_path / "short.wav").is_file()
    log = logging.getLogger("test-audio-out")
    with caplog.at_level(logging.WARNING):
        warn_unplotted(results, {"long", "short"}, log)
        warn_unplotted(results, {"long"}, log)  # not asked for: no warning
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("test-audio-out", "no spectrogram PNG for 1 utterance(s) shorter than the 25 ms analysis window: short")]


def test_map_jobs_keeps_the_order():
    jobs = [(i, 10) for i in range(5)]
    assert map_jobs(operator.mul, jobs) == [0, 10, 20, 30, 40]
    assert map_jobs(operator.mul, jobs, nj=2) == [0, 10, 20, 30, 40]  # spawned processes
    assert map_jobs(operator.mul, [], nj=3) == []


def test_world_vocode_names_the_utterance(tmp_path):
    conf = {"type": "world", "sample_rate": 16000, "frame_period": 5.0, "mcep_dim": 40}
    with pytest.raises(DataError, match="utterance 'u9': world_synthesize: features must be"):
        world_vocode("u9", np.zeros((4, 7)), conf, str(tmp_path), "t")
    assert not list(tmp_path.iterdir())
