"""Edit distance between token sequences as Kaldi's ``compute-wer`` counts it, and the tokens it counts.

Levenshtein distance with unit costs between the reference and hypothesis token sequences.
Several minimum-cost alignments can exist and they can split the same number of errors
differently into substitutions, insertions and deletions (ref ``a b``, hyp ``b c``: two
substitutions, or one deletion + one insertion). This module reproduces the choice of
Kaldi's ``LevenshteinEditDistance`` (``src/util/edit-distance-inl.h``, used by
``compute-wer``): in the dynamic programme over (hypothesis position, reference position) a
cell takes the diagonal step (correct/substitution) only when it is *strictly* cheaper than
both alternatives, otherwise the deletion when strictly cheaper than the insertion, otherwise
the insertion. Ties therefore favour insertion/deletion pairs over substitutions, as sclite's
weighted alignment (ins = del = 3, sub = 4) also does. The per-utterance alignment written by
:func:`align` is the path those counts come from (Kaldi's own ``LevenshteinAlignment``, used
only for its detailed statistics, breaks ties the other way round and can disagree with its
own totals). jiwer/rapidfuzz break ties towards substitutions: the total error count and
hence the WER always agree with them, the sub/ins/del split only where the minimum-cost split
is unique (see the tests).

Percentages (:func:`kaldi_percent`) are computed as Kaldi does (double division stored in a 32-bit
float, printed ``%.2f``), so even the rounding of the last digit matches.

Tokens: words are split on ASCII whitespace, as Kaldi does (:func:`tokenize`); characters (``unit="char"``) are code
points with all whitespace removed, as Kaldi's CER recipes score them (Mandarin, e.g. aishell;
ESPnet instead keeps a ``<space>`` token, so its CERs are not comparable). No other
normalisation (case, Unicode form) is applied unless asked for (:func:`nfc`).
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

EPS = "***"  # the empty side of an insertion/deletion in per-utterance alignments (Kaldi/sclite)

# choices in the dynamic programme
_DIAG, _DEL, _INS = 0, 1, 2


@dataclass(frozen=True)
class EditCounts:
    """Edit operations of one alignment (or a sum of them).

    Attributes:
        ref_len: reference tokens (words or characters).
        ins / dels / subs: insertions, deletions, substitutions.
    """

    ref_len: int
    ins: int
    dels: int
    subs: int

    @property
    def errors(self) -> int:
        """ins + dels + subs (the Levenshtein distance for one utterance)."""
        return self.ins + self.dels + self.subs

    @property
    def correct(self) -> int:
        """Reference tokens aligned to an identical hypothesis token."""
        return self.ref_len - self.dels - self.subs

    def __add__(self, other: "EditCounts") -> "EditCounts":
        return EditCounts(self.ref_len + other.ref_len, self.ins + other.ins, self.dels + other.dels,
                          self.subs + other.subs)


def _dp(ref: Sequence, hyp: Sequence) -> list[bytearray]:
    """Kaldi's choice in every cell; ``choice[h][r]`` for h = 0..len(hyp), r = 0..len(ref)."""
    R = len(ref)
    prev = list(range(R + 1))  # cost of hyp[:0] against ref[:r]: r deletions
    choice = [bytearray([_DEL]) * (R + 1)]
    for h in range(1, len(hyp) + 1):
        tok = hyp[h - 1]
        cur = [0] * (R + 1)
        ch = bytearray(R + 1)
        cur[0] = prev[0] + 1
        ch[0] = _INS
        for r in range(1, R + 1):
            ins = prev[r] + 1
            dele = cur[r - 1] + 1
            diag = prev[r - 1] + (tok != ref[r - 1])
            if diag < ins and diag < dele:
                cur[r] = diag
                ch[r] = _DIAG
            elif dele < ins:
                cur[r] = dele
                ch[r] = _DEL
            else:
                cur[r] = ins
                ch[r] = _INS
        prev = cur
        choice.append(ch)
    return choice


def align(ref: Sequence[str], hyp: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """Kaldi-tie-broken minimum-edit alignment as ``(ref_token, hyp_token)`` pairs.

    ``None`` on the reference side is an insertion, on the hypothesis side a deletion; equal
    tokens are correct, different ones a substitution. Its counts equal :func:`edit_counts`.
    O(len(ref) * len(hyp)) time and memory.
    """
    choice = _dp(ref, hyp)
    out: list[tuple[str | None, str | None]] = []
    h, r = len(hyp), len(ref)
    while h or r:
        c = choice[h][r] if h else _DEL
        if c == _DIAG:
            out.append((ref[r - 1], hyp[h - 1]))
            h, r = h - 1, r - 1
        elif c == _DEL:
            out.append((ref[r - 1], None))
            r -= 1
        else:
            out.append((None, hyp[h - 1]))
            h -= 1
    out.reverse()
    return out


def counts_of(alignment: Iterable[tuple[str | None, str | None]]) -> EditCounts:
    """Count the operations of an alignment from :func:`align`."""
    n = ins = dels = subs = 0
    for a, b in alignment:
        if a is None:
            ins += 1
            continue
        n += 1
        if b is None:
            dels += 1
        elif a != b:
            subs += 1
    return EditCounts(n, ins, dels, subs)


def edit_counts(ref: Sequence[str], hyp: Sequence[str]) -> EditCounts:
    """Insertions, deletions and substitutions of ``hyp`` against ``ref`` as Kaldi counts them."""
    if not hyp or not ref:
        return EditCounts(len(ref), len(hyp), len(ref), 0)
    return counts_of(align(ref, hyp))


def kaldi_percent(num: int, den: int) -> float:
    """``100 * num / den`` rounded to a 32-bit float as compute-wer does (inf/nan for den = 0)."""
    if den == 0:
        return math.inf if num else math.nan
    return float(np.float32(100.0 * num / den))


#: What separates tokens: ASCII whitespace only, as Kaldi's compute-wer splits (a no-break space
#: U+00A0 or an ideographic space U+3000 is part of a token, not a separator).
ASCII_SPACE = " \t\n\r\f\v"
_ASCII_SPACE_RUN = re.compile(f"[{re.escape(ASCII_SPACE)}]+")


def tokenize(text: str, unit: str = "word") -> list[str]:
    """Words (split on ASCII whitespace, as Kaldi does) or characters (code points, ASCII whitespace
    removed) of ``text``.

    Raises:
        ValueError: ``unit`` is neither ``word`` nor ``char``.
    """
    if unit == "word":
        return [w for w in _ASCII_SPACE_RUN.split(text) if w]
    if unit == "char":
        return [c for c in text if c not in ASCII_SPACE]
    raise ValueError(f"unit must be 'word' or 'char', got {unit!r}")


def nfc(table: Mapping[str, str]) -> dict[str, str]:
    """Unicode NFC form of every transcript (``utt -> text``), so that a precomposed letter and its
    decomposed spelling (e.g. Devanagari nukta letters U+0958-U+095F, which NFC decomposes) are the
    same token."""
    return {u: unicodedata.normalize("NFC", t) for u, t in table.items()}
