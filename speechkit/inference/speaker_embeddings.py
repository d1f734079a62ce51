"""Speaker embeddings of a Kaldi data dir with the frozen GE2E speaker encoder (``speechkit-embed-speakers``).

:func:`embed_data_dir` embeds every utterance (:class:`speechkit.models.speaker_encoder.SpeakerEncoder`;
``nj`` spawned worker processes, one CPU thread each, over the parts of the utterance list:
:func:`speechkit.inference.parts.run_parts`);
:func:`write_embeddings` writes the utterance and speaker vectors (Kaldi ark/scp, float32 256-dim
vectors, as Kaldi's ``xvector.scp`` / ``spk_xvector.scp``), ``num_utts``, ``utt2spk`` and
``skipped``; :func:`embed_speakers` does both into an OUT_DIR written as a whole. The command's
docstring (``speechkit-embed-speakers --help``) gives the file formats. Speaker-vector tables are
read back with :func:`speechkit.data.speakers.load_embeddings`.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from speechkit.data.datadir import DataDir, c_sorted, iter_audio, subset
from speechkit.data.speakers import mean_embedding
from speechkit.features.io import ark_scp_writer
from speechkit.inference.parts import run_parts, split_parts
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

# models.speaker_encoder (torch, resemblyzer) is imported where used: the parts are split and merged without it.

logger = logging.getLogger(__name__)

__all__ = ["embed_data_dir", "write_embeddings", "embed_speakers"]


def _embed_part(data_dir: str, utts: list[str], encoder_kwargs: dict
                ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Embed ``utts`` of ``data_dir`` with a :class:`~speechkit.models.speaker_encoder.SpeakerEncoder`
    of ``encoder_kwargs`` (one part of :func:`embed_data_dir`, here or in a worker process)."""
    from speechkit.models.speaker_encoder import SpeakerEncoder, UtteranceTooShortError

    d = DataDir.load(data_dir)
    part = subset(d, utts)
    part.path = d.path
    enc = SpeakerEncoder(**encoder_kwargs)
    embs: dict[str, np.ndarray] = {}
    skipped: dict[str, float] = {}
    for utt, x, sr in iter_audio(part):
        try:
            embs[utt] = enc.embed(x, sr, key=utt)
        except UtteranceTooShortError as e:
            skipped[utt] = e.speech_seconds
    return embs, skipped


