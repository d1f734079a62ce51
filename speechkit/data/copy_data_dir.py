"""Copying a Kaldi data directory, optionally renaming utterances and speakers
(Kaldi's ``utils/copy_data_dir.sh``)."""
from __future__ import annotations

import logging
import os

from speechkit.data.datadir import DataDir, extras_of
from speechkit.utils.outputs import check_output_dir

logger = logging.getLogger(__name__)


def copy_data_dir(src: str | os.PathLike, dest: str | os.PathLike, *, utt_prefix: str = "", spk_prefix: str = "",
                  utt_suffix: str = "", spk_suffix: str = "") -> DataDir:
    """Copy a data dir, optionally renaming utterances and speakers (Kaldi's ``utils/copy_data_dir.sh``).

    Utterance ids become ``utt_prefix + utt + utt_suffix`` in every per-utterance table (and in
    ``wav.scp`` when there is no ``segments``; recording ids are kept otherwise); speaker ids
    become ``spk_prefix + spk + spk_suffix`` in ``utt2spk``, ``cmvn.scp`` and ``spk2gender``.
    ``phone_alignments`` and ``frame_shift``/``feats.yaml``/``cmvn_global.ark`` are carried along.
    Use the same prefix for both to keep speaker ids prefixes of utterance ids. An existing ``dest``
    is updated by :func:`~speechkit.data.datadir.update_data_dir`: features and CMVN stats computed
    there later are kept while its utterances and audio stay the same; whatever is replaced or
    removed is first backed up to ``dest/.backup/N`` (logged).

    Raises:
        OutputOverlapError: ``dest`` is, contains or lies inside ``src``.
    """
    check_output_dir(dest, inputs={"the source": src}, option="destination")
    d = DataDir.load(src)
    if utt_prefix != spk_prefix:
        logger.warning("copy_data_dir: --utt-prefix %r differs from --spk-prefix %r; speaker ids may no "
                       "longer be prefixes of utterance ids", utt_prefix, spk_prefix)

    def mu(u: str) -> str:
        return f"{utt_prefix}{u}{utt_suffix}"

    def ms(s: str) -> str:
        return s if s == "global" else f"{spk_prefix}{s}{spk_suffix}"

    out = DataDir()
    out.utt2spk = {mu(u): ms(s) for u, s in d.utt2spk.items()}
    for attr in ("text", "segments", "utt2lang", "utt2dur", "feats_scp", "utt2num_frames", "phone_alignments"):
        table = getattr(d, attr)
        if table is not None:
            setattr(out, attr, {mu(k): v for k, v in table.items()})
    if d.spk2gender is not None:
        out.spk2gender = {ms(k): v for k, v in d.spk2gender.items()}
    if d.wav_scp is not None:
        out.wav_scp = dict(d.wav_scp) if d.segments is not None else {mu(k): v for k, v in d.wav_scp.items()}
    if d.cmvn_scp is not None:
        out.cmvn_scp = {ms(k): v for k, v in d.cmvn_scp.items()}
    out.write(dest, extras=extras_of(d.path))
    return out
