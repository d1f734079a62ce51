"""Subsets of a Kaldi data directory (Kaldi's ``utils/subset_data_dir.sh``).

The in-memory filter every tool shares is :func:`speechkit.data.datadir.subset`; this module writes
a subset chosen by one of ``subset_data_dir.sh``'s modes.
"""
from __future__ import annotations

import logging
import os
import random

from speechkit.data.datadir import DataDir, _as_datadir, extras_of, show_ids, subset
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, read_lines
from speechkit.utils.outputs import check_output_dir

logger = logging.getLogger(__name__)


def subset_data_dir(src: "DataDir | str | os.PathLike", dest: str | os.PathLike, *, first: int | None = None,
                    last: int | None = None, utt_list: str | os.PathLike | None = None,
                    spk_list: str | os.PathLike | None = None, num: int | None = None,
                    seed: int = 777) -> DataDir:
    """Write a subset of ``src`` to ``dest`` (Kaldi's ``utils/subset_data_dir.sh``); exactly one mode.

    Modes: ``first``/``last`` N utterances in sorted order; the utterances listed (first field
    per line) in ``utt_list``; all utterances of the speakers in ``spk_list``; ``num`` utterances
    drawn at random with ``seed`` (the same seed gives the same subset). ``phone_alignments`` and
    ``spk2gender`` are filtered along (:func:`subset`); ``frame_shift``, ``feats.yaml`` and
    ``cmvn_global.ark`` are copied. An existing ``dest`` gets the new tables by
    :func:`~speechkit.data.datadir.update_data_dir`: stale ones are removed after a backup to
    ``dest/.backup/N`` (logged), features and CMVN stats computed there later are kept while its
    utterances and audio stay the same, other files (logs, arks) are never touched.

    Raises:
        ValueError: not exactly one mode, or N < 1.
        OutputOverlapError: ``dest`` is, contains or lies inside ``src`` or the list file.
        DataError: N larger than the number of utterances, or an empty result.
    """
    d = _as_datadir(src)
    modes = [m for m, v in (("first", first), ("last", last), ("utt_list", utt_list), ("spk_list", spk_list),
                            ("num", num)) if v is not None]
    if len(modes) != 1:
        raise ParameterError("num", "choose exactly one of `first`, `last`, `utt_list`, `spk_list`, `num` (got "
                             f"{modes or 'none'})")
    check_output_dir(dest, inputs=[("the source", d.path), ("`utt_list`", utt_list), ("`spk_list`", spk_list)],
                     option="destination")
    utts = d.utts
    n = first if first is not None else last if last is not None else num
    if n is not None:
        if n < 1:
            raise ValueError(f"number of utterances must be >= 1, got {n}")
        if n > len(utts):
            raise DataError(f"{d.path}: cannot take {n} utterances, there are only {len(utts)}")
    if first is not None:
        chosen = utts[:first]
    elif last is not None:
        chosen = utts[-last:]
    elif num is not None:
        chosen = random.Random(seed).sample(utts, num)
    elif utt_list is not None:
        chosen = [line.split()[0] for line in read_lines(utt_list) if line.strip()]
    else:
        spks = {line.split()[0] for line in read_lines(spk_list) if line.strip()}
        unknown = spks - set(d.utt2spk.values())
        if unknown:
            logger.warning("%s: %d speakers of %s are not in the data dir (ignored): %s", d.path, len(unknown),
                           spk_list, show_ids(unknown))
        chosen = [u for u in utts if d.utt2spk[u] in spks]
        if not chosen:
            raise DataError(f"{spk_list}: none of its {len(spks)} speakers is in {d.path}")
    out = subset(d, chosen)
    out.write(dest, extras=extras_of(d.path))
    logger.info("%s: %d utterances of %s", dest, len(out), d.path)
    return out