def embed_data_dir(data_dir: str | os.PathLike, *, nj: int = 1, min_speech: float | None = None,
                   trim_silence: bool = True) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Embed every utterance of a data directory.

    Args:
        data_dir: Kaldi data dir with ``wav.scp`` and ``utt2spk`` (optional ``segments``).
        nj: worker processes (parts of the C-sorted utterance list, dealt round-robin); 1 = here.
        min_speech: minimum seconds of speech after trimming (``None``: the encoder's default 0.5 s).
        trim_silence: apply the VAD trimming.

    Returns:
        ``(embeddings, skipped)``: utterance -> float32 ``(256,)`` unit-norm embedding, and
        utterance -> seconds of speech found, for the utterances too short to embed.

    Raises:
        FileNotFoundError: no data dir / utt2spk.
        DataError: unreadable audio or a data dir without ``wav.scp`` (names the utterance).
    """
    from speechkit.models.speaker_encoder import DEFAULT_MIN_SPEECH

    if nj < 1:
        raise ParameterError("nj", f"`nj` must be >= 1, got {nj}")
    d = DataDir.load(data_dir)
    if d.wav_scp is None:
        raise DataError(f"{data_dir}/wav.scp: missing (needed to read audio)")
    kwargs = dict(min_speech=DEFAULT_MIN_SPEECH if min_speech is None else min_speech, trim_silence=trim_silence)
    utts = d.utts
    if not utts:
        raise DataError(f"{data_dir}/utt2spk: no utterances")
    parts = split_parts(utts, min(nj, len(utts)))
    embs: dict[str, np.ndarray] = {}
    skipped: dict[str, float] = {}
    results = run_parts(_embed_part, [(j, (str(data_dir), part, kwargs), {}) for j, part in enumerate(parts, 1)],
                        workers=len(parts), threads=1)
    for e, s in results:
        embs.update(e)
        skipped.update(s)
    return embs, skipped


def _nothing_embedded(skipped: dict[str, float], out: Path) -> DataError:
    first = c_sorted(skipped)[:5]
    return naming_parameters(DataError(
        f"no utterance could be embedded ({len(skipped)} too short): {', '.join(first)}"
        f"{' ...' if len(skipped) > len(first) else ''} have less speech than `min_speech`; nothing written to {out}"))


def write_embeddings(out_dir: str | os.PathLike, embeddings: dict[str, np.ndarray], skipped: dict[str, float],
                     utt2spk: dict[str, str], renormalize: bool = True,
                     final_dir: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """Write the files listed in the module docstring into ``out_dir`` and return the speaker vectors.

    Args:
        final_dir: where ``out_dir`` will be once it is moved into place (a temporary dir of
            :func:`speechkit.utils.outputs.replace_dir`): the scps name the arks there. Default
            ``out_dir``.

    Raises:
        DataError: nothing to write (every utterance skipped; names the first).
    """
    out = Path(out_dir).resolve()
    final = Path(final_dir).resolve() if final_dir is not None else out
    if not embeddings:
        raise _nothing_embedded(skipped, final)
    by_spk: dict[str, list[str]] = {}
    for utt in c_sorted(embeddings):
        by_spk.setdefault(utt2spk[utt], []).append(utt)
    spk_vecs = {spk: mean_embedding(np.stack([embeddings[u] for u in us]), renormalize=renormalize)
                for spk, us in by_spk.items()}
    with atomic_write(out / "skipped") as f:
        for utt in c_sorted(skipped):
            f.write(f"{utt} {skipped[utt]:.3f}\n")
    write_table(out / "num_utts", {spk: len(us) for spk, us in by_spk.items()})
    write_table(out / "utt2spk", {utt: utt2spk[utt] for utt in embeddings})
    with ark_scp_writer(out / "embeddings.ark", out / "embeddings.scp", scp_ark=final / "embeddings.ark") as w:
        for utt in c_sorted(embeddings):
            w(utt, np.asarray(embeddings[utt], dtype=np.float32))
    with ark_scp_writer(out / "spk_embeddings.ark", out / "spk_embeddings.scp",
                        scp_ark=final / "spk_embeddings.ark") as w:
        for spk in c_sorted(spk_vecs):
            w(spk, spk_vecs[spk])
    return spk_vecs


def embed_speakers(data_dir: str | os.PathLike, out_dir: str | os.PathLike, *, nj: int = 1,
                   min_speech: float | None = None, trim_silence: bool = True, renormalize: bool = True,
                   log: logging.Logger = logger
                   ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float]]:
    """Embed every utterance of ``data_dir`` and write OUT_DIR as a whole (``speechkit-embed-speakers``).

    :func:`embed_data_dir`, then :func:`write_embeddings` into a temporary dir that replaces
    ``out_dir`` (no backup: derived data); the skipped utterances and the speakers left without a
    vector are logged to ``log`` (the CLI passes its own logger). Options and ``out_dir`` are
    checked before any work.

    Returns:
        ``(embeddings, speaker_vectors, skipped)``: utterance -> embedding, speaker -> vector,
        utterance -> seconds of speech of those too short to embed.

    Raises:
        ParameterError: ``nj < 1`` or a negative ``min_speech`` (naming it).
        OutputOverlapError: ``out_dir`` is, contains or lies inside ``data_dir``.
        DataError: every utterance too short (names the first; nothing written), unreadable audio.
        FileNotFoundError: no data dir / utt2spk.
    """
    if nj < 1:
        raise ParameterError("nj", f"`nj` must be >= 1, got {nj}")
    if min_speech is not None and min_speech < 0:
        raise ParameterError("min_speech", f"`min_speech` must be >= 0 seconds, got {min_speech}")
    out = Path(out_dir)
    check_output_dir(out, inputs={"`data_dir`": data_dir}, option="`out_dir`")
    d = DataDir.load(data_dir)
    embs, skipped = embed_data_dir(data_dir, nj=nj, min_speech=min_speech, trim_silence=trim_silence)
    if not embs:  # the error names them (no OUT_DIR/skipped is written to point at)
        raise _nothing_embedded(skipped, out)
    with replace_dir(out, backup=False, owner="speechkit-embed-speakers") as tmp:
        spk_vecs = write_embeddings(tmp, embs, skipped, d.utt2spk, renormalize=renormalize, final_dir=out)
    if skipped:
        first = c_sorted(skipped)[:5]
        log.warning("skipped %d of %d utterances with too little speech for the speaker encoder "
                    "(listed in %s): %s%s", len(skipped), len(d), out / "skipped",
                    ", ".join(first), " ..." if len(skipped) > len(first) else "")
    lost = [s for s in d.spk2utt if s not in spk_vecs]
    if lost:
        log.warning("%d speakers have no usable utterance and no speaker vector: %s", len(lost),
                    ", ".join(lost[:10]) + (" ..." if len(lost) > 10 else ""))
    log.info("wrote %d utterance and %d speaker embeddings to %s (%d skipped)", len(embs),
             len(spk_vecs), out_dir, len(skipped))
    return embs, spk_vecs, skipped
