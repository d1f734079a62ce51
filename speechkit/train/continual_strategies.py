"""Continual-learning strategies for speaker adaptation, model-agnostic (any ``torch.nn.Module`` and loss).

Hemati & Borth (Interspeech 2021), "Continual Speaker Adaptation for Text-to-Speech Synthesis", section 3 and
Algorithm 1: after pre-training, one new speaker per *episode*, in a seeded random order (the paper's
three random orders, sec. 4) or in a row of a Williams design (:func:`design_order`). The
strategies (the paper's names, sections 3.1-3.2.4, except ``jt_cumulative``):

``jt``      joint training (JT, sec. 3.1, eq. 3, the upper bound): the paper trains once, from
            ``theta_init``, on all continual speakers; here episode ``t`` is that training on the
            continual speakers seen up to ``t``, early-stopped on all their validation data -- one
            training per episode boundary, independent of the earlier episodes (the last one is the
            paper's JT);
``jt_cumulative``  this toolkit's own variant, not in the paper: every speaker seen so far too, but
            fine-tuned from the *previous* episode's weights and early-stopped on the new speaker's
            validation data only, as the other strategies (what this module called ``jt`` before
            plan.json had a ``version``: such plans load as ``jt_cumulative``);
``sa``      sequential adaptation (SA, sec. 3.2.1, eq. 4): only the new speaker (lower bound);
``ewc``     SA plus the elastic weight consolidation penalty (sec. 3.2.2, eq. 5; :class:`EWC`);
``er``      experience replay (ER, sec. 3.2.3, Algorithm 1): the new speaker's data plus N_B buffered
            utterances of every past speaker, mixed and shuffled together (:class:`ReplayBuffer`);
``er_kd``   experience replay with knowledge distillation (ER-KD, the paper's, sec. 3.2.3 and
            Algorithm 1): the buffer keeps the input text and, as target, the output the model
            trained on that speaker (its best weights) produces for it;
``er_br``   experience replay with buffer replication (ER-BR, sec. 3.2.4): every buffer item
            replicated K times (the paper: N_B = 1, K = 10, sec. 4.3).

What this module does not do (the recipe's job): training itself, early stopping, resetting the
optimiser at each episode, synthesis and scoring. What it gives:

* :class:`EWC` -- diagonal Fisher (eq. 5), accumulation over episodes, the penalty and its state;
* :class:`ReplayBuffer` -- per-speaker selection, ER-KD targets through a callback, state;
* :func:`mix_with_buffer` -- new data + (replicated) buffer, deterministically shuffled;
* :func:`williams_design`, :func:`design_order` -- speaker orders that are distinct permutations,
  no two beginning with the same speaker (a Latin square), balanced for carry-over;
* :class:`EpisodePlan` -- speaker order from a seed or a design row, per-episode training set of each strategy,
  and the resume check (a resumed run must use the saved order, strategy and training settings).

All randomness derives from explicit seeds (NumPy ``default_rng``), never from global state, so a
resumed run makes the same choices as an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from speechkit.utils.cli import ConfigError
from speechkit.utils.config import config_diff
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, atomic_write

logger = logging.getLogger(__name__)

__all__ = ["STRATEGIES", "STRATEGY_OPTIONS", "check_strategy_options", "fisher_diagonal", "EWC", "ReplayBuffer",
           "mix_with_buffer", "EpisodePlan", "PlanMismatchError", "PLAN_VERSION", "settings_fingerprint",
           "williams_design", "design_order"]

#: Strategy names (Hemati & Borth 2021, sections 3.1-3.2.4: JT, SA, EWC, ER, ER-KD, ER-BR;
#: ``jt_cumulative`` is this toolkit's own variant, not the paper's).
STRATEGIES = ("jt", "jt_cumulative", "sa", "ewc", "er", "er_kd", "er_br")
_JOINT = ("jt", "jt_cumulative")
#: plan.json's format: 3 = also records the run's training settings (``training``, ``training_sha256``);
#: 2 = ``jt`` is the paper's joint training from theta_init (1, no ``version`` key: ``jt`` was the
#: cumulative variant, now ``jt_cumulative``).
PLAN_VERSION = 3
_REPLAY = ("er", "er_kd", "er_br")
#: The settings only some strategies read (``speechkit-train-continual`` keys -> those strategies).
STRATEGY_OPTIONS: dict[str, tuple[str, ...]] = {
    "buffer_size": _REPLAY, "replicate": ("er_br",), "ewc_lambda": ("ewc",), "ewc_mode": ("ewc",)}


def check_strategy_options(strategy: str, given: Iterable[str]) -> None:
    """Refuse a setting given for a strategy that does not read it (``--buffer-size 3`` with ``sa``
    would be accepted, ignored and recorded as 0 in plan.json).

    Args:
        strategy: one of :data:`STRATEGIES`.
        given: the keys set explicitly (the command line's overrides; ``-`` and ``_`` alike). A
            config file may hold every strategy's settings (one file for all runs) and is not checked.

    Raises:
        ConfigError: the first such key (a parameter reference, :mod:`speechkit.utils.errors`), with the
            strategies that use it.
    """
    for key in given:
        users = STRATEGY_OPTIONS.get(key.replace("-", "_"))
        if users is not None and strategy not in users:
            raise naming_parameters(ConfigError(f"command line: `{key.replace('-', '_')}` applies to `strategy` "
                                                f"{' | '.join(users)} only, not {strategy}: remove it"))

LossFn = Callable[[torch.nn.Module, Any], Any]


def _loss_tensor(out: Any) -> torch.Tensor:
    """A loss function may return the loss or ``(loss, stats)`` (:meth:`Task.forward_loss`)."""
    loss = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise ValueError(f"loss function must return a scalar tensor (or (loss, stats)), got {type(loss).__name__}"
                         + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""))
    return loss


def _named_trainable(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


# ============================================================================================ EWC
def fisher_diagonal(model: torch.nn.Module, loss_fn: LossFn, batches: Iterable[Any]) -> dict[str, torch.Tensor]:
    """Diagonal empirical Fisher information: the ``F_i`` of Hemati & Borth 2021, eq. 5 (Kirkpatrick et al. 2017).

    .. math::  F_i = \\frac{1}{B} \\sum_{b=1}^{B} \\Big( \\frac{\\partial \\mathcal{L}_b}{\\partial \\theta_i} \\Big)^2

    the expectation of the squared gradient of the negative log-likelihood -- here the TTS loss
    ``L_b = loss_fn(model, batch_b)`` -- over the previous episode's data. The paper computes the
    diagonal Fisher "at the beginning of each episode" (sec. 3.2.2) and states neither its
    estimator nor its data; this is the empirical Fisher of the training loss. With one utterance per
    batch this is the per-example empirical Fisher; with larger batches it is the Fisher of the
    batch-mean loss (cheaper, smaller in scale by roughly the batch size; ``lambda`` absorbs it).

    The model is put in eval mode (no dropout) for the computation and restored afterwards; its
    ``.grad`` fields are left as they were; parameters are not changed.

    Args:
        model: any module; only parameters with ``requires_grad`` are included.
        loss_fn: ``loss_fn(model, batch) -> loss`` (scalar tensor) or ``(loss, stats)``.
        batches: the data, already on the model's device.

    Returns:
        parameter name -> tensor of the parameter's shape (float32, on the parameter's device, >= 0).

    Raises:
        ValueError: no batches, or a loss that is not a scalar tensor.
    """
    params = _named_trainable(model)
    fisher = {n: torch.zeros_like(p, dtype=torch.float32) for n, p in params.items()}
    was_training = model.training
    saved_grads = {n: (None if p.grad is None else p.grad.detach().clone()) for n, p in params.items()}
    model.eval()
    n_batches = 0
    try:
        for batch in batches:
            loss = _loss_tensor(loss_fn(model, batch))
            grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            for (n, _), g in zip(params.items(), grads):
                if g is not None:
                    fisher[n] += g.detach().float() ** 2
            n_batches += 1
    finally:
        model.train(was_training)
        for n, p in params.items():
            p.grad = saved_grads[n]
    if n_batches == 0:
        raise ValueError("fisher_diagonal: no batches (the previous episode's data is empty)")
    return {n: f / n_batches for n, f in fisher.items()}


class EWC:
    """Elastic weight consolidation across episodes (Kirkpatrick et al., PNAS 2017; Hemati & Borth 2021, sec. 3.2.2).

    Penalty added to the new episode's loss:

    .. math::  \\Omega(\\theta) = \\frac{\\lambda}{2} \\sum_i F_i (\\theta_i - \\theta^*_i)^2

    Hemati & Borth's eq. 5 is printed without the square,
    ``argmin_theta [L_TTS(D_tr^t | theta = theta*_{t-1}) + sum_i (lambda/2) F_i (theta_i - theta*_{t-1,i})]``,
    which is linear in ``theta`` and unbounded below; the square is Kirkpatrick et al.'s (their
    eq. 3), which the paper cites for this term, so this is read as a typo and the standard
    quadratic form is kept. The paper states neither ``lambda`` nor how the Fisher accumulates
    over episodes (``mode`` below).

    Call :meth:`consolidate` at the start of every episode after the first: it computes the
    Fisher (eq. 5) on the *previous* episode's data at the current parameters (the end of that
    episode) and stores those parameters as the anchor ``theta*``.

    Accumulation over episodes (``mode``):

    ``online`` (default): a running sum ``F = F_1 + ... + F_t`` and the latest anchor. Memory is
        one Fisher and one anchor whatever the number of speakers, and the latest anchor already
        carries the earlier speakers (it was trained under their penalty); this is the recursive
        Laplace approximation that Huszar (PNAS 2018, "Note on the quadratic penalties in elastic
        weight consolidation") shows to be the correct one, and online EWC of Schwarz et al.
        (ICML 2018) with decay 1.
    ``per_episode``: Kirkpatrick et al.'s original sum of one penalty per past episode, each with
        its own Fisher and anchor: ``sum_t (lambda/2) sum_i F_{t,i} (theta_i - theta*_{t,i})^2``
        (memory grows with the number of episodes; kept for comparison).

    Args:
        lam: ``lambda``, the penalty strength (>= 0).
        mode: ``online`` or ``per_episode``.
    """

    def __init__(self, lam: float, mode: str = "online"):
        if lam < 0:
            raise ValueError(f"EWC lambda must be >= 0, got {lam}")
        if mode not in ("online", "per_episode"):
            raise ValueError(f"EWC mode must be 'online' or 'per_episode', got {mode!r}")
        self.lam = float(lam)
        self.mode = mode
        #: (fisher, anchor) pairs: one (the running sum) in online mode, one per episode otherwise.
        self.terms: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = []
        #: episodes consolidated so far (the caller's episode numbers, for the log and resume checks).
        self.episodes: list[int] = []

    def consolidate(self, model: torch.nn.Module, loss_fn: LossFn, batches: Iterable[Any],
                    episode: int | None = None) -> dict[str, torch.Tensor]:
        """Fisher of ``loss_fn`` on ``batches`` (the previous episode's data) at the current
        parameters, accumulated as ``mode`` says; the current parameters become the anchor.

        Returns the new episode's Fisher (before accumulation).
        """
        fisher = fisher_diagonal(model, loss_fn, batches)
        anchor = {n: p.detach().clone() for n, p in _named_trainable(model).items()}
        self.add(fisher, anchor, episode)
        return fisher

    def add(self, fisher: Mapping[str, torch.Tensor], anchor: Mapping[str, torch.Tensor],
            episode: int | None = None) -> None:
        """Accumulate a given Fisher and anchor (what :meth:`consolidate` does after computing them).

        Raises:
            ValueError: Fisher and anchor name different parameters or shapes differ.
        """
        if set(fisher) != set(anchor):
            raise ValueError(f"EWC: Fisher and anchor cover different parameters: "
                             f"{sorted(set(fisher) ^ set(anchor))[:5]}")
        for n in fisher:
            if fisher[n].shape != anchor[n].shape:
                raise ValueError(f"EWC: parameter '{n}': Fisher shape {tuple(fisher[n].shape)} != "
                                 f"anchor shape {tuple(anchor[n].shape)}")
        fisher = {n: f.detach().clone().float() for n, f in fisher.items()}
        anchor = {n: a.detach().clone() for n, a in anchor.items()}
        if self.mode == "online" and self.terms:
            old_f, _ = self.terms[0]
            if set(old_f) != set(fisher):
                raise ValueError("EWC: the parameters changed between episodes: "
                                 f"{sorted(set(old_f) ^ set(fisher))[:5]}")
            self.terms = [({n: old_f[n] + fisher[n] for n in fisher}, anchor)]
        else:
            self.terms.append((fisher, anchor))
        self.episodes.append(-1 if episode is None else int(episode))

    def penalty(self, model: torch.nn.Module) -> torch.Tensor:
        """``(lambda/2) sum_i F_i (theta_i - theta*_i)^2`` (summed over terms in ``per_episode`` mode);
        a differentiable 0-dim tensor, 0 before the first :meth:`consolidate`.

        Raises:
            ValueError: the model lacks a consolidated parameter (named).
        """
        params = _named_trainable(model)
        dev = next(iter(params.values())).device if params else torch.device("cpu")
        total = torch.zeros((), device=dev)
        for fisher, anchor in self.terms:
            for n, f in fisher.items():
                if n not in params:
                    raise ValueError(f"EWC: parameter '{n}' of the consolidated model is not a trainable "
                                     "parameter of this model")
                p = params[n]
                total = total + (f.to(p.device) * (p - anchor[n].to(p.device)) ** 2).sum()
        return 0.5 * self.lam * total

    def state_dict(self) -> dict:
        """Everything needed to resume (tensors, lists, numbers; loadable with ``weights_only=True``)."""
        return {"lam": self.lam, "mode": self.mode, "episodes": list(self.episodes),
                "fisher": [dict(f) for f, _ in self.terms], "anchor": [dict(a) for _, a in self.terms]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: the saved lambda or mode differ from this object's (both named).
        """
        if state["mode"] != self.mode or float(state["lam"]) != self.lam:
            raise ValueError(f"EWC state was saved with mode={state['mode']!r}, lambda={state['lam']} but this run "
                             f"uses mode={self.mode!r}, lambda={self.lam}")
        self.terms = [(dict(f), dict(a)) for f, a in zip(state["fisher"], state["anchor"])]
        self.episodes = [int(e) for e in state["episodes"]]


# ============================================================================================ replay
def _speaker_rng(seed: int, speaker: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(speaker.encode("utf-8"))])


class ReplayBuffer:
    """Experience-replay memory: ``N_B`` utterances per past speaker (Hemati & Borth 2021, sec. 3.2.3,
    Algorithm 1: sampled randomly, the same number for every previous speaker).

    Items are whatever the recipe's dataset uses (an utterance id, or a dict of text/labels and
    target features); keys are utterance ids. The selection of a speaker's utterances depends
    only on ``(seed, speaker)`` and the speaker's keys, so it is reproducible and independent of
    the speaker order. A speaker with fewer than ``N_B`` utterances contributes all of them (with
    a warning).

    For ER-KD (the paper's, sec. 3.2.3: "we keep the input transcript, and the output
    Mel-spectrogram obtained from the best-trained model"), :meth:`add_speaker` takes a ``produce``
    callback, run on the selected items at the end of the speaker's episode, that returns the
    items with their acoustic targets replaced by what the model produced
    (e.g. ``lambda kv: [dict(item, feats=model_predict(item)) for _, item in kv]``).

    For a resumable run, items must be made of ``torch.save``-able types that ``weights_only``
    loading accepts (str, numbers, lists, dicts, tensors); convert NumPy arrays to tensors.

    Args:
        size_per_speaker: ``N_B`` (>= 1).
        seed: selection seed.
    """

    def __init__(self, size_per_speaker: int, seed: int = 0):
        if size_per_speaker < 1:
            raise ValueError(f"replay buffer size per speaker must be >= 1, got {size_per_speaker}")
        self.size_per_speaker = int(size_per_speaker)
        self.seed = int(seed)
        self._data: dict[str, list[tuple[str, Any]]] = {}  # speaker -> [(key, item)], insertion = episode order

    @property
    def speakers(self) -> list[str]:
        """Buffered speakers in the order they were added."""
        return list(self._data)

    def __len__(self) -> int:
        return sum(len(v) for v in self._data.values())

    def select(self, speaker: str, keys: Iterable[str]) -> list[str]:
        """The keys :meth:`add_speaker` keeps for ``speaker`` out of ``keys`` (C-sorted result)."""
        keys = sorted(set(keys), key=lambda k: k.encode("utf-8"))
        if len(keys) <= self.size_per_speaker:
            return keys
        idx = _speaker_rng(self.seed, speaker).choice(len(keys), self.size_per_speaker, replace=False)
        return [keys[i] for i in sorted(idx)]

    def add_speaker(self, speaker: str, items: Mapping[str, Any],
                    produce: Callable[[list[tuple[str, Any]]], Sequence[Any]] | None = None) -> list[str]:
        """Buffer ``N_B`` of ``items`` (key -> item) of ``speaker``; returns the keys kept.

        Args:
            speaker: speaker id (each speaker is added once).
            items: the speaker's training utterances.
            produce: ER-KD: called once with the selected ``[(key, item), ...]``; returns the
                items to store instead (same length and order).

        Raises:
            ValueError: speaker already buffered, no items, or ``produce`` returning the wrong number.
        """
        if speaker in self._data:
            raise ValueError(f"replay buffer: speaker '{speaker}' is already buffered")
        if not items:
            raise ValueError(f"replay buffer: speaker '{speaker}' has no utterances to buffer")
        keys = self.select(speaker, items)
        if len(items) < self.size_per_speaker:
            logger.warning("replay buffer: speaker '%s' has only %d utterances, fewer than the buffer size %d; "
                           "buffering all of them", speaker, len(items), self.size_per_speaker)
        chosen = [(k, items[k]) for k in keys]
        if produce is not None:
            new = list(produce(chosen))
            if len(new) != len(chosen):
                raise ValueError(f"replay buffer: produce() returned {len(new)} items for the {len(chosen)} "
                                 f"selected utterances of speaker '{speaker}'")
            chosen = [(k, it) for (k, _), it in zip(chosen, new)]
        self._data[speaker] = chosen
        return keys

    def items(self, replicate: int = 1) -> list[tuple[str, Any]]:
        """All buffered ``(key, item)`` pairs (speaker order, then key), each repeated ``replicate`` times
        in a row (ER-BR's replication factor K, sec. 3.2.4)."""
        if replicate < 1:
            raise ValueError(f"replicate (K) must be >= 1, got {replicate}")
        return [kv for spk in self._data for kv in self._data[spk] for _ in range(replicate)]

    def speaker_items(self, speaker: str) -> list[tuple[str, Any]]:
        """The buffered ``(key, item)`` pairs of one speaker.

        Raises:
            KeyError: speaker not buffered (named).
        """
        if speaker not in self._data:
            raise KeyError(f"replay buffer: speaker '{speaker}' is not buffered")
        return list(self._data[speaker])

    def state_dict(self) -> dict:
        """``{"size_per_speaker", "seed", "speakers": [...], "keys": [[...]], "items": [[...]]}``."""
        return {"size_per_speaker": self.size_per_speaker, "seed": self.seed, "speakers": list(self._data),
                "keys": [[k for k, _ in v] for v in self._data.values()],
                "items": [[it for _, it in v] for v in self._data.values()]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ValueError: saved with another buffer size or seed (both named).
        """
        if int(state["size_per_speaker"]) != self.size_per_speaker or int(state["seed"]) != self.seed:
            raise ValueError(f"replay buffer state was saved with N_B={state['size_per_speaker']}, "
                             f"seed={state['seed']} "
                             f"but this run uses N_B={self.size_per_speaker}, seed={self.seed}")
        self._data = {spk: list(zip(keys, items))
                      for spk, keys, items in zip(state["speakers"], state["keys"], state["items"])}


def mix_with_buffer(new_items: Sequence[Any], buffer_items: Sequence[Any], *, seed: int, episode: int) -> list[Any]:
    """The new speaker's items and the buffer's (already replicated) items, shuffled together.

    The permutation depends only on ``(seed, episode)`` and the list lengths.
    """
    out = list(new_items) + list(buffer_items)
    perm = np.random.default_rng([int(seed), int(episode), 0x5EED]).permutation(len(out))
    return [out[i] for i in perm]


# ============================================================================================ orders
def williams_design(n: int) -> list[list[int]]:
    """The rows of a Williams design over ``n`` treatments (here: speakers), balanced for position
    and for the treatment that comes right before ("first-order carry-over").

    Williams, E. J. (1949), "Experimental designs balanced for the estimation of residual effects of
    treatments", Australian Journal of Scientific Research, Series A 2(2), 149-168. The first row is
    ``0, 1, n-1, 2, n-2, 3, ...``; row ``i`` (0-based) adds ``i`` to every entry of it modulo ``n``.
    Those ``n`` rows form a Latin square: every treatment once in every row and once in every
    column, so the ``n`` rows begin with ``n`` different treatments. For even ``n`` every ordered
    pair ``(a, b)``, ``a != b``, stands side by side (``a`` right before ``b``) in exactly one row. For
    odd ``n`` no square of ``n`` rows does that; Williams adds the ``n`` rows reversed (rows
    ``n+1 .. 2n``), after which every ordered pair stands side by side in exactly two rows; those
    mirror rows begin with the treatments rows ``1..n`` end with, so they repeat first treatments.

    Args:
        n: the number of treatments (>= 1).

    Returns:
        ``n`` rows (even ``n``, and ``n = 1``) or ``2n`` rows (odd ``n >= 3``), each a permutation
        of ``range(n)``.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"a Williams design needs at least 1 treatment, got {n}")
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2 and n > 1:
        rows += [r[::-1] for r in rows]
    return rows


def design_order(speakers: Iterable[str], row: int) -> list[str]:
    """Row ``row`` (1-based) of :func:`williams_design` over the distinct ``speakers`` in C (byte)
    order: the speaker order of a continual run. Rows ``1..n`` (``n`` speakers) are distinct
    permutations no two of which begin with the same speaker; with an odd ``n``, rows ``n+1..2n``
    are rows ``1..n`` reversed (Williams's completion: they begin with speakers rows ``1..n``
    already began with).

    Example: speakers ``sp05 sp06 sp07 sp08``: row 1 ``sp05 sp06 sp08 sp07``, row 2
    ``sp06 sp07 sp05 sp08``, row 3 ``sp07 sp08 sp06 sp05``, row 4 ``sp08 sp05 sp07 sp06``.

    Raises:
        ValueError: no speakers, or ``row`` outside ``1..len(williams_design(n))`` (the message
            gives the range).
    """
    spk = sorted(set(speakers), key=lambda s: s.encode("utf-8"))
    if not spk:
        raise ValueError("no continual speakers to order")
    rows = williams_design(len(spk))
    if not 1 <= row <= len(rows):
        more = (f"; rows {len(spk) + 1}-{len(rows)} reverse rows 1-{len(spk)}" if len(rows) > len(spk) else "")
        raise ValueError(f"row {row} is out of range: the Williams design over {len(spk)} speakers has rows "
                         f"1-{len(rows)}{more}")
    return [spk[i] for i in rows[row - 1]]


# ============================================================================================ plan
def _plain_settings(d: Mapping[str, Any]) -> dict:
    """``d`` as plain JSON data (what plan.json holds: tuples -> lists, other objects -> str)."""
    return json.loads(json.dumps(dict(d), default=str))


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of ``settings`` as canonical JSON (keys sorted): equal for equal settings,
    whatever their key order."""
    text = json.dumps(_plain_settings(settings), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class PlanMismatchError(DataError):
    """A resumed run asks for another speaker order, strategy or setting than the saved run used."""


@dataclass
class EpisodePlan:
    """Speaker order and per-episode training sets of a continual run (Algorithm 1).

    Attributes:
        strategy: one of :data:`STRATEGIES`.
        order: the continual speakers, one per episode (episode ``t`` is 1-based: ``order[t-1]``).
        seed: the order's seed (also the replay shuffling seed).
        buffer_size: ``N_B`` for the ER strategies (0 otherwise).
        replicate: ``K`` for ER-BR (1 otherwise).
        ewc_lambda: EWC's ``lambda`` (0 unless ``ewc``).
        extra: free-form metadata saved with the plan (not compared on resume).
        training: the settings that decide what the episodes train, flat ``{"dotted.key": value}``
            (the driver's resolved trainer, model and data options, ...); compared on resume.
            ``{}``: not recorded (a plan written before version 3, or a caller that tracks none).
        training_sha256: SHA-256 of ``training`` (:func:`settings_fingerprint`); filled in from
            ``training`` when not given.
        version: the plan format (:data:`PLAN_VERSION`; :meth:`from_dict` reads a plan without
            one as version 1, whose ``jt`` is ``jt_cumulative``).
    """

    strategy: str
    order: list[str]
    seed: int
    buffer_size: int = 0
    replicate: int = 1
    ewc_lambda: float = 0.0
    extra: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    training_sha256: str = ""
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown continual strategy {self.strategy!r}; known: {', '.join(STRATEGIES)}")
        if not self.order:
            raise ValueError("EpisodePlan: no continual speakers")
        if len(set(self.order)) != len(self.order):
            raise ValueError(f"EpisodePlan: a speaker appears twice in the order {self.order}")
        if self.strategy in _REPLAY and self.buffer_size < 1:
            raise ValueError(f"strategy '{self.strategy}' needs buffer_size >= 1, got {self.buffer_size}")
        if self.replicate < 1:
            raise ValueError(f"replicate (K) must be >= 1, got {self.replicate}")
        if self.replicate > 1 and self.strategy != "er_br":
            raise ValueError(f"replicate K={self.replicate} only applies to er_br, not '{self.strategy}'")
        if self.strategy == "ewc" and not 0 < self.ewc_lambda < float("inf"):
            raise ValueError(f"strategy 'ewc' needs a finite ewc_lambda > 0, got {self.ewc_lambda}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        self.order = [str(s) for s in self.order]
        if not isinstance(self.training, dict):
            raise ValueError(f"training settings must be a mapping, got {type(self.training).__name__}")
        self.training = _plain_settings(self.training)  # as plan.json will hold them
        if self.training and not self.training_sha256:
            self.training_sha256 = settings_fingerprint(self.training)

    @classmethod
    def create(cls, speakers: Iterable[str], strategy: str, seed: int, *, row: int = 0,
               **kwargs) -> "EpisodePlan":
        """A plan over the (C-sorted) ``speakers``: ``row`` 0, a permutation drawn from ``seed``;
        ``row`` K >= 1, row K of their Williams design (:func:`design_order`), ``seed`` then
        seeding only the replay selection and shuffling.

        Raises:
            ValueError: ``row`` < 0 or beyond the design (:func:`design_order`), or invalid settings.
        """
        spk = sorted(set(speakers), key=lambda s: s.encode("utf-8"))
        if row < 0:
            raise ValueError(f"row must be >= 0 (0: an order drawn from the seed), got {row}")
        if row:
            order = design_order(spk, row)
        else:
            order = [spk[i] for i in np.random.default_rng(int(seed)).permutation(len(spk))]
        return cls(strategy=strategy, order=order, seed=int(seed), **kwargs)

    # ------------------------------------------------------------------ views
    @property
    def num_episodes(self) -> int:
        return len(self.order)

    @property
    def uses_buffer(self) -> bool:
        return self.strategy in _REPLAY

    @property
    def uses_ewc(self) -> bool:
        return self.strategy == "ewc"

    @property
    def restarts(self) -> bool:
        """``jt``: every episode trains from theta_init (not from the previous episode's weights)."""
        return self.strategy == "jt"

    @property
    def distills(self) -> bool:
        """ER-KD: the buffer keeps the model's own outputs as targets."""
        return self.strategy == "er_kd"

    def _check_episode(self, t: int) -> None:
        if not 1 <= t <= self.num_episodes:
            raise ValueError(f"episode must be in 1..{self.num_episodes}, got {t}")

    def speaker(self, t: int) -> str:
        """The new speaker of episode ``t`` (1-based)."""
        self._check_episode(t)
        return self.order[t - 1]

    def seen(self, t: int) -> list[str]:
        """Speakers learnt by the end of episode ``t``: ``order[:t]``."""
        self._check_episode(t)
        return self.order[:t]

    def training_speakers(self, t: int) -> list[str]:
        """Whose *own* data episode ``t`` trains on: all seen (``jt``, ``jt_cumulative``) or only the
        new speaker (others; the ER strategies add the buffer of the earlier ones, see :meth:`training_set`)."""
        return self.seen(t) if self.strategy in _JOINT else [self.speaker(t)]

    def validation_speakers(self, t: int) -> list[str]:
        """Whose validation data early-stops episode ``t``: every speaker it trains on (``jt``: all
        seen), else the new speaker only (``jt_cumulative`` included)."""
        return self.seen(t) if self.strategy == "jt" else [self.speaker(t)]

    def check_trained(self, speaker: str, t: int) -> None:
        """Raise ``ValueError`` naming ``speaker`` if it was not trained by the end of episode ``t``."""
        if speaker not in self.seen(t):
            raise ValueError(f"speaker '{speaker}' was never trained by episode {t} "
                             f"(trained: {', '.join(self.seen(t))})")

    def training_set(self, t: int, spk2items: Mapping[str, Mapping[str, Any]],
                     buffer: ReplayBuffer | None = None) -> list[tuple[str, Any]]:
        """The ``(key, item)`` training list of episode ``t``.

        ``jt``/``jt_cumulative``: every item of ``seen(t)``; ``sa``/``ewc``: the new speaker's; ``er``/``er_kd``/
        ``er_br``: the new speaker's plus ``buffer.items(replicate)``, shuffled by
        :func:`mix_with_buffer` with ``(seed, t)``. Non-replay lists are in speaker then key order
        (the trainer shuffles batches itself).

        Args:
            t: episode (1-based).
            spk2items: speaker -> {key: item} of the training data.
            buffer: the replay buffer holding exactly the speakers of episodes ``1..t-1``.

        Raises:
            ValueError: a speaker without data, or a replay strategy whose buffer is missing or
                does not hold exactly the earlier speakers (both lists named).
        """
        for s in self.training_speakers(t):
            if not spk2items.get(s):
                raise ValueError(f"episode {t}: speaker '{s}' has no training utterances")
        own = [(k, spk2items[s][k]) for s in self.training_speakers(t)
               for k in sorted(spk2items[s], key=lambda k: k.encode("utf-8"))]
        if not self.uses_buffer:
            return own
        if buffer is None:
            raise ValueError(f"strategy '{self.strategy}' needs a replay buffer")
        if buffer.speakers != self.order[:t - 1]:
            raise ValueError(f"episode {t}: the replay buffer holds speakers {buffer.speakers}, expected the "
                             f"earlier episodes' {self.order[:t - 1]}")
        return mix_with_buffer(own, buffer.items(self.replicate), seed=self.seed, episode=t)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EpisodePlan":
        """The plan of :meth:`to_dict`'s dict. A dict without ``version`` is a version-1 plan, whose
        ``jt`` was the cumulative variant: it is read as ``jt_cumulative``.

        Raises:
            ValueError: a version newer than :data:`PLAN_VERSION`, or invalid settings.
        """
        d = dict(d)
        version = int(d.pop("version", 1))
        if version > PLAN_VERSION:
            raise ValueError(f"plan version {version} is newer than this speechkit's {PLAN_VERSION}")
        if version == 1 and d.get("strategy") == "jt":
            d["strategy"] = "jt_cumulative"
        return cls(**d, version=PLAN_VERSION)

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan as JSON, atomically."""
        with atomic_write(path) as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "EpisodePlan":
        """Read :meth:`save`'s JSON.

        Raises:
            FileNotFoundError: no such file.
            DataError: not a plan (names the file).
        """
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise DataError(f"{path}: not a valid episode plan: {e}") from None

    def check_resume(self, saved: "EpisodePlan", where: str = "the saved plan") -> None:
        """Check that this (requested) plan is the one a resumed run saved.

        The training settings are compared when both plans record them (:attr:`training`): a
        setting only one of them has (one added to or dropped from speechkit since the run was
        saved) is warned about, not an error. A saved plan without them (written before plan
        version 3) resumes with a warning that they cannot be checked.

        Raises:
            PlanMismatchError: order, strategy, seed, buffer size, K or lambda differ, or a training
                setting; the message names the keys with the saved and the requested values.
        """
        diffs = [f"{name}: saved {getattr(saved, name)!r}, requested {getattr(self, name)!r}"
                 for name in ("strategy", "order", "seed", "buffer_size", "replicate", "ewc_lambda")
                 if getattr(saved, name) != getattr(self, name)]
        if diffs:
            note = ""
            if saved.strategy == "jt_cumulative" and self.strategy == "jt":
                note = (" (a plan written before plan.json had a 'version' and saying 'jt' is the cumulative "
                        "variant, now `strategy=jt_cumulative`; `strategy=jt` trains every episode from "
                        "theta_init)")
            raise naming_parameters(PlanMismatchError(
                f"cannot resume: the run in {where} differs from the requested one (" + "; ".join(diffs)
                + f"){note}; use a new experiment directory or the saved settings"))
        self._check_training(saved, where)

    def _check_training(self, saved: "EpisodePlan", where: str) -> None:
        if not self.training_sha256:  # the caller records no settings
            return
        if not saved.training_sha256:
            logger.warning("%s was written by an older speechkit without the run's training settings: cannot check "
                           "that its finished episodes were trained with the requested trainer/model/data settings",
                           where)
            return
        if saved.training_sha256 == self.training_sha256:
            return
        old, new = saved.training, self.training
        diffs = []
        if old and new:
            changed = []
            for k, was, now in config_diff(old, new):
                if was is MISSING:
                    logger.warning("resuming %s: setting %s is not in the saved plan (a newer setting); using %r",
                                   where, k, now)
                elif now is MISSING:
                    logger.warning("resuming %s: the saved run's setting %s = %r is not a setting any more", where,
                                   k, was)
                else:
                    changed.append(k)
            diffs = [f"{k}: saved {old[k]!r}, requested {new[k]!r}" for k in changed]
            if len(diffs) > 8:
                diffs = diffs[:8] + [f"and {len(diffs) - 8} more: {', '.join(changed[8:])}"]
            if not diffs and settings_fingerprint(old) == saved.training_sha256 \
                    and settings_fingerprint(new) == self.training_sha256:
                return  # only settings added to or dropped from speechkit since the run was saved (warned)
        if not diffs:  # settings that do not match their fingerprint (an edited plan.json), or no settings
            diffs = [f"training settings fingerprint: saved {saved.training_sha256}, requested {self.training_sha256}"]
        raise PlanMismatchError(f"cannot resume: the run in {where} was trained with other settings than the "
                                f"requested ones ({'; '.join(diffs)}); its finished episodes would be reused as "
                                f"this run's: use a new experiment directory or the saved settings")

    @classmethod
    def resume_or_save(cls, requested: "EpisodePlan", path: str | os.PathLike) -> "EpisodePlan":
        """Save ``requested`` at ``path`` if absent, else check it against the saved plan and return it."""
        path = Path(path)
        if path.is_file():
            saved = cls.load(path)
            requested.check_resume(saved, str(path))
            return saved
        requested.save(path)
        return requested
