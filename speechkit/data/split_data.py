"""Splitting a Kaldi data directory into N parts for parallel jobs (Kaldi's ``utils/split_data.sh``).

Not to be confused with :mod:`speechkit.data.splits` (reproducible train/dev/test parts).
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from speechkit.data.datadir import (
    EXTRA_FILES, PHONE_ALIGNMENTS, TABLES, DataDir, _as_datadir, extras_of, subset,
)
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)


def split_contiguous(items: list[str], n: int) -> list[list[str]]:
    """``items`` in ``n`` contiguous parts whose sizes differ by at most one (the first ``len % n`` get one more);
    parts are empty when ``n > len(items)``."""
    q, r = divmod(len(items), n)
    out, i = [], 0
    for j in range(n):
        k = q + (1 if j < r else 0)
        out.append(items[i:i + k])
        i += k
    return out


def _split_groups(items: list[str], n: int, weights: dict[str, int] | None = None) -> list[list[str]]:
    """Split ``items`` into ``n`` contiguous non-empty groups with balanced total weight.

    Without weights: sizes differ by at most one (the first ``len % n`` groups get one more).
    With weights (utterances per speaker): start from even item boundaries, then move boundary
    items to the neighbour while that reduces the size difference, as Kaldi's ``split_scp.pl``
    does, never emptying a group.
    """
    if weights is None:
        return split_contiguous(items, n)
    groups: list[list[str]] = [[] for _ in range(n)]
    for i, it in enumerate(items):
        groups[i * n // len(items)].append(it)
    size = [sum(weights[x] for x in g) for g in groups]
    changed = True
    while changed:
        changed = False
        for j in range(n):
            if j < n - 1 and len(groups[j]) > 1:
                c = weights[groups[j][-1]]
                if abs((size[j + 1] + c) - (size[j] - c)) < abs(size[j + 1] - size[j]):
                    groups[j + 1].insert(0, groups[j].pop())
                    size[j] -= c
                    size[j + 1] += c
                    changed = True
            if j > 0 and len(groups[j]) > 1:
                c = weights[groups[j][0]]
                if abs((size[j] - c) - (size[j - 1] + c)) < abs(size[j] - size[j - 1]):
                    groups[j - 1].append(groups[j].pop(0))
                    size[j] -= c
                    size[j - 1] += c
                    changed = True
    return groups


def split_dir_name(n: int, by_speaker: bool = True) -> str:
    """Kaldi's name for a split: ``split4`` (by speaker) or ``split4utt`` (by utterance)."""
    return f"split{n}" if by_speaker else f"split{n}utt"


def split(d: "DataDir | str | os.PathLike", n: int, by_speaker: bool = True) -> list[DataDir]:
    """Split into ``n`` parts ``DIR/split{n}[utt]/{1..n}``, as Kaldi's ``utils/split_data.sh``.

    Parts are contiguous in sorted order and deterministic. By speaker (default) every speaker is
    in one part and parts are balanced in utterances (Kaldi's ``split_scp.pl --utt2spk``); with
    ``by_speaker=False`` (``--per-utt``) parts differ by at most one utterance. An existing split
    dir is reused when it was made from the same content of the source tables (a SHA-256 of their
    bytes in ``split{n}[utt]/.source``; Kaldi compares times, which a source restored with ``cp -p``
    defeats); otherwise it is rebuilt in a temporary directory and swapped in. A :class:`DataDir` without a ``path`` is
    split in memory only.

    Raises:
        ValueError: ``n < 1``.
        DataError: ``n`` larger than the number of speakers (or utterances with ``by_speaker=False``).
    """
    if n < 1:
        raise ValueError(f"number of splits must be >= 1, got {n}")
    if not isinstance(d, DataDir):   # reuse an up-to-date split without loading the source
        src = Path(d)
        top = src / split_dir_name(n, by_speaker)
        if src.is_dir() and _split_is_fresh(top, n, _split_sources(src)):
            logger.info("%s: up to date, reusing it", top)
            return [DataDir.load(top / str(j)) for j in range(1, n + 1)]
    d = _as_datadir(d)
    if by_speaker:
        spk2utt = d.spk2utt
        if n > len(spk2utt):
            raise naming_parameters(DataError(f"{d.path}: cannot split {len(spk2utt)} speakers into {n} parts "
                                              "(use `by_speaker=false`, or fewer jobs)"))
        groups = _split_groups(list(spk2utt), n, {s: len(u) for s, u in spk2utt.items()})
        parts = [[u for s in g for u in spk2utt[s]] for g in groups]
    else:
        if n > len(d):
            raise DataError(f"{d.path}: cannot split {len(d)} utterances into {n} parts")
        parts = _split_groups(d.utts, n)
    if d.path is None:
        return [subset(d, p) for p in parts]

    src = Path(d.path)
    top = src / split_dir_name(n, by_speaker)
    if _split_is_fresh(top, n, _split_sources(src)):
        logger.info("%s: up to date, reusing it", top)
        return [DataDir.load(top / str(j)) for j in range(1, n + 1)]
    stamp = _split_stamp(_split_sources(src))  # of the tables as they are before the parts are cut
    tmp = Path(tempfile.mkdtemp(prefix=f".{top.name}.tmp-", dir=src))
    try:
        out = []
        for j, p in enumerate(parts, 1):
            sub = subset(d, p)
            sub.write(tmp / str(j), extras=extras_of(src))
            out.append(sub)
        (tmp / SPLIT_STAMP).write_text(stamp + "\n", encoding="utf-8")
        old = None
        if top.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{top.name}.old-", dir=src))
            os.replace(top, old / "x")
        os.replace(tmp, top)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for j, sub in enumerate(out, 1):
        sub.path = top / str(j)
    return out


def _split_sources(src: Path) -> list[Path]:
    return [src / f for f in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *EXTRA_FILES) if (src / f).is_file()]


SPLIT_STAMP = ".source"


def _split_stamp(sources: list[Path]) -> str:
    """SHA-256 over the names and bytes of the source tables a split is made from."""
    h = hashlib.sha256()
    for f in sorted(sources, key=lambda p: p.name):
        data = f.read_bytes()
        h.update(f"{f.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _split_is_fresh(top: Path, n: int, sources: list[Path]) -> bool:
    """Whether ``top`` holds the ``n`` parts made from the current *content* of ``sources`` (its
    :data:`SPLIT_STAMP`; times are not trusted: a source restored with ``cp -p`` or moved back from
    ``.backup`` keeps older times than a split made from other content)."""
    stamp = top / SPLIT_STAMP
    if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != _split_stamp(sources):
        return False
    for j in range(1, n + 1):
        part = top / str(j)
        if not (part / "utt2spk").is_file():
            return False
        # a part holds exactly the tables (and extra files) the source has
        if {f.name for f in sources} != {f.name for f in part.iterdir()
                                         if f.name in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *EXTRA_FILES)}:
            return False
    return True
