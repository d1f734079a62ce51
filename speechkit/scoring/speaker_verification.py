"""Speaker verifier and the continual-learning scores of Hemati & Borth (Interspeech 2021), "Continual
Speaker Adaptation for Text-to-Speech Synthesis".

* :class:`SpeakerVerifier` (section 2.3): a linear classifier (multinomial logistic regression,
  scikit-learn's ``LogisticRegression`` with the ``lbfgs`` solver) on speaker embeddings. The
  paper trains its linear classifier at the beginning of each episode, 15 epochs, on the
  embeddings of the ground-truth utterances (passed through the vocoder) of every speaker seen
  so far; the recipe retrains this one for each episode's evaluation on the same kind of data,
  then classifies the synthesized utterances.
* The accuracy matrix ``A[l, i] = a_{l,i}``: accuracy of the verifier (episode ``l``'s) on the
  synthesized speech of speaker ``i`` after episode ``l`` (episodes and speakers 0-based in the
  arrays, 1-based in the formulas; ``A[l, i]`` is NaN for ``i > l``, a speaker not yet seen).
  Accuracies are fractions in [0, 1].
* Retained accuracy (eq. 1) and forgetting (eq. 2), after the paper's reference [18] (Chaudhry et
  al., "Efficient Lifelong Learning with A-GEM", ICLR 2019). As printed:

  .. math::

      RA_T = \\frac{1}{T} \\sum_{i=1}^{T} a_{T,i}  \\qquad (1)

      FG_T = \\frac{1}{T-1} \\sum_{i=1}^{T-1}
             \\max_{l \\in \\{1, \\dots, T-1\\}} (a_{l,i} - a_{T,i})  \\qquad (2)

  Computed here (:func:`forgetting`) with the maximum over ``l in {i, ..., T-1}`` instead: before
  episode ``i`` speaker ``i`` has not been seen, has no class in the verifier and no ``a_{l,i}``,
  so eq. 2's range ``{1, ..., T-1}`` can only be read as the episodes where ``a_{l,i}`` exists.
  (``max_l (a_{l,i} - a_{T,i}) = max_l a_{l,i} - a_{T,i}``.)
  FG_1 is undefined (no earlier speaker) and returned as NaN.
* :func:`aggregate_runs`: mean and spread of RA/FG curves over several speaker orders.
"""
from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np

# sklearn is imported where used (heavy): only fitting the verifier needs it.

__all__ = ["SpeakerVerifier", "accuracy_matrix", "retained_accuracy", "forgetting", "ra_fg_curves",
           "aggregate_runs", "continual_scores"]


