"""Discrete codes (a VQ-VAE's units) on disk: the codes table and the text rows of a code frame.

* :func:`read_codes` -- the codes table, a Kaldi text table ``<utt> <code> <code> ...`` of codebook
  indices (``speechkit-extract-units`` writes it as ``OUT_DIR/codes``; the inverter is trained on it
  and ``speechkit-resynthesize`` reads it).
* :func:`codebook_rows` / :func:`onehot_rows` -- the text line of each code in a unit dir's
  ``<utt>.txt`` files (ZeroSpeech 2019's submission format): code ``k`` as its codebook vector
  ``e_k`` or as its one-hot vector.
"""
from __future__ import annotations

import os

import numpy as np

from speechkit.utils.fileio import DataError, read_lines

__all__ = ["read_codes", "codebook_rows", "onehot_rows"]


def read_codes(path: str | os.PathLike, codebook_size: int | None = None) -> dict[str, np.ndarray]:
    """Read a code table ``<utt> <code> <code> ...`` into ``{utt: (T',) int64}``.

    Raises:
        FileNotFoundError: no such file.
        DataError: a line without codes, a duplicate utterance, a code that is not an integer or
            (with ``codebook_size``) lies outside ``[0, codebook_size)``; names the file and line.
    """
    out: dict[str, np.ndarray] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            raise DataError(f"{path}:{lineno}: utterance '{parts[0]}' has no codes")
        if parts[0] in out:
            raise DataError(f"{path}:{lineno}: utterance '{parts[0]}' appears twice")
        try:
            codes = np.array([int(c) for c in parts[1:]], dtype=np.int64)
        except ValueError:
            bad = next(c for c in parts[1:] if not c.lstrip("-").isdigit())
            raise DataError(f"{path}:{lineno}: '{parts[0]}': code {bad!r} is not an integer") from None
        if codebook_size is not None and (codes.min() < 0 or codes.max() >= codebook_size):
            bad = int(codes[(codes < 0) | (codes >= codebook_size)][0])
            raise DataError(f"{path}:{lineno}: '{parts[0]}': code {bad} outside [0, {codebook_size}) "
                            f"(model.codebook_size)")
        out[parts[0]] = codes
    return out


def codebook_rows(codebook) -> list[str]:
    """Row ``k`` is the text line of codebook vector ``e_k`` (``De`` numbers, 9 significant digits:
    float32 values round-trip exactly, so distinct vectors stay distinct lines).

    Args:
        codebook: ``(K, De)`` array or tensor.
    """
    m = np.asarray(codebook, dtype=np.float32)
    return [" ".join(f"{v:.9g}" for v in row) for row in m.tolist()]


def onehot_rows(codebook_size: int) -> list[str]:
    """Row ``k`` is the text line of the one-hot vector of code ``k`` (``K`` space-separated 0/1)."""
    zeros = ["0"] * codebook_size
    rows = []
    for k in range(codebook_size):
        zeros[k] = "1"
        rows.append(" ".join(zeros))
        zeros[k] = "0"
    return rows
