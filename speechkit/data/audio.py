"""Audio I/O for ``wav.scp`` entries (soundfile only; torchaudio is not required).

A ``wav.scp`` value is either a file path (WAV, FLAC, Ogg Vorbis, anything libsndfile reads) or a
shell command ending in ``|`` whose stdout is audio (Kaldi's "extended filename"), e.g.::

    rec1 /corpus/rec1.flac
    rec2 sox /corpus/rec2.sph -t wav -r 16000 - |
    rec3 speechkit-resample --rate 16000 /corpus/rec3.mp3 |

``speechkit-resample`` (:func:`resampled_wav_bytes`, :func:`resample_pipe`) is the pipe for files
that libsndfile reads and sox may not (MP3, what Common Voice ships, and Ogg Opus have no handler in
Debian's sox): an entry of exactly that form is decoded in this process, to the same bytes the
command writes, without starting it; other tools (Kaldi's) run the command.

Every failure is a :class:`~speechkit.utils.fileio.DataError` whose message names the source
file (``wav.scp`` by default) and the key, so a recipe log says which entry to fix::

    wav.scp: 'spk1_utt3': /corpus/spk1_utt3.wav: file is empty
    wav.scp: 'rec2': has 8000 Hz, config expects 16000 Hz

Samples are returned as mono ``float32`` in ``[-1, 1]`` (integer PCM is scaled by libsndfile;
floating-point files are returned as stored). Multi-channel audio keeps only the **first**
channel, as Kaldi's ``--channel=0`` default does.
"""
from __future__ import annotations

import io
import logging
import os
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf

from speechkit.utils.fileio import DataError, atomic_write

# soxr is imported where used: only a rate change needs it.

logger = logging.getLogger(__name__)

#: Segments may end up to this many seconds past the end of the audio; they are then cut at the
#: end (Kaldi's ``extract-segments --max-overshoot``, default 0.5 s there too). Further is an error.
MAX_OVERSHOOT = 0.5

# libsndfile's log line for a WAV whose header promises more data than the file holds.
_DATA_SHOULD_BE = re.compile(r"^data\s*:\s*(\d+)\s*\(should be (\d+)\)", re.MULTILINE)
# Sizes that streaming writers put in the header when the length is unknown.
_STREAMING_SIZES = {0, 0xFFFFFFFF, 0x7FFFF000, 0x7FFFFFFF}


def is_command(spec: str) -> bool:
    """True if a ``wav.scp`` value is a command (``... |``) rather than a path."""
    return spec.rstrip().endswith("|")


def _where(source: str, key: str) -> str:
    return f"{source}: '{key}'"


#: The command of a resampling pipe in ``wav.scp`` (``speechkit/bin/resample.py``).
RESAMPLE_COMMAND = "speechkit-resample"
#: soxr's quality preset of :func:`resampled_wav_bytes` (what librosa's default ``soxr_hq`` uses).
RESAMPLE_QUALITY = "HQ"


def resample_pipe(path: str | os.PathLike, sample_rate: int) -> str:
    """The ``wav.scp`` value ``speechkit-resample --rate HZ /abs/FILE |`` for ``path`` (any format
    libsndfile reads) at ``sample_rate`` Hz; what :func:`resampled_wav_bytes` returns is its stdout."""
    return f"{RESAMPLE_COMMAND} --rate {int(sample_rate)} {shlex.quote(os.path.abspath(os.fspath(path)))} |"


def parse_resample_pipe(spec: str) -> tuple[str, int] | None:
    """``(file, sample_rate)`` of a ``wav.scp`` value of exactly :func:`resample_pipe`'s form (the
    command alone, nothing piped after it), else ``None``."""
    if not is_command(spec):
        return None
    try:
        words = shlex.split(spec.strip()[:-1])
    except ValueError:
        return None
    if len(words) == 4 and words[0] == RESAMPLE_COMMAND and words[1] == "--rate" and words[2].isdigit() \
            and int(words[2]) > 0:
        return words[3], int(words[2])
    return None


