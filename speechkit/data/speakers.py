"""Speaker vectors on disk: embedding tables, their mean per speaker, the trained-speakers list.

Files (written by ``speechkit-embed-speakers``; Kaldi ark/scp through kaldiio, float32 vectors as
Kaldi's ``xvector.scp`` / ``spk_xvector.scp``)::

    embeddings.scp      utterance -> (E,) utterance embedding
    spk_embeddings.scp  speaker -> (E,) speaker vector (the mean of its utterance embeddings)
    EXP/speakers        the speakers a conditioned model was trained on, one per line, C-sorted

* :func:`load_embeddings` reads an embedding table (vectors, or 1-row matrices);
  :func:`read_speaker_vectors` reads a speaker table and checks it (one size, finite values);
  :func:`read_speaker_dim` gives its ``E``.
* :func:`mean_embedding` is the speaker vector of Hemati & Borth (2021, sec. 3): the mean of a
  speaker's utterance embeddings, re-normalised to unit length by default.
* :func:`utterance_speakers` gives each utterance's speaker from ``utt2spk``, checked against the vectors.
* :func:`write_speakers` / :func:`read_speakers`: the ``EXP/speakers`` list.

The encoder that computes the embeddings is :mod:`speechkit.models.speaker_encoder`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import kaldiio
import numpy as np

from speechkit.utils.fileio import DataError, atomic_write, read_lines, read_table

__all__ = ["load_embeddings", "mean_embedding", "read_speaker_vectors", "read_speaker_dim", "utterance_speakers",
           "write_speakers", "read_speakers"]


def load_embeddings(scp: str | os.PathLike, dim: int | None = 256) -> dict[str, np.ndarray]:
    """Read an ``embeddings.scp`` / ``spk_embeddings.scp`` (Kaldi vectors, or 1-row matrices).

    Args:
        dim: the size every vector must have (default 256, the GE2E encoder's
            :data:`speechkit.models.speaker_encoder.EMBEDDING_DIM`); None = any size.

    Returns:
        key -> float32 ``(dim,)``, in file order.

    Raises:
        FileNotFoundError: no such file.
        DataError: an unreadable entry or one of the wrong size (names the file and key).
    """
    table = read_table(scp)
    out: dict[str, np.ndarray] = {}
    for key, loc in table.items():
        try:
            v = np.asarray(kaldiio.load_mat(loc), dtype=np.float32)
        except Exception as e:  # kaldiio raises several types for bad/missing arks
            raise DataError(f"{scp}: '{key}': cannot read {loc}: {e}") from None
        if v.ndim == 2 and v.shape[0] == 1:
            v = v[0]
        if v.ndim != 1 or (dim is not None and v.shape[0] != dim):
            raise DataError(f"{scp}: '{key}': expected a ({dim},) vector, got shape {v.shape}")
        out[key] = v
    return out


def mean_embedding(embeddings: np.ndarray | Sequence[np.ndarray], renormalize: bool = True) -> np.ndarray:
    """A speaker vector: the mean of the speaker's utterance embeddings (Hemati & Borth 2021, sec. 3).

    Args:
        embeddings: ``(N, D)`` utterance embeddings (N >= 1).
        renormalize: scale the mean to unit L2 norm (default; as Resemblyzer's ``embed_speaker``,
            so speaker vectors lie on the same sphere as utterance embeddings).

    Returns:
        float32 ``(D,)``.

    Raises:
        ValueError: no embeddings, or not a 2-D stack.
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] == 0:
        raise ValueError(f"mean_embedding: expected (N >= 1, dim) embeddings, got shape {e.shape}")
    m = e.mean(axis=0)
    if renormalize:
        norm = np.linalg.norm(m)
        if norm > 0:
            m = m / norm
    return m.astype(np.float32)


def read_speaker_dim(scp: str | os.PathLike, strict: bool = True) -> int | None:
    """The speaker-vector dimension ``E``: the size of the first vector of a ``spk_embeddings.scp``.

    Args:
        strict: raise on a missing, empty or unreadable file; otherwise return None.

    Raises:
        FileNotFoundError: no such file (strict).
        DataError: empty, unreadable or not a vector (strict); names the file and key.
    """
    try:
        if not Path(scp).is_file():
            raise FileNotFoundError(f"{scp}: no speaker embeddings (run speechkit-embed-speakers)")
        vectors = read_speaker_vectors(scp)
        return int(next(iter(vectors.values())).shape[0])
    except (FileNotFoundError, DataError):
        if strict:
            raise
        return None


def read_speaker_vectors(scp: str | os.PathLike) -> dict[str, np.ndarray]:
    """Speaker -> float32 ``(E,)`` vector from a ``spk_embeddings.scp``, all of the same size.

    Raises:
        FileNotFoundError: no such file.
        DataError: empty, an unreadable entry, not a vector, sizes that differ, NaN/Inf (names
            the file and speaker).
    """
    if not Path(scp).is_file():
        raise FileNotFoundError(f"{scp}: no speaker embeddings (run speechkit-embed-speakers)")
    vectors = load_embeddings(scp, dim=None)
    if not vectors:
        raise DataError(f"{scp}: empty")
    first, dim = next(iter(vectors.items()))[0], next(iter(vectors.values())).shape[0]
    for spk, v in vectors.items():
        if v.shape[0] != dim:
            raise DataError(f"{scp}: '{spk}': a ({v.shape[0]},) vector, but '{first}' has ({dim},)")
        if not np.isfinite(v).all():
            raise DataError(f"{scp}: '{spk}': NaN or infinite values")
    return vectors


def utterance_speakers(data_dir: str | os.PathLike, utts: Iterable[str], vectors: dict[str, np.ndarray] | None,
                       scp: str | os.PathLike = "spk_embeddings.scp") -> list[str]:
    """The speaker of each of ``utts`` from ``data_dir/utt2spk``, checked against ``vectors`` (unless None).

    Raises:
        FileNotFoundError: no ``data_dir/utt2spk``.
        DataError: an utterance missing from utt2spk, or a speaker without a vector in ``scp``
            (names the utterance / speaker and the files).
    """
    path = Path(data_dir) / "utt2spk"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (speaker conditioning needs each utterance's speaker)")
    utt2spk = read_table(path)
    out = []
    for utt in utts:
        spk = utt2spk.get(utt)
        if spk is None:
            raise DataError(f"{path}: utterance '{utt}' has no speaker")
        if vectors is not None and spk not in vectors:
            raise DataError(f"{scp}: no vector for speaker '{spk}' (of utterance '{utt}' in {path})")
        out.append(spk)
    return out


def write_speakers(path: str | os.PathLike, speakers: Iterable[str]) -> None:
    """Write the trained speakers, one per line, C-sorted, atomically (``EXP/speakers``)."""
    with atomic_write(path) as f:
        for spk in sorted(set(speakers), key=lambda s: s.encode("utf-8")):
            f.write(f"{spk}\n")


def read_speakers(path: str | os.PathLike) -> list[str]:
    """Read :func:`write_speakers`' file (one speaker a line; a byte-order mark starting it is dropped
    with a warning naming the file, as by every table reader: :func:`~speechkit.utils.fileio.read_lines`).

    Raises:
        FileNotFoundError: no such file.
        DataError: not valid UTF-8 (names the file and line).
    """
    return [line.strip() for line in read_lines(path) if line.strip()]
