"""Worker process of :func:`speechkit.data.corpora.mini.download_mini`: synthesizes one speaker.

Usage (internal): ``python -m speechkit.data.corpora._mini_worker JOB.json OUT.json``. The job lists
the speaker's voice settings and its utterances (id, language, text, wav path). For each, in order:
synthesize with espeak-ng (a fresh engine in this fresh process, so the output depends only on the
job), resample 22050 -> 16000 Hz with soxr (HQ), write a 16-bit WAV, and turn the phoneme events
into intervals. ``OUT.json`` (written atomically, last) holds ``[{"utt", "num_samples", "phones":
[[start_s, end_s, label], ...]}, ...]``.
"""
from __future__ import annotations

import ctypes
import json
import sys
import zlib

import numpy as np
import soxr

from speechkit.data.audio import write_wav
from speechkit.data.corpora._espeak import Espeak, EspeakError
from speechkit.data.corpora.mini import phone_segments
from speechkit.utils.fileio import atomic_write

#: Peak level the synthesized audio is normalised to (espeak's own level varies by voice).
PEAK = 0.9


def _seed_libc_rand(seed: int) -> None:
    """Re-seed libc ``rand()`` (espeak-ng draws breath/aspiration noise from it)."""
    try:
        ctypes.CDLL(None).srand(ctypes.c_uint(seed & 0xFFFFFFFF))
    except (OSError, AttributeError):  # pragma: no cover - non-POSIX libc
        pass


def synthesize_job(job: dict) -> list[dict]:
    """Synthesize every utterance of ``job`` (see the module docstring); returns the result rows."""
    spk = job["speaker"]
    sr_out = int(job["sample_rate"])
    engine = Espeak()
    rows = []
    for u in job["utterances"]:
        _seed_libc_rand(zlib.crc32(f"{job['seed']}:{u['utt']}".encode("utf-8")))
        syn = engine.synth(u["text"], f"{u['lang']}+{spk['variant']}", rate=spk["rate"], pitch=spk["pitch"],
                           pitch_range=spk["range"])
        if syn.samples.size == 0:
            raise EspeakError(f"espeak-ng produced no audio for {u['utt']} ({u['text']!r})")
        x = syn.samples.astype(np.float64) / 32768.0
        y = soxr.resample(x, syn.sample_rate, sr_out, quality="HQ")
        peak = float(np.max(np.abs(y)))
        if peak > 0:
            y = y * (PEAK / peak)
        write_wav(u["wav"], y.astype(np.float32), sr_out)
        segs = phone_segments(syn.phonemes, syn.samples.size, syn.sample_rate, max_end=len(y) / sr_out)
        rows.append({"utt": u["utt"], "num_samples": int(len(y)), "phones": [[b, e, lab] for b, e, lab in segs]})
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m speechkit.data.corpora._mini_worker JOB.json OUT.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    rows = synthesize_job(job)
    with atomic_write(argv[1]) as f:
        json.dump(rows, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