def resampled_wav_bytes(path: str | os.PathLike, sample_rate: int, *, where: str | None = None) -> bytes:
    """Decode ``path``, mix it to mono and resample it to ``sample_rate``: a 16-bit PCM WAV file's bytes.

    Any format libsndfile reads (WAV, FLAC, Ogg Vorbis and Opus, MP3, ...). Channels are averaged
    (as ``sox ... -c 1``); the rate is changed with soxr (quality :data:`RESAMPLE_QUALITY`; none at the
    native rate); samples are clipped to [-1, 1], scaled by 32767 and rounded (no dither: the same
    bytes on every run). Output shape: ``round(n * sample_rate / native_rate)`` samples, one channel.

    Args:
        path: the audio file.
        sample_rate: the output rate in Hz (> 0).
        where: prefix of error messages (default: the path).

    Raises:
        DataError: a missing, empty, undecodable or sample-less file (named), a rate <= 0.
    """
    p = Path(path)
    at = f"{where}: {p}" if where else str(p)  # what error messages start with
    if int(sample_rate) <= 0:
        raise DataError(f"{at}: the rate must be a positive number of Hz, got {sample_rate}")
    if not p.is_file():
        raise DataError(f"{at}: {'not a regular file' if p.exists() else 'no such file'}")
    if p.stat().st_size == 0:
        raise DataError(f"{at}: file is empty")
    try:
        with sf.SoundFile(str(p)) as f:
            reason = _incomplete(f)
            if reason is not None:
                raise DataError(f"{at}: {reason}")
            sr = f.samplerate
            x = _read_all(f, at)
    except (sf.LibsndfileError, RuntimeError) as e:
        raise DataError(f"{at}: not a readable audio file ({str(e).split(': ', 1)[-1]})") from None
    y = x.mean(axis=1, dtype=np.float32) if x.shape[1] > 1 else x[:, 0]
    if sr != int(sample_rate):
        import soxr

        y = soxr.resample(y, sr, int(sample_rate), quality=RESAMPLE_QUALITY)
    pcm = np.round(np.clip(y, -1.0, 1.0) * 32767.0).astype(np.int16)
    buf = io.BytesIO()
    sf.write(buf, pcm, int(sample_rate), format="WAV", subtype="PCM_16")
    return buf.getvalue()


def _read_all(f: sf.SoundFile, at: str) -> np.ndarray:
    """Every frame of ``f`` as ``(frames, channels)`` float32 (an Ogg stream's short end accepted)."""
    x = f.read(dtype="float32", always_2d=True)
    short = f.frames - x.shape[0]
    if short > 0 and not (f.format == "OGG" and short <= _OGG_END_SLACK):
        raise DataError(f"{at}: truncated file (read {x.shape[0]} of {f.frames} samples)")
    return x


def _load_source(spec: str, where: str) -> tuple[object, str]:
    """Return a soundfile-openable object for ``spec`` (a path or, for a command, its bytes)."""
    spec = spec.strip()
    if is_command(spec):
        cmd = spec[:-1].strip()
        if not cmd:
            raise DataError(f"{where}: empty command before '|'")
        resample = parse_resample_pipe(spec)
        if resample is not None:  # speechkit-resample: the same bytes in this process, no subprocess
            return io.BytesIO(resampled_wav_bytes(resample[0], resample[1], where=f"{where}: command {cmd!r}")), \
                f"command {cmd!r}"
        try:
            proc = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  check=False)
        except OSError as e:  # bash itself missing
            raise DataError(f"{where}: cannot run command {cmd!r}: {e}") from None
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            tail = f": {err[-1]}" if err else ""
            raise DataError(f"{where}: command {cmd!r} failed with exit code {proc.returncode}{tail}")
        if not proc.stdout:
            raise DataError(f"{where}: command {cmd!r} wrote no audio to stdout")
        return io.BytesIO(proc.stdout), f"command {cmd!r}"
    path = Path(spec)
    if not path.exists():
        raise DataError(f"{where}: {path}: no such file")
    if not path.is_file():
        raise DataError(f"{where}: {path}: not a regular file")
    if path.stat().st_size == 0:
        raise DataError(f"{where}: {path}: file is empty")
    return str(path), str(path)