class SpeakerVerifier:
    """Linear speaker classifier on embeddings (Hemati & Borth 2021, section 2.3).

    Multinomial logistic regression (softmax over the speakers, L2-regularised with inverse
    strength ``C``, ``lbfgs``), with classes weighted inversely to their frequency by default
    (crowd-sourced speakers have 20 to 400 utterances), optionally on standardised features.
    With a single speaker (the first episode) there is nothing to discriminate: every input is
    assigned to it.

    Defaults chosen on msc_malayalam's 11 crowd speakers with >= 20 recordings (vote >= 0), 5
    utterances per speaker held out, 20 random splits: C in 10..1000, with or without
    standardisation or class weights, all gave 97-98 % held-out accuracy; C = 100, balanced,
    unstandardised was among the best. ``test/bench/bench_speaker_verifier.py`` (at most 45
    utterances per speaker, 10 splits): 98.4 % on raw audio, 98.2 % with train and test audio both
    through WORLD analysis-synthesis (the paper: "always reaches an accuracy above 99% after only 15
    epochs", sec. 2.3, for up to 20 speakers).

    Args:
        C: inverse L2 regularisation strength of ``LogisticRegression``.
        max_iter: ``lbfgs`` iterations.
        standardize: z-normalise each embedding dimension with the training statistics first.
        balanced: ``class_weight="balanced"`` (each speaker weighs the same in the loss).
        seed: ``random_state`` (the lbfgs fit is deterministic anyway).
    """

    def __init__(self, C: float = 100.0, max_iter: int = 3000, standardize: bool = False, balanced: bool = True,
                 seed: int = 0):
        if C <= 0:
            raise ValueError(f"C must be positive, got {C}")
        self.C = C
        self.max_iter = max_iter
        self.standardize = standardize
        self.balanced = balanced
        self.seed = seed
        self._clf = None
        self._single: str | None = None
        self.speakers: list[str] = []
        self.dim: int | None = None

    @staticmethod
    def _check(embeddings, labels=None, what="embeddings") -> tuple[np.ndarray, np.ndarray | None]:
        x = np.asarray(embeddings, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"{what} must be a non-empty (N, dim) array, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError(f"{what} contain NaN or infinity")
        if labels is None:
            return x, None
        y = np.asarray([str(s) for s in labels], dtype=object)
        if y.shape != (x.shape[0],):
            raise ValueError(f"{x.shape[0]} {what} but {len(y)} speaker labels")
        return x, y

    def fit(self, embeddings: np.ndarray, speaker_labels: Sequence[str]) -> "SpeakerVerifier":
        """Train on ``(N, dim)`` embeddings with their ``N`` speaker ids; returns ``self``.

        Raises:
            ValueError: shape mismatch, empty or non-finite input.
        """
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        x, y = self._check(embeddings, speaker_labels)
        self.dim = x.shape[1]
        self.speakers = sorted(set(y.tolist()), key=lambda s: s.encode("utf-8"))
        if len(self.speakers) == 1:
            self._single, self._clf = self.speakers[0], None
            return self
        self._single = None
        lr = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.seed,
                                class_weight="balanced" if self.balanced else None)
        self._clf = make_pipeline(StandardScaler(), lr) if self.standardize else lr
        self._clf.fit(x, y)
        return self

    def _ready(self, x: np.ndarray) -> None:
        if self._clf is None and self._single is None:
            raise RuntimeError("SpeakerVerifier: call fit() first")
        if x.shape[1] != self.dim:
            raise ValueError(f"embeddings have {x.shape[1]} dims, the verifier was trained on {self.dim}")

    def predict(self, embeddings: np.ndarray) -> np.ndarray:
        """Most probable speaker id of each of ``(N, dim)`` embeddings -> ``(N,)`` object array."""
        x, _ = self._check(embeddings)
        self._ready(x)
        if self._single is not None:
            return np.full(len(x), self._single, dtype=object)
        return np.asarray(self._clf.predict(x), dtype=object)

    def predict_proba(self, embeddings: np.ndarray) -> np.ndarray:
        """``(N, S)`` speaker posteriors, columns in the order of :attr:`speakers`."""
        x, _ = self._check(embeddings)
        self._ready(x)
        if self._single is not None:
            return np.ones((len(x), 1))
        classes = list(self._clf.classes_)
        p = self._clf.predict_proba(x)
        return p[:, [classes.index(s) for s in self.speakers]]

    def _check_known(self, y: np.ndarray) -> None:
        unknown = sorted(set(y.tolist()) - set(self.speakers))
        if unknown:
            raise ValueError(f"speaker '{unknown[0]}' was never seen by the verifier "
                             f"(trained on {len(self.speakers)} speakers: {', '.join(self.speakers[:10])}"
                             f"{' ...' if len(self.speakers) > 10 else ''})")

    def accuracy(self, embeddings: np.ndarray, speaker_labels: Sequence[str]) -> float:
        """Fraction of embeddings assigned to their true speaker.

        Raises:
            ValueError: a true speaker the verifier was not trained on (named).
        """
        x, y = self._check(embeddings, speaker_labels)
        self._check_known(y)
        return float(np.mean(self.predict(x) == y))

    def accuracy_per_speaker(self, embeddings: np.ndarray, speaker_labels: Sequence[str]) -> dict[str, float]:
        """Per true speaker: fraction of its embeddings assigned to it (``a_{l,i}`` for each ``i``).

        Returns:
            speaker -> accuracy in [0, 1], for the speakers present in ``speaker_labels`` (C order).

        Raises:
            ValueError: a true speaker the verifier was not trained on (named).
        """
        x, y = self._check(embeddings, speaker_labels)
        self._check_known(y)
        pred = self.predict(x)
        return {s: float(np.mean(pred[y == s] == s))
                for s in sorted(set(y.tolist()), key=lambda s: s.encode("utf-8"))}


# ----------------------------------------------------------------------------- continual scores
def accuracy_matrix(per_episode: Sequence[Mapping[str, float]], order: Sequence[str]) -> np.ndarray:
    """Build ``A`` (``(T, T)``, ``A[l, i] = a_{l+1, i+1}``) from per-episode accuracies.

    Args:
        per_episode: for each episode ``l`` (0-based), speaker -> accuracy of its synthesized speech
            after that episode (e.g. :meth:`SpeakerVerifier.accuracy_per_speaker`); it must hold
            every speaker of ``order[:l+1]``. Other keys (e.g. pre-training speakers) are ignored.
        order: the continual speakers in episode order (``T = len(order)``).

    Returns:
        float ``(T, T)``; NaN above the diagonal (speakers not yet seen).

    Raises:
        ValueError: more episodes than speakers, or a seen speaker missing from an episode (named).
    """
    T = len(order)
    if len(per_episode) > T:
        raise ValueError(f"{len(per_episode)} episodes of accuracies but only {T} speakers in the order")
    A = np.full((T, T), np.nan)
    for l, accs in enumerate(per_episode):
        for i in range(l + 1):
            if order[i] not in accs:
                raise ValueError(f"episode {l + 1}: no accuracy for speaker '{order[i]}' (seen in episode {i + 1})")
            A[l, i] = float(accs[order[i]])
    return A


