"""WERR, the relative WER reduction of a run against a baseline run, and whether the two compare.

:func:`werr` is ``100 * (baseline - new) / baseline`` in percent. A baseline is the JSON an earlier
``speechkit-score-wer --json`` wrote (:func:`load_baseline`); it records the :func:`reference_fingerprint`
of the references it was scored on (ids and word tokens, hashed), and :func:`check_werr` refuses a
baseline scored on another reference set and flags a comparison where either run left references
without a hypothesis (``PARTIAL n/N``) or the baseline predates the fingerprint (``UNCHECKED``).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from speechkit.scoring.edit_distance import tokenize
from speechkit.utils.fileio import DataError


def reference_fingerprint(refs: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of a reference set as scored: its utterance ids (C order) with their word
    tokens, so two runs are comparable only if scored on the same utterances with the same text
    (spacing aside). Pass the references as scored (after :func:`~speechkit.scoring.edit_distance.nfc`
    if that was applied)."""
    h = hashlib.sha256()
    for utt in sorted(refs, key=lambda u: u.encode("utf-8")):
        h.update((utt + "\t" + " ".join(tokenize(refs[utt], "word")) + "\n").encode("utf-8"))
    return "sha256:" + h.hexdigest()


@dataclass
class WerrCheck:
    """Whether a WERR compares like with like (:func:`check_werr`).

    Attributes:
        hyp_count: ``(n, N)``: this run's references with a hypothesis, of its references.
        baseline_count: the same for the baseline (``None`` when its JSON does not tell).
        checked: the baseline records the fingerprint of its reference set (and it matched).
    """

    hyp_count: tuple[int, int]
    baseline_count: tuple[int, int] | None
    checked: bool

    @property
    def flags(self) -> list[str]:
        """What the WERR line must carry: ``PARTIAL n/N`` (this run), ``baseline PARTIAL n/N``,
        ``UNCHECKED ...`` (an older baseline JSON); empty for a WERR between two complete runs on
        one reference set."""
        out = []
        n, total = self.hyp_count
        if n < total:
            out.append(f"PARTIAL {n}/{total}")
        if self.baseline_count is not None and self.baseline_count[0] < self.baseline_count[1]:
            out.append(f"baseline PARTIAL {self.baseline_count[0]}/{self.baseline_count[1]}")
        if not self.checked:
            out.append("UNCHECKED: the baseline JSON records no reference fingerprint (an older speechkit-score-wer); "
                       "that both runs were scored on the same references cannot be checked")
        return out

    def suffix(self) -> str:
        """The flags as ``' [PARTIAL 2/4] [UNCHECKED: ...]'`` (empty when there are none)."""
        return "".join(f" [{f}]" for f in self.flags)


def check_werr(baseline: Mapping, baseline_path: str | os.PathLike, refs: Mapping[str, str], num_absent: int,
               ref_path: str | os.PathLike) -> WerrCheck:
    """Check that a WERR of this run against ``baseline`` (a ``speechkit-score-wer --json``) compares
    runs scored on the same reference set, and say how complete both are.

    Args:
        baseline: the baseline JSON (:func:`load_baseline`).
        baseline_path, ref_path: for messages.
        refs: this run's references as scored.
        num_absent: this run's references without a hypothesis.

    Raises:
        DataError: the baseline was scored on another reference set (other utterance ids or other
            reference text; names both files and the utterance counts).
    """
    fp = reference_fingerprint(refs)
    base_fp = baseline.get("ref_fingerprint")
    n_refs = len(refs)

    def count(key: str) -> int | None:
        v = baseline.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    base_total = count("ref_utterances")
    if base_total is None and count("num_sent") is not None and count("num_absent") is not None:
        # older JSON: in 'all' mode the absent references are among the scored sentences
        base_total = count("num_sent") + (0 if baseline.get("mode") == "all" else count("num_absent"))
    if base_fp is not None and base_fp != fp:
        sizes = f"{base_total} and {n_refs} utterances" if base_total is not None and base_total != n_refs else \
            f"{n_refs} utterances each, other ids or other text"
        raise DataError(f"{baseline_path}: scored on another reference set than {ref_path} ({sizes}): a WERR "
                        "would compare different test sets; score both runs on one reference")
    base_count = (base_total - count("num_absent"), base_total) \
        if base_total is not None and count("num_absent") is not None else None
    return WerrCheck(hyp_count=(n_refs - num_absent, n_refs), baseline_count=base_count, checked=base_fp is not None)


def werr(baseline: float | None, new: float | None) -> float | None:
    """Relative WER reduction in percent: ``100 * (baseline - new) / baseline`` (positive = better).

    None when either is undefined or the baseline is 0.
    """
    if baseline is None or new is None or baseline == 0:
        return None
    return 100.0 * (baseline - new) / baseline


def load_baseline(path: str | os.PathLike) -> dict:
    """Read a JSON written by ``speechkit-score-wer --json``; needs ``wer`` (number).

    Raises:
        FileNotFoundError, DataError (not JSON, or ``wer`` missing / not a number).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("wer"), (int, float)):
        raise DataError(f"{path}: no numeric 'wer' key (expected a speechkit-score-wer --json file)")
    return data