def _open(spec: str, where: str) -> tuple[sf.SoundFile, str]:
    src, what = _load_source(spec, where)
    try:
        f = sf.SoundFile(src)
    except (sf.LibsndfileError, RuntimeError) as e:
        msg = str(e).split(": ", 1)[-1] if isinstance(src, str) else str(e)
        raise DataError(f"{where}: {what}: not a readable audio file ({msg})") from None
    try:
        _check_complete(f, where, what)
    except BaseException:
        f.close()
        raise
    return f, what


def _incomplete(f: sf.SoundFile) -> str | None:
    """Why ``f`` is unusable (a header promising more audio than the file holds: a truncated copy;
    no samples), or None."""
    info = f.extra_info or ""
    m = _DATA_SHOULD_BE.search(info)
    if m and int(m.group(1)) not in _STREAMING_SIZES and int(m.group(1)) > int(m.group(2)):
        return f"truncated file (header declares {m.group(1)} bytes of audio data, only {m.group(2)} present)"
    if "File ended unexpectedly" in info:
        return "truncated file (stream ended unexpectedly)"
    if f.frames == 0:
        return "contains no audio samples"
    return None


def _check_complete(f: sf.SoundFile, where: str, what: str) -> None:
    """Reject files whose header promises more audio than they contain (truncated copies)."""
    reason = _incomplete(f)
    if reason is not None:
        raise DataError(f"{where}: {what}: {reason}")


def _check_sr(sr: int, expected_sr: int | None, where: str) -> None:
    if expected_sr is not None and sr != expected_sr:
        raise DataError(f"{where}: has {sr} Hz, config expects {expected_sr} Hz")


def _segment_bounds(start: float, end: float | None, sr: int, frames: int, where: str) -> tuple[int, int]:
    dur = frames / sr
    if start < 0:
        raise DataError(f"{where}: segment start {start:.3f} s is negative")
    if end is not None and end <= start:
        raise DataError(f"{where}: segment end {end:.3f} s is not after its start {start:.3f} s")
    if start >= dur:
        raise DataError(f"{where}: segment starts at {start:.3f} s, beyond the end of the audio ({dur:.3f} s)")
    if end is not None and end > dur + MAX_OVERSHOOT:
        raise DataError(f"{where}: segment ends at {end:.3f} s, beyond the end of the audio ({dur:.3f} s)")
    b = int(round(start * sr))
    e = frames if end is None else min(frames, int(round(end * sr)))
    if e <= b:
        raise DataError(f"{where}: segment {start:.3f}-{end} s is shorter than one sample")
    return b, e


#: Set once multi-channel audio has been reported (at info level, once per process).
_said_multichannel: list[str] = []

#: Largest end-of-stream shortfall accepted from an Ogg file (samples): half the longest Vorbis block.
_OGG_END_SLACK = 4096


def _read(f: sf.SoundFile, b: int, e: int, where: str, what: str) -> np.ndarray:
    try:
        if b:
            f.seek(b)
        x = f.read(e - b, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError) as err:
        raise DataError(f"{where}: {what}: truncated or corrupt audio ({err})") from None
    if x.shape[0] < e - b:
        # Ogg Vorbis: libsndfile's frame count comes from the last page's granule position, and the
        # decoder may deliver up to one block fewer samples at the end of a complete stream (451
        # of msc_malayalam's files, by 8-464 samples). A cut Ogg file cannot be told by this check
        # anyway: its frame count comes from the last page present, so it reads as complete.
        short = e - b - x.shape[0]
        if not (f.format == "OGG" and e == f.frames and short <= _OGG_END_SLACK):
            raise DataError(f"{where}: {what}: truncated file (read {x.shape[0]} of {e - b} samples)")
        logger.debug("%s: %s: %d samples fewer than the Ogg header's count (end of stream)", where, what, short)
    if x.shape[1] > 1:
        if not _said_multichannel:
            _said_multichannel.append(where)
            logger.info("%s: %d channels, keeping the first (channel 0, as Kaldi); said once per process, "
                        "other multi-channel files are treated the same", where, x.shape[1])
        else:
            logger.debug("%s: %d channels, keeping the first", where, x.shape[1])
    return np.ascontiguousarray(x[:, 0])


