"""Reproducible train/dev/test splits of a Kaldi data directory.

``split_corpus`` draws the dev and test parts at random from a seed (Python's ``random.Random(seed)``
shuffling the C-sorted ids, so the same seed and data give the same split on any machine):

* by utterance (default): ``round(dev * N)`` and ``round(test * N)`` utterances;
* ``by_speaker``: whole speakers, so no speaker is in two parts. Speakers are visited in shuffled
  order and each goes to test if that brings the test part's utterance count closer to
  ``test * N``, else to dev under the same rule, else to train; the parts thus hold about the
  requested fractions of *utterances* (within half a speaker's worth), even when speakers have
  very different amounts of data.

Every part must be non-empty; a fraction too small for the data is an error, not an empty
directory. ``write_split`` writes ``OUT/{train,dev,test}`` with the side files that belong to the
utterances (``phone_alignments``) or speakers (``spk2gender``), plus the source's ``frame_shift`` and
``feats.yaml``; one of those the source lacks is removed from a part that has it from an earlier
split, as stale tables are. A ``cmvn_global.ark`` is never carried into a part (it holds the
statistics of the whole source, the test part's included: compute each part's own) and one left in
a part by an earlier split is removed. An existing part is updated by
:func:`~speechkit.data.datadir.update_data_dir`: re-running the same split keeps the features and
CMVN stats computed in the parts since, and whatever is replaced or removed is first backed up to
``OUT/<part>/.backup/N`` (logged).
"""
from __future__ import annotations

import logging
import os
import random
from pathlib import Path

from speechkit.data.corpora._common import PHONE_ALIGNMENTS, SPK2GENDER, read_phone_alignments
from speechkit.data.datadir import (
    EXTRA_FILES, GLOBAL_CMVN, TABLES, DataDir, _render_table, c_sorted, extras_of, subset,
)
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, read_lines, read_table
from speechkit.utils.outputs import check_output_dir

logger = logging.getLogger(__name__)

PARTS = ("train", "dev", "test")
_KNOWN = set(TABLES) | {"spk2utt", PHONE_ALIGNMENTS, SPK2GENDER, *(n for n in EXTRA_FILES if n != GLOBAL_CMVN)}


def _check_fractions(dev: float, test: float) -> None:
    for name, f in (("dev", dev), ("test", test)):
        if not 0.0 < f < 1.0:
            raise ParameterError(name, f"`{name}` must be a fraction in (0, 1), got {f}")
    if dev + test >= 1.0:
        raise ParameterError("dev", f"`dev` + `test` must be below 1 (train needs data), got {dev} + {test} = "
                             f"{dev + test}")


def assign_utterances(utts: list[str], dev: float, test: float, seed: int) -> dict[str, list[str]]:
    """Random utterance-level split: ``{"train": [...], "dev": [...], "test": [...]}`` (each C-sorted).

    Raises:
        ValueError: bad fractions.
        DataError: a part would be empty.
    """
    _check_fractions(dev, test)
    ids = c_sorted(utts)
    n = len(ids)
    random.Random(seed).shuffle(ids)
    n_test, n_dev = round(test * n), round(dev * n)
    for name, k, f in (("test", n_test, test), ("dev", n_dev, dev), ("train", n - n_test - n_dev, 1 - dev - test)):
        if k <= 0:
            raise DataError(f"the {name} part would be empty ({f:g} of {n} utterances rounds to {k})")
    parts = {"test": ids[:n_test], "dev": ids[n_test:n_test + n_dev], "train": ids[n_test + n_dev:]}
    return {p: c_sorted(parts[p]) for p in PARTS}


def assign_speakers(utt2spk: dict[str, str], dev: float, test: float, seed: int) -> dict[str, list[str]]:
    """Speaker-disjoint split (see the module docstring): ``{"train": [utts], "dev": [...], "test": [...]}``.

    Raises:
        ValueError: bad fractions.
        DataError: a part would be empty (too few speakers, or every speaker too large for the fraction).
    """
    _check_fractions(dev, test)
    spk_utts: dict[str, list[str]] = {}
    for utt in c_sorted(utt2spk):
        spk_utts.setdefault(utt2spk[utt], []).append(utt)
    speakers = c_sorted(spk_utts)
    random.Random(seed).shuffle(speakers)
    n = len(utt2spk)
    target = {"test": test * n, "dev": dev * n}
    count = {"train": 0, "dev": 0, "test": 0}
    chosen: dict[str, list[str]] = {p: [] for p in PARTS}
    for spk in speakers:
        k = len(spk_utts[spk])
        part = next((p for p in ("test", "dev") if abs(count[p] + k - target[p]) < abs(count[p] - target[p])), "train")
        chosen[part].append(spk)
        count[part] += k
    for p in PARTS:
        if not chosen[p]:
            raise DataError(f"the {p} part would be empty: {len(speakers)} speakers, fractions dev={dev:g} "
                            f"test={test:g} of {n} utterances (use larger fractions or split by utterance)")
    return {p: c_sorted(u for s in chosen[p] for u in spk_utts[s]) for p in PARTS}


