"""Utterance-level language identification (LID) scoring: accuracy, confusion matrix, recall.

Joshi et al. (Interspeech 2021, section 6.2, Table 5) report the LID accuracy of LID-free
multilingual decoding next to WER: "the percentage of utterances with matching scripts between
hypothesis and transcription" (each language has its own script, so the script is the language;
for the multi-softmax LID model, the language whose decoder wins). This module scores such
decisions against the truth.

Every reference utterance counts: one with no hypothesis is an error, shown in the confusion
matrix's ``<missing>`` column (so accuracy can never look better because decoding failed on
some utterances). A hypothesis for an utterance that is not in the reference is an error.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from speechkit.utils.fileio import DataError, atomic_write, read_table

# matplotlib is imported where used (heavy): only the confusion-matrix PNG needs it.

MISSING = "<missing>"


@dataclass
class LidResult:
    """LID scores.

    Attributes:
        labels: reference languages (C-sorted) -- the confusion matrix's rows.
        hyp_labels: its columns: ``labels``, then languages only ever hypothesised, then
            ``<missing>`` if some reference had no hypothesis.
        confusion: ``(len(labels), len(hyp_labels))`` int array; ``[i, j]`` = utterances of
            language ``labels[i]`` classified as ``hyp_labels[j]``.
        missing: reference utterances without a hypothesis (counted as errors).
    """

    labels: list[str]
    hyp_labels: list[str]
    confusion: np.ndarray
    missing: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return int(self.confusion.sum())

    @property
    def correct(self) -> int:
        return int(sum(self.confusion[i, self.hyp_labels.index(lab)] for i, lab in enumerate(self.labels)))

    @property
    def accuracy(self) -> float:
        """Percent of reference utterances whose hypothesis is their language."""
        return 100.0 * self.correct / self.total if self.total else float("nan")

    def recall(self) -> dict[str, float]:
        """Per reference language: percent of its utterances recognised as it."""
        return {lab: 100.0 * self.confusion[i, self.hyp_labels.index(lab)] / self.confusion[i].sum()
                for i, lab in enumerate(self.labels)}

    def precision(self) -> dict[str, float | None]:
        """Per reference language: percent of the utterances hypothesised as it that are it
        (None when it was never hypothesised)."""
        out: dict[str, float | None] = {}
        for i, lab in enumerate(self.labels):
            col = self.confusion[:, self.hyp_labels.index(lab)]
            out[lab] = 100.0 * col[i] / col.sum() if col.sum() else None
        return out

    def balanced_accuracy(self) -> float:
        """Unweighted mean of the per-language recalls (percent)."""
        r = self.recall()
        return sum(r.values()) / len(r)

    def summary_line(self) -> str:
        """``LID accuracy: 97.50 % [ 390 / 400 ]``."""
        return f"LID accuracy: {self.accuracy:.2f} % [ {self.correct} / {self.total} ]"

    def table(self) -> str:
        """The confusion matrix (rows: reference, columns: hypothesis) with per-language recall."""
        cols = self.hyp_labels
        w = max([len(c) for c in cols + self.labels] + [6])
        corner = "ref\\hyp"
        head = f"{corner:<{w}} " + " ".join(f"{c:>{w}}" for c in cols) + f" {'total':>{w}} {'recall%':>8}"
        lines = [head]
        rec = self.recall()
        for i, lab in enumerate(self.labels):
            row = " ".join(f"{int(n):>{w}}" for n in self.confusion[i])
            lines.append(f"{lab:<{w}} {row} {int(self.confusion[i].sum()):>{w}} {rec[lab]:>8.2f}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "accuracy": self.accuracy, "correct": self.correct, "total": self.total,
            "balanced_accuracy": self.balanced_accuracy(),
            "labels": self.labels, "hyp_labels": self.hyp_labels, "confusion": self.confusion.tolist(),
            "recall": self.recall(), "precision": self.precision(), "missing": self.missing,
        }

    def plot(self, path: str | os.PathLike) -> None:
        """Save the row-normalised confusion matrix (with counts) as a PNG, atomically."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.confusion / np.maximum(self.confusion.sum(axis=1, keepdims=True), 1)
        fig, ax = plt.subplots(figsize=(1.2 + 0.8 * len(self.hyp_labels), 1.0 + 0.7 * len(self.labels)))
        ax.imshow(rows, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(self.hyp_labels)), self.hyp_labels, rotation=45, ha="right")
        ax.set_yticks(range(len(self.labels)), self.labels)
        ax.set_xlabel("hypothesis")
        ax.set_ylabel("reference")
        for i in range(rows.shape[0]):
            for j in range(rows.shape[1]):
                ax.text(j, i, str(int(self.confusion[i, j])), ha="center", va="center",
                        color="white" if rows[i, j] > 0.5 else "black", fontsize=8)
        ax.set_title(f"LID accuracy {self.accuracy:.2f} % ({self.correct}/{self.total})")
        fig.tight_layout()
        with atomic_write(path, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
        plt.close(fig)


def score_lid(ref: Mapping[str, str], hyp: Mapping[str, str]) -> LidResult:
    """Compare utterance -> language maps.

    Raises:
        ValueError: ``hyp`` has an utterance not in ``ref``, or ``ref`` is empty.
    """
    if not ref:
        raise ValueError("no reference utterances")
    extra = [u for u in hyp if u not in ref]
    if extra:
        raise ValueError(f"{len(extra)} hypothesis utterances are not in the reference, e.g. '{extra[0]}'")
    key = lambda s: s.encode("utf-8")  # noqa: E731
    labels = sorted(set(ref.values()), key=key)
    missing = [u for u in ref if u not in hyp]
    hyp_only = sorted(set(hyp.values()) - set(labels), key=key)
    hyp_labels = labels + hyp_only + ([MISSING] if missing else [])
    col = {lab: j for j, lab in enumerate(hyp_labels)}
    row = {lab: i for i, lab in enumerate(labels)}
    conf = np.zeros((len(labels), len(hyp_labels)), dtype=np.int64)
    for utt, lang in ref.items():
        conf[row[lang], col[hyp.get(utt, MISSING)]] += 1
    return LidResult(labels, hyp_labels, conf, missing)


def read_utt2lang(path: str | os.PathLike, what: str = "utt2lang", allow_empty: bool = False) -> dict[str, str]:
    """Read an ``utt2lang`` file (one language token per utterance).

    Args:
        allow_empty: accept a file with no line (a hypothesis file of a system that chose no
            language for any utterance: every utterance then counts as an error).

    Raises:
        FileNotFoundError; DataError: no line at all (names the file; unless ``allow_empty``), an
        empty line, a missing or multi-word language, a duplicate id (names file and line).
    """
    table = read_table(path)
    if not table and not allow_empty:
        raise DataError(f"{path}: empty {what} file (no utterances)")
    for lineno, (utt, lang) in enumerate(table.items(), 1):  # read_table: one entry per line
        if len(lang.split()) != 1:
            raise DataError(f"{path}:{lineno}: expected '<utt> <lang>', got language {lang!r} for '{utt}'")
    return table
