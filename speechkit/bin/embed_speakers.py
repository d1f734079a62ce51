"""Speaker embeddings of a Kaldi data directory with the frozen GE2E encoder of Resemblyzer.

  speechkit-embed-speakers DATA_DIR OUT_DIR [--nj N] [--min-speech S] [--no-trim-silence] [--no-renormalize]

Every utterance of DATA_DIR (wav.scp, optional segments; any sample rate, resampled to 16 kHz)
is level-normalised, VAD-trimmed and embedded (see speechkit.models.speaker_encoder). Writes, each
file atomically (Kaldi ark/scp through kaldiio, float32 *vectors* of 256 dims, as Kaldi's
xvector.scp / spk_xvector.scp; kaldiio.load_scp gives 1-D arrays):

  OUT_DIR/embeddings.{ark,scp}      utterance -> unit-norm utterance embedding
  OUT_DIR/spk_embeddings.{ark,scp}  speaker -> mean of its utterance embeddings, re-normalised to
                                    unit L2 norm (unless --no-renormalize): the speaker vector of
                                    Hemati & Borth (2024), section 3
  OUT_DIR/num_utts                  '<speaker> <utterances averaged>'
  OUT_DIR/utt2spk                   the embedded utterances' speakers (the verifier's labels)
  OUT_DIR/skipped                   '<utt> <speech-seconds>' for each utterance with less than
                                    --min-speech seconds of speech after trimming (empty if none)

Skipped utterances are counted and reported (warning with the first ids, after OUT_DIR/skipped is
written); a speaker all of whose utterances were skipped gets no speaker vector (warning naming
it); when every utterance is skipped that is an error naming the first ones, and nothing is
written. Unreadable audio is an error naming the utterance.

OUT_DIR is written as a whole: the files go to a temporary directory that replaces OUT_DIR only when
all are written, so a failed or killed run leaves the previous OUT_DIR complete and untouched. The
previous OUT_DIR is deleted, not backed up (embeddings are derived data that the same inputs give
again; the vctk recipe re-runs this at every stage 5). OUT_DIR may not be, contain or lie inside DATA_DIR;
an existing file as OUT_DIR is an error. Both, and the options, are checked before any work.
--nj N embeds N contiguous parts of the utterance list in N worker processes (one CPU thread each);
the output does not depend on N.

Example:
  speechkit-embed-speakers data/train exp/spk_embed/train --nj 2
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import numpy as np

from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-embed-speakers"
logger = logging.getLogger(PROG)

__all__ = ["embed_data_dir", "write_embeddings", "main"]

_worker_encoder = None


def _init_worker(encoder_kwargs: dict) -> None:
    import torch

    torch.set_num_threads(1)
    global _worker_encoder
    from speechkit.models.speaker_encoder import SpeakerEncoder

    _worker_encoder = SpeakerEncoder(**encoder_kwargs)


def _embed_part(data_dir: str, utts: list[str], encoder=None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Embed ``utts`` of ``data_dir`` with ``encoder`` (in a worker: the one its initializer built)."""
    from speechkit.data.datadir import DataDir, iter_audio, subset
    from speechkit.models.speaker_encoder import UtteranceTooShortError

    d = DataDir.load(data_dir)
    part = subset(d, utts)
    part.path = d.path
    enc = encoder if encoder is not None else _worker_encoder
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
        nj: worker processes (contiguous parts of the C-sorted utterance list); 1 = in-process.
        min_speech: minimum seconds of speech after trimming (``None``: the encoder's default 0.5 s).
        trim_silence: apply the VAD trimming.

    Returns:
        ``(embeddings, skipped)``: utterance -> float32 ``(256,)`` unit-norm embedding, and
        utterance -> seconds of speech found, for the utterances too short to embed.

    Raises:
        FileNotFoundError: no data dir / utt2spk.
        DataError: unreadable audio or a data dir without ``wav.scp`` (names the utterance).
    """
    from speechkit.data.datadir import DataDir
    from speechkit.models.speaker_encoder import DEFAULT_MIN_SPEECH

    if nj < 1:
        raise ValueError(f"--nj must be >= 1, got {nj}")
    d = DataDir.load(data_dir)
    if d.wav_scp is None:
        raise DataError(f"{data_dir}/wav.scp: missing (needed to read audio)")
    kwargs = dict(min_speech=DEFAULT_MIN_SPEECH if min_speech is None else min_speech, trim_silence=trim_silence)
    utts = d.utts
    if not utts:
        raise DataError(f"{data_dir}/utt2spk: no utterances")
    parts = [p.tolist() for p in np.array_split(np.array(utts, dtype=object), min(nj, len(utts))) if len(p)]
    embs: dict[str, np.ndarray] = {}
    skipped: dict[str, float] = {}
    if len(parts) <= 1:
        from speechkit.models.speaker_encoder import SpeakerEncoder

        results = [_embed_part(str(data_dir), parts[0], SpeakerEncoder(**kwargs))]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: torch's thread pools do not survive a fork.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(len(parts), mp_context=ctx, initializer=_init_worker, initargs=(kwargs,)) as ex:
            results = list(ex.map(_embed_part, [str(data_dir)] * len(parts), parts))
    for e, s in results:
        embs.update(e)
        skipped.update(s)
    return embs, skipped


def _nothing_embedded(skipped: dict[str, float], out: Path) -> DataError:
    from speechkit.data.datadir import c_sorted

    first = c_sorted(skipped)[:5]
    return DataError(f"no utterance could be embedded ({len(skipped)} too short): {', '.join(first)}"
                     f"{' ...' if len(skipped) > len(first) else ''} have less speech than --min-speech; nothing "
                     f"written to {out}")


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
    from speechkit.data.datadir import c_sorted
    from speechkit.features.io import ark_scp_writer
    from speechkit.data.speakers import mean_embedding

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


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="Kaldi data dir (wav.scp, utt2spk)")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="where the embeddings go (replaced as a whole; derived data: no backup)")
    parser.add_argument("--nj", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--min-speech", type=float, default=None, metavar="S",
                        help="minimum seconds of speech after VAD trimming (default: 0.5)")
    parser.add_argument("--no-trim-silence", dest="trim_silence", action="store_false",
                        help="do not cut long silences (the whole signal counts as speech)")
    parser.add_argument("--no-renormalize", dest="renormalize", action="store_false",
                        help="speaker vector = plain mean, not scaled to unit length")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        from speechkit.data.datadir import DataDir, c_sorted

        setup_logging(args.log_file)
        if args.nj < 1:
            raise ValueError(f"--nj must be >= 1, got {args.nj}")
        if args.min_speech is not None and args.min_speech < 0:
            raise ValueError(f"--min-speech must be >= 0 seconds, got {args.min_speech}")
        out = Path(args.out_dir)
        check_output_dir(out, inputs={"DATA_DIR": args.data_dir}, option="OUT_DIR")
        d = DataDir.load(args.data_dir)
        embs, skipped = embed_data_dir(args.data_dir, nj=args.nj, min_speech=args.min_speech,
                                       trim_silence=args.trim_silence)
        if not embs:  # the error names them (no OUT_DIR/skipped is written to point at)
            raise _nothing_embedded(skipped, out)
        with replace_dir(out, backup=False) as tmp:
            spk_vecs = write_embeddings(tmp, embs, skipped, d.utt2spk, renormalize=args.renormalize, final_dir=out)
        if skipped:
            first = c_sorted(skipped)[:5]
            logger.warning("skipped %d of %d utterances with too little speech for the speaker encoder "
                           "(listed in %s): %s%s", len(skipped), len(d), out / "skipped",
                           ", ".join(first), " ..." if len(skipped) > len(first) else "")
        lost = [s for s in d.spk2utt if s not in spk_vecs]
        if lost:
            logger.warning("%d speakers have no usable utterance and no speaker vector: %s", len(lost),
                           ", ".join(lost[:10]) + (" ..." if len(lost) > 10 else ""))
        logger.info("wrote %d utterance and %d speaker embeddings to %s (%d skipped)", len(embs),
                    len(spk_vecs), args.out_dir, len(skipped))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