def read_audio(spec: str, *, key: str = "?", start: float = 0.0, end: float | None = None,
               expected_sr: int | None = None, source: str = "wav.scp") -> tuple[np.ndarray, int]:
    """Read one ``wav.scp`` entry (optionally a segment of it).

    Args:
        spec: the ``wav.scp`` value: a path, or a shell command ending in ``|`` whose stdout is
            audio (run with ``bash -c``; its stdout is read into memory).
        key: the entry's id, for error messages.
        start: segment start in seconds (``segments`` field 3).
        end: segment end in seconds, ``None`` for the end of the audio. An end up to
            :data:`MAX_OVERSHOOT` (0.5 s) past the audio is cut at the end, as in Kaldi.
        expected_sr: if given, the required sample rate in Hz.
        source: the file that holds ``spec``, for error messages.

    Returns:
        ``(samples, sr)``: ``samples`` is a 1-D ``float32`` array of shape ``(num_samples,)`` in
        ``[-1, 1]``, the first channel of multi-channel audio; ``sr`` the sample rate in Hz.

    Raises:
        DataError: missing, empty, truncated, undecodable or non-audio file; a failing command;
            a segment outside the audio; a sample rate other than ``expected_sr``. The message
            names ``source`` and ``key``.
    """
    where = _where(source, key)
    f, what = _open(spec, where)
    with f:
        _check_sr(f.samplerate, expected_sr, where)
        if start == 0.0 and end is None:
            b, e = 0, f.frames
        else:
            b, e = _segment_bounds(start, end, f.samplerate, f.frames, where)
        return _read(f, b, e, where, what), f.samplerate


def probe_audio(path: str, *, key: str | None = None, source: str = "wav.scp") -> tuple[int, int]:
    """Number of samples and sample rate of a file (or ``wav.scp`` command) without decoding it.

    Used by corpus preparers to count durations and to skip bad files. The same checks as
    :func:`read_audio` apply (missing, empty, truncated header, non-audio, no samples).

    Returns:
        ``(num_samples, sr)`` (samples per channel; sample rate in Hz).

    Raises:
        DataError: as :func:`read_audio`; the message names ``source`` and ``key`` (default: the path).
    """
    where = _where(source, key if key is not None else str(path))
    f, _ = _open(str(path), where)
    with f:
        return f.frames, f.samplerate


def write_wav(path: str | os.PathLike, samples: np.ndarray, sr: int) -> None:
    """Write 16-bit PCM WAV atomically (temp file + rename).

    Args:
        path: destination file; parent directories are created.
        samples: shape ``(num_samples,)`` or ``(num_samples, channels)``; float in ``[-1, 1]``
            (values outside are clipped, with a warning) or ``int16``.
        sr: sample rate in Hz.

    Raises:
        ValueError: empty or non-finite samples, or a non-positive sample rate.
    """
    x = np.asarray(samples)
    if x.ndim not in (1, 2) or x.shape[0] == 0:
        raise ValueError(f"{path}: samples must have shape (num_samples,) or (num_samples, channels), got {x.shape}")
    if int(sr) <= 0:
        raise ValueError(f"{path}: sample rate must be positive, got {sr}")
    if x.dtype != np.int16:
        x = x.astype(np.float32)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{path}: samples contain NaN or infinity")
        peak = float(np.max(np.abs(x)))
        if peak > 1.0:
            logger.warning("%s: clipping samples (peak %.3f > 1.0)", path, peak)
            x = np.clip(x, -1.0, 1.0)
    buf = io.BytesIO()  # encoded in memory: a full disk is one error naming path, not tracebacks from soundfile's I/O
    sf.write(buf, x, int(sr), format="WAV", subtype="PCM_16")
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())