def split_corpus(d: DataDir | str | os.PathLike, dev: float, test: float, *, by_speaker: bool = False,
                 seed: int = 0) -> dict[str, DataDir]:
    """Split ``d`` into in-memory ``train``/``dev``/``test`` :class:`DataDir` s (nothing written).

    Args:
        d: a data directory or its path.
        dev: fraction of the utterances for dev, in (0, 1).
        test: fraction for test, in (0, 1); ``dev + test < 1``.
        by_speaker: keep each speaker's utterances in one part.
        seed: the random seed; the same seed and data give the same split.

    Raises:
        ValueError: bad fractions.
        DataError: a part would be empty.
    """
    d = d if isinstance(d, DataDir) else DataDir.load(d)
    if by_speaker:
        parts = assign_speakers(d.utt2spk, dev, test, seed)
    else:
        parts = assign_utterances(list(d.utt2spk), dev, test, seed)
    return {p: subset(d, parts[p]) for p in PARTS}


def write_split(data_dir: str | os.PathLike, out_dir: str | os.PathLike, dev: float, test: float, *,
                by_speaker: bool = False, seed: int = 0) -> dict[str, DataDir]:
    """Split the data directory ``data_dir`` and write ``out_dir/{train,dev,test}``.

    Besides the Kaldi tables, each part gets the lines of ``phone_alignments`` for its
    utterances, the ``spk2gender`` lines of its speakers, and copies of ``frame_shift`` and
    ``feats.yaml``. Other unknown files are not carried (a warning names them). Everything is
    computed before anything is written, so a failing split leaves ``out_dir`` untouched.

    Returns:
        ``{"train": DataDir, "dev": ..., "test": ...}`` as written.

    Raises:
        FileNotFoundError: ``data_dir`` is not a data directory.
        ValueError: bad fractions.
        OutputOverlapError: a part ``out_dir/{train,dev,test}`` is, contains or lies inside
            ``data_dir`` (``out_dir`` itself may hold it: ``data/all`` -> ``data/{train,dev,test}``).
        DataError: a part would be empty, or a malformed side file (file and line named).
    """
    src = Path(data_dir)
    out = Path(out_dir)
    for name in PARTS:
        check_output_dir(out / name, inputs={"the source DATA": src}, option=f"the {name} part")
    d = DataDir.load(src)
    parts = split_corpus(d, dev, test, by_speaker=by_speaker, seed=seed)
    # side files, checked before anything is written
    align_lines: dict[str, list[str]] | None = None
    if (src / PHONE_ALIGNMENTS).is_file():
        read_phone_alignments(src / PHONE_ALIGNMENTS)  # validates the format (file:line errors)
        align_lines = {}
        for line in read_lines(src / PHONE_ALIGNMENTS):
            align_lines.setdefault(line.split(maxsplit=1)[0], []).append(line)
    spk2gender = read_table(src / SPK2GENDER) if (src / SPK2GENDER).is_file() else None
    unknown = sorted(f.name for f in src.iterdir() if f.is_file() and f.name not in _KNOWN and not f.name.startswith("."))
    if unknown:
        logger.warning("%s: not carried into the split: %s", src, ", ".join(unknown))
    for name in PARTS:
        part, dest = parts[name], out / name
        # the extras are copied unchanged into every part (one the source lacks is removed), except the
        # whole source's cmvn_global.ark; a part's own features and stats are kept while its utterances
        # and audio stay the same, and whatever is replaced or removed is backed up (update_data_dir)
        side: dict[str, bytes | None] = extras_of(src, exclude=(GLOBAL_CMVN,))
        side[PHONE_ALIGNMENTS] = None if align_lines is None else "".join(
            line + "\n" for utt in part.utts for line in align_lines.get(utt, ())).encode("utf-8")
        side[SPK2GENDER] = None if spk2gender is None else _render_table(
            {s: g for s, g in spk2gender.items() if s in part.spk2utt})
        part.write(dest, extras=side, why="the source has none, or it holds the whole source's statistics")
        logger.info("%s: %d utterances, %d speakers", dest, len(part), len(part.spk2utt))
    return parts
