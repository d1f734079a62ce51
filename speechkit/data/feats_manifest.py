"""The manifests of ``speechkit-compute-feats``'s parts, read side: is a ``feats.scp`` current?

Each part ``FEAT_DIR/raw_<type>_<tag>.J.<fp>.ark`` that :mod:`speechkit.features.extract` writes (``<fp>``: a
prefix of the part's fingerprint) has a manifest ``raw_<type>_<tag>.J.<fp>.json``, the ark's name with
``.json`` for ``.ark`` (format :data:`MANIFEST_FORMAT`) recording the data dir it was
written for, the ark's size, ``utt2num_frames`` and, per utterance, a hash of what its features were
computed from (:func:`utt_input_hash`: its ``wav.scp`` entry with the size and time of the files it
names, and its segment). Reading these needs only the data dir and JSON, no frontend, so it sits
in the data layer: :func:`speechkit.data.validate.validate` calls :func:`check_feats_scp`, and the
features layer writes the manifests and uses the same hash (:func:`_utt_inputs`) in its part
fingerprints.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
from pathlib import Path

from speechkit.data.audio import is_command
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError, read_lines

MANIFEST_FORMAT = "speechkit-feats-part/1"

__all__ = ["MANIFEST_FORMAT", "read_manifest", "utt_input_hash", "check_feats_scp"]


def _file_stamp(path: str) -> list:
    try:
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return [None, None]


def _audio_stamp(spec: str) -> list:
    """``[spec, size, mtime_ns]`` for a path (``None``s if absent); for a command, ``[spec,
    [word, size, mtime_ns], ...]`` for every word of it that names an existing file (the files
    the pipe reads: ``sox in.wav -t wav - |`` -> ``in.wav``)."""
    if not is_command(spec):
        return [spec, *_file_stamp(spec.strip())]
    cmd = spec.strip()[:-1]
    try:
        words = shlex.split(cmd)
    except ValueError:  # unbalanced quotes: the shell will complain when it runs
        words = cmd.split()
    return [spec, *([w, *_file_stamp(w)] for w in dict.fromkeys(words) if os.path.isfile(w))]


def _utt_inputs(d: DataDir, utt: str, stamps: dict[str, list]) -> tuple[str | None, list | None, list | None]:
    """``(recording, segment, audio stamp)`` of ``utt`` (``stamps`` caches the stamp per recording)."""
    wav = d.wav_scp or {}
    rec = d.recording_of(utt) if d.segments is None or utt in d.segments else None
    seg = d.segments.get(utt) if d.segments is not None else None
    if rec is not None and rec not in stamps:
        stamps[rec] = _audio_stamp(wav[rec]) if rec in wav else [None]
    return rec, list(seg) if seg else None, stamps.get(rec)


def utt_input_hash(d: DataDir, utt: str, stamps: dict[str, list] | None = None) -> str:
    """A short hash of what ``utt``'s features are computed from (its ``wav.scp`` entry with the
    size and time of the files it names, and its segment), independent of the ids."""
    _, seg, stamp = _utt_inputs(d, utt, {} if stamps is None else stamps)
    return hashlib.sha1(json.dumps([seg, stamp]).encode()).hexdigest()[:16]


def read_manifest(path: Path) -> dict | None:
    """The manifest at ``path``, or ``None`` if it is absent or unreadable."""
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("format") == MANIFEST_FORMAT else None


def check_feats_scp(data_dir: str | os.PathLike, feats: dict[str, tuple[int, str]],
                    utt2num_frames: dict[str, tuple[int, str]] | None = None) -> list[tuple[int, str]]:
    """Check that every ``feats.scp`` entry resolves to the matrix written for it.

    For every ark named: it exists; when ``speechkit-compute-feats`` wrote it (its manifest
    ``<ark stem>.json`` exists), it has the size the manifest records, the entry's offset is
    where that part wrote the utterance (the same id, or one that a copy renamed by a
    prefix/suffix), the frame count agrees with ``utt2num_frames``, and the utterance's inputs
    (``wav.scp`` entry, audio size and time, segment) are those the features were computed from
    (else the features are stale). Arks without a manifest (Kaldi's, ESPnet's) are only checked
    to exist.

    Args:
        data_dir: the data dir (its ``wav.scp``/``segments`` are read for the stale check).
        feats: ``feats.scp`` as utt -> (line, value).
        utt2num_frames: ``utt2num_frames`` as utt -> (line, value), if present.

    Returns:
        ``(line, message)`` per problem (at most one per ark for a missing or changed ark).
    """
    problems: list[tuple[int, str]] = []
    by_ark: dict[str, list[tuple[str, int, str]]] = {}
    for utt, (ln, loc) in feats.items():
        if is_command(loc) or ":" not in loc:
            continue
        ark, off = loc.rsplit(":", 1)
        if ark.startswith("ark:") or not off.isdigit():
            continue
        by_ark.setdefault(ark, []).append((utt, ln, off))
    d: DataDir | None = None
    try:
        d = DataDir.load(data_dir)
    except (OSError, DataError):
        pass
    stamps: dict[str, list] = {}
    for ark, entries in by_ark.items():
        first_ln = min(ln for _, ln, _ in entries)
        if not os.path.isfile(ark):
            problems.append((first_ln, f"'{entries[0][0]}': ark {ark} does not exist "
                             f"({len(entries)} entries point into it); recompute the features"))
            continue
        if not ark.endswith(".ark"):
            continue
        m = read_manifest(Path(ark[:-4] + ".json"))
        if m is None:
            continue
        owner = m.get("data_dir", "another data dir")
        if os.path.getsize(ark) != m.get("ark_bytes"):
            problems.append((first_ln, f"ark {ark} changed since it was written (size differs from its manifest); "
                             "recompute the features"))
            continue
        at: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            for line in read_lines(ark[:-4] + ".scp"):
                u, loc = line.split(" ", 1)
                at[loc.rsplit(":", 1)[1]] = u
        nf, inputs = m.get("utt2num_frames", {}), m.get("inputs")
        for utt, ln, off in entries:
            orig = at.get(off)
            if orig is None or (orig != utt and orig not in utt):
                held = f"it holds '{orig}' there" if orig else "no matrix starts there"
                problems.append((ln, f"'{utt}': {ark}:{off} was written for data dir {owner} ({held}); "
                                 "recompute the features"))
                continue
            if utt2num_frames is not None and utt in utt2num_frames and str(nf.get(orig)) != utt2num_frames[utt][1]:
                problems.append((ln, f"'{utt}': utt2num_frames says {utt2num_frames[utt][1]} frames, the ark holds "
                                 f"{nf.get(orig)} ({ark})"))
            if inputs is not None and d is not None and d.wav_scp is not None and utt in d.utt2spk \
                    and orig in inputs and utt_input_hash(d, utt, stamps) != inputs[orig]:
                problems.append((ln, f"'{utt}': features are stale: its wav.scp/segments entry or audio file "
                                 "changed since they were computed; recompute the features"))
    return problems