def _check_matrix(A: np.ndarray, T: int | None) -> tuple[np.ndarray, int]:
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[1] < A.shape[0] or A.shape[0] == 0:
        raise ValueError(f"accuracy matrix must be (episodes, speakers) with episodes <= speakers, got {A.shape}")
    T = A.shape[0] if T is None else int(T)
    if not 1 <= T <= A.shape[0]:
        raise ValueError(f"T must be in 1..{A.shape[0]}, got {T}")
    lower = A[:T, :T][np.tril_indices(T)]
    if not np.isfinite(lower).all():
        raise ValueError(f"accuracy matrix has NaN on or below the diagonal within the first {T} episodes")
    return A, T


def retained_accuracy(A: np.ndarray, T: int | None = None) -> float:
    """Retained accuracy after episode ``T`` (eq. 1): ``RA_T = (1/T) sum_{i=1..T} a_{T,i}``.

    Args:
        A: accuracy matrix (:func:`accuracy_matrix`).
        T: 1-based episode (default: the last row of ``A``).
    """
    A, T = _check_matrix(A, T)
    return float(np.mean(A[T - 1, :T]))


def forgetting(A: np.ndarray, T: int | None = None) -> float:
    """Forgetting after episode ``T`` (Hemati & Borth 2021, eq. 2, after Chaudhry et al., ICLR 2019):
    ``FG_T = (1/(T-1)) sum_{i=1..T-1} ( max_{l in [i, T-1]} a_{l,i} - a_{T,i} )``.

    The maximum runs over the episodes since speaker ``i`` was learnt; eq. 2 as printed takes it
    over ``l in [1, T-1]``, but before episode ``i`` the speaker is unknown and ``a_{l,i}`` undefined
    (NaN in ``A``), so this range is the one where eq. 2 can be evaluated.
    A speaker whose accuracy only rose contributes a negative term (backward transfer), as in
    the standard definition. Returns NaN for ``T = 1``.
    """
    A, T = _check_matrix(A, T)
    if T == 1:
        return math.nan
    terms = [np.max(A[i:T - 1, i]) - A[T - 1, i] for i in range(T - 1)]
    return float(np.mean(terms))


def ra_fg_curves(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(RA_1..RA_L, FG_1..FG_L)`` for the ``L`` episodes (rows) of ``A``; ``FG_1`` is NaN."""
    A, L = _check_matrix(A, None)
    return (np.array([retained_accuracy(A, t) for t in range(1, L + 1)]),
            np.array([forgetting(A, t) for t in range(1, L + 1)]))


def aggregate_runs(curves: Sequence[np.ndarray]) -> dict[str, np.ndarray | int]:
    """Mean and spread of a score curve (RA or FG per episode) over runs (speaker orders, seeds).

    Args:
        curves: one ``(L,)`` curve per run, all of the same length (NaN where undefined).

    Returns:
        ``{"mean", "std", "min", "max": (L,) arrays, "n": runs}``; ``std`` is the sample standard
        deviation (``ddof=1``; 0 for a single run); NaN entries are ignored (all-NaN -> NaN).

    Raises:
        ValueError: no curves, or curves of different lengths.
    """
    if len(curves) == 0:
        raise ValueError("aggregate_runs: no runs")
    lengths = {len(c) for c in curves}
    if len(lengths) != 1:
        raise ValueError(f"aggregate_runs: curves of different lengths {sorted(lengths)}")
    X = np.asarray(curves, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (FG_1)
        n_valid = np.sum(np.isfinite(X), axis=0)
        mean = np.nanmean(X, axis=0)
        std = np.where(n_valid > 1, np.nanstd(X, axis=0, ddof=1) if len(X) > 1 else 0.0, 0.0)
        std = np.where(n_valid == 0, np.nan, std)
        return {"mean": mean, "std": std, "min": np.nanmin(X, axis=0), "max": np.nanmax(X, axis=0), "n": len(X)}


def continual_scores(A: np.ndarray, order: Sequence[str]) -> dict:
    """JSON-ready summary of one run: order, accuracy matrix, RA and FG per episode.

    NaN (unseen speakers, ``FG_1``) is written as ``None``.
    """
    ra, fg = ra_fg_curves(A)

    def clean(v):
        return [None if not np.isfinite(x) else float(x) for x in v]

    A = np.asarray(A, dtype=np.float64)
    return {"order": list(order), "accuracy_matrix": [clean(row) for row in A],
            "retained_accuracy": clean(ra), "forgetting": clean(fg),
            "final_ra": clean(ra[-1:])[0], "final_fg": clean(fg[-1:])[0]}
