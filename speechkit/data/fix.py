"""Repairing a Kaldi-format data directory in place, as Kaldi's ``utils/fix_data_dir.sh`` does.

:func:`fix_data_dir` (``speechkit-fix-data-dir``) reads the tables leniently (with the scanner of
:mod:`speechkit.data.validate`), keeps the utterances every table agrees on and rewrites what
changed, after a numbered backup.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from speechkit.data.datadir import (
    GLOBAL_CMVN, PER_SPEAKER, PHONE_ALIGNMENTS, TABLES, _render_utt_lines, backup_files, c_sorted, show_ids,
)
from speechkit.data.validate import _PER_UTT, BOM_PROBLEM, _Report, _scan
from speechkit.utils.fileio import DataError, atomic_write, read_lines

# kaldiio (numpy) is imported where used: only a global cmvn.scp needs it; the data-dir tools start without numpy.

logger = logging.getLogger(__name__)


def _lenient_tables(path: Path) -> tuple[dict[str, dict[str, str]], dict[str, int], set[str]]:
    """Read every table of ``path`` tolerating format problems (logged); non-UTF-8 is an error.

    Returns the tables, their line counts, and every utterance id seen in a per-utterance table
    (``utt2spk``, the utterances of ``spk2utt``, ``text``, ``segments``, ...), malformed lines included.
    """
    tables: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    ids: set[str] = set()
    for fname in (*TABLES, "spk2utt"):
        f = path / fname
        if not f.is_file():
            continue
        report = _Report()
        scanned = _scan(str(f), f.read_bytes(), report, allow_empty_value=True)
        for line in report.result():
            if "not valid UTF-8" in line:
                raise DataError(f"{line} (fix the encoding by hand; nothing was modified)")
            if line.endswith(BOM_PROBLEM):  # the one BOM rule of every reader: dropped, with a warning
                logger.warning("%s: starts with a UTF-8 byte-order mark (U+FEFF); dropped (it is not part of the "
                               "first id)", f)
            else:
                logger.info("fixing %s", line)
        if fname in ("utt2spk", "segments", *_PER_UTT):
            ids |= set(scanned)
        elif fname == "spk2utt":
            ids |= {u for _, v in scanned.values() for u in v.split()}
        table = {}
        for key, (ln, value) in scanned.items():
            bad = _bad_value(fname, value)
            if bad:
                logger.warning("%s:%d: dropping '%s': %s", f, ln, key, bad)
                continue
            table[key] = value
        tables[fname] = table
        counts[fname] = len(scanned)
    return tables, counts, ids


def _bad_value(fname: str, value: str) -> str | None:
    """Why a line of ``fname`` cannot be kept by fix_data_dir (None if it can)."""
    if fname == "text":
        return None
    if not value:
        return "no value"
    if fname in ("utt2spk", "utt2lang") and len(value.split()) != 1:
        return f"expected one id, got {value!r}"
    if fname == "segments":
        parts = value.split()
        if len(parts) != 3:
            return f"needs 4 fields, got {len(parts) + 1}"
        try:
            start, end = float(parts[1]), float(parts[2])
        except ValueError:
            return f"start/end are not numbers: {value!r}"
        if start < 0 or end <= start:
            return f"bad times (start {parts[1]}, end {parts[2]})"
    if fname == "utt2dur":
        try:
            if float(value) <= 0:
                return f"non-positive duration {value!r}"
        except ValueError:
            return f"duration is not a number: {value!r}"
    if fname == "utt2num_frames" and not (value.isdigit() and int(value) > 0):
        return f"frame count is not a positive integer: {value!r}"
    return None


def _render(table: dict[str, str]) -> bytes:
    return "".join(f"{k} {table[k]}\n" if table[k] != "" else f"{k}\n" for k in c_sorted(table)).encode("utf-8")


def fix_data_dir(path: str | os.PathLike) -> tuple[int, int]:
    """Repair a data directory in place, as Kaldi's ``utils/fix_data_dir.sh`` does.

    Sorts every table (C locale), drops duplicate ids (keeping the first), empty and malformed
    lines, keeps only the utterances present in every per-utterance file (``utt2spk``, ``text``,
    ``segments``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``; and ``wav.scp``
    without segments) whose recording is in ``wav.scp``; prunes ``wav.scp`` to the recordings,
    ``cmvn.scp`` and ``spk2gender`` to the speakers and ``phone_alignments`` to the utterances still
    used; regenerates ``spk2utt`` (``utt2spk`` is rebuilt from ``spk2utt`` if only that exists). A
    per-speaker ``cmvn.scp`` also drops the utterances of speakers it lacks; a ``cmvn.scp`` holding
    only a ``global`` entry (older speechkit) is turned into ``cmvn_global.ark``. The files replaced
    are first copied to a new numbered backup ``path/.backup/N/`` (an earlier backup is never
    overwritten). A directory that needs no change is left untouched. The utterances dropped are
    counted and the first few named in a warning.

    Returns:
        ``(kept, total)``: utterances kept, and the number of distinct utterance ids found in any
        per-utterance file of the original directory (``utt2spk``, ``spk2utt``, ``text``, ...).

    Raises:
        FileNotFoundError: no such directory, or neither ``utt2spk`` nor ``spk2utt``.
        DataError: a file is not valid UTF-8, or no utterance would remain (nothing is modified).
        WriteError: the directory or its backup cannot be written.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such data directory")
    tables, counts, all_ids = _lenient_tables(path)
    if "utt2spk" not in tables:
        if "spk2utt" not in tables:
            raise FileNotFoundError(f"{path}/utt2spk: missing (and no spk2utt to rebuild it from)")
        tables["utt2spk"] = {u: s for s, us in tables["spk2utt"].items() for u in us.split()}
        counts["utt2spk"] = len(tables["utt2spk"])
        logger.info("%s: rebuilt utt2spk from spk2utt", path)
    segments = tables.get("segments")
    wav = tables.get("wav.scp")
    if segments is None and wav is not None:
        all_ids |= set(wav)
    alignments = _read_utt_lines_lenient(path / PHONE_ALIGNMENTS) if (path / PHONE_ALIGNMENTS).is_file() else None
    if alignments is not None:
        all_ids |= set(alignments)
    total = len(all_ids)
    per_utt = ["utt2spk", *(f for f in _PER_UTT if f in tables)]
    if segments is not None:
        per_utt.append("segments")
    elif wav is not None:
        per_utt.append("wav.scp")
    keep = set(tables["utt2spk"])
    why: dict[str, str] = {u: "not in utt2spk" for u in all_ids - keep}
    for fname in per_utt[1:]:
        missing = keep - set(tables[fname])
        for u in missing:
            why[u] = f"not in {fname}"
        keep -= missing
    if segments is not None and wav is not None:
        no_rec = {u for u in keep if segments[u].split()[0] not in wav}
        for u in no_rec:
            why[u] = "recording not in wav.scp"
        keep -= no_rec
    cmvn = tables.get("cmvn.scp")
    global_cmvn = None
    if cmvn is not None and set(cmvn) == {"global"}:
        global_cmvn = cmvn["global"]
        del tables["cmvn.scp"]
    elif cmvn is not None:
        no_cmvn = {u for u in keep if tables["utt2spk"][u] not in cmvn}
        for u in no_cmvn:
            why[u] = "speaker not in cmvn.scp"
        keep -= no_cmvn
    if not keep:
        sizes = ", ".join(f"{f}: {len(tables[f])}" for f in per_utt)
        raise DataError(f"{path}: no utterance is in every file ({sizes}); nothing was modified")
    dropped = all_ids - keep
    if dropped:
        reasons: dict[str, list[str]] = {}
        for u in dropped:
            reasons.setdefault(why.get(u, "malformed line"), []).append(u)
        logger.warning("%s: dropping %d of %d utterances: %s", path, len(dropped), total,
                       "; ".join(f"{len(us)} {r} ({show_ids(us)})" for r, us in sorted(reasons.items())))

    new: dict[str, dict[str, str]] = {}
    for fname in per_utt:
        new[fname] = {k: v for k, v in tables[fname].items() if k in keep}
    if segments is not None and wav is not None:
        used = {new["segments"][u].split()[0] for u in keep}
        new["wav.scp"] = {k: v for k, v in wav.items() if k in used}
    spks = {new["utt2spk"][u] for u in keep}
    for fname in PER_SPEAKER:
        if fname in tables:
            new[fname] = {k: v for k, v in tables[fname].items() if k in spks}
    spk2utt: dict[str, list[str]] = {}
    for u in c_sorted(keep):
        spk2utt.setdefault(new["utt2spk"][u], []).append(u)
    new["spk2utt"] = {s: " ".join(us) for s, us in spk2utt.items()}

    rendered = {fname: _render(t) for fname, t in new.items()}
    if alignments is not None:
        rendered[PHONE_ALIGNMENTS] = _render_utt_lines({u: v for u, v in alignments.items() if u in keep}).encode()
    changed = [f for f, b in rendered.items() if not (path / f).is_file() or (path / f).read_bytes() != b]
    if global_cmvn is not None:
        changed.append("cmvn.scp")
    if changed:
        backup = backup_files(path, (*TABLES, "spk2utt", PHONE_ALIGNMENTS))
        if global_cmvn is not None:
            _move_global_cmvn(path, global_cmvn)
        for fname in changed:
            if fname in rendered:
                with atomic_write(path / fname, "wb") as out:
                    out.write(rendered[fname])
        logger.info("%s: rewrote %s (originals in %s)", path, " ".join(changed), backup)
    return len(keep), total


def _move_global_cmvn(path: Path, loc: str) -> None:
    """Write the stats at ``loc`` (a ``cmvn.scp`` value) to ``path/cmvn_global.ark``; remove ``cmvn.scp``."""
    import kaldiio

    try:
        stats = kaldiio.load_mat(loc)
    except Exception as e:  # kaldiio raises several types for bad/missing arks
        raise DataError(f"{path}/cmvn.scp: 'global': cannot read stats at {loc}: {e}") from None
    with atomic_write(path / GLOBAL_CMVN, "wb") as f:
        kaldiio.save_mat(f, stats)
    (path / "cmvn.scp").unlink()
    logger.warning("%s/cmvn.scp: held global stats only; moved them to %s (Kaldi requires cmvn.scp keys to be "
                   "the speakers)", path, path / GLOBAL_CMVN)


def _read_utt_lines_lenient(f: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lineno, line in enumerate(read_lines(f), 1):
        parts = line.split(maxsplit=1)
        if len(parts) < 2:
            logger.warning("%s:%d: dropping malformed line %r", f, lineno, line)
            continue
        out.setdefault(parts[0], []).append(parts[1].rstrip())
    return out
