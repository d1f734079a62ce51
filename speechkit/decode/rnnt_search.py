"""Streaming RNN-T search: greedy and beam, LID-free decoding, early switch-off.

Search methods (per language, frame-synchronous, so they stream naturally):

* :class:`GreedyDecoder`: at each encoder frame emit argmax symbols until blank or
  ``max_symbols_per_frame`` non-blank symbols (then move on to the next frame).
* :class:`BeamDecoder`: the *modified beam search* of k2/icefall (one symbol per frame at most):
  every hypothesis in the beam is extended by every output symbol (blank keeps the hypothesis),
  the ``beam`` best extensions over the whole beam are kept, and extensions with the same label
  sequence are merged by adding their probabilities (log-sum-exp).  With ``beam=1`` it is greedy
  search with ``max_symbols_per_frame=1`` (tested).  The final hypothesis is the one of highest
  ``log P``, or with ``length_norm`` (icefall's default in ``modified_beam_search``) of highest
  ``log P / (1 + U)``, ``U`` its number of symbols (icefall divides by ``len(ys)``, the ``U``
  symbols plus its one start blank with a stateless predictor of context 1); the normalisation
  only changes the final choice, never the pruning.

:class:`StreamingRecognizer` runs the model on chunks of raw feature frames: a
:class:`~speechkit.features.stack.FrameStacker` (no look-ahead beyond the 8-frame stack), the LSTM
encoder with its state carried over, the LID head, and one decoder per language.  Partial
hypotheses are available after every chunk, and any chunking gives the same result as feeding the
whole utterance at once (tested).

Modes (Joshi et al., Interspeech 2021):

* ``oracle``: decode with the known language's decoder only (section 4: the multi-softmax model's
  inference; section 6.2, Table 4: the "Multi-softmax LID Oracle" row).
* ``lid_free`` (section 4.2): one decoder per language on the shared encoder output; the LID head's
  frame posteriors ``P_t(l)`` are averaged over the utterance and the hypothesis of the language
  with the highest average posterior is returned.

Early switch-off (section 6.3), in ``lid_free`` mode when ``tau`` and ``s_th`` are given.  The
paper's rule (``switch_off_rule: gap``, the default) scores each language by eq. 1,

    s_l(t) = sum_{t'=0}^{t} log P_{t'}(l)                                            (1)

(``P_t'(l)``: the LID head's posterior of language ``l`` at encoder frame ``t'``) and turns decoder
``l`` off when "a) t > tau, where tau is the minimum wait time (number of frames) where all decoders
run, b) s_l(t) < s_{l_max}(t) - s_th", ``l_max`` the language of maximum score at ``t``.  Here:

* ``t`` counts the encoder frames seen so far from 1 (the paper indexes frames from ``t' = 0``), so
  every decoder runs exactly ``tau`` frames before any stops (read with a 0-based ``t``, condition
  a) would keep them all for ``tau + 1``); a decoder turned off at ``t`` decodes neither frame ``t``
  nor any later one.
* ``tau`` is in encoder frames (30 ms with the paper's stacking), as the paper's text counts it
  ("all decoders run for at least 30 frames (900ms)"); its Table 7 heads the column "tau (ms)",
  which that sentence contradicts.  ``s_th`` is in nats (natural logs; the paper names no base).
* ``l_max`` is taken among the decoders still running, the paper's among all languages: a
  language already stopped whose score later overtakes theirs would, by the paper's wording, stop
  every decoder still running and leave no hypothesis.  So at least one decoder always runs.
* ``s_th = inf`` never stops a decoder: plain LID-free decoding (tested), as the paper's "setting
  tau or s_th to inf".  The returned language is the one of highest average posterior among the
  decoders still running at the end (the best-scoring language is never switched off, so without
  ties this is the overall argmax; the paper does not say how the language is chosen once
  decoders are off).

``switch_off_rule: posterior`` is the recipe's own variant, not in the paper (it reads Table 7's
``s_th`` values 0.5 and 0.2 as posteriors and its ``tau`` as ms): decoder ``l`` stops once
``t > tau`` and its LID posterior averaged over the frames so far,
``p_l(t) = (1/t) sum_{t' <= t} P_t'(l)``, is below ``s_th``; the decoder of the highest ``p_l(t)``
among those still running never stops (with ``s_th`` = 0.5 and two languages or more, every other
decoder stops at ``tau``).

Decoding cost, ``T_avg`` (eq. 2, :func:`t_avg`): the paper defines, per utterance of ``T``
frames, ``T_avg = sum_l^L T_l^off`` with ``T_l^off = t_l^off / T`` "the fraction of total frames
the decoder l was active" (``t_l^off``: the frames after which decoder ``l`` was turned off).
Here, with ``T_{n,l}`` the frames decoder ``l`` processed in utterance ``n`` of ``T_n`` frames,
``T_avg = (1/N) sum_n sum_l T_{n,l} / T_n``: eq. 2 averaged over the ``N`` utterances (the paper
reports one ``T_avg`` per test set without saying how utterances are combined); ``L`` (number of
languages) without switch-off, 1 if every other decoder stopped at once.  Each
:class:`RecognitionResult` carries the per-language frame counts.

Real-time factor: ``rtf = decode_seconds / audio_seconds`` with ``audio_seconds`` = raw input
frames x ``frame_shift`` (10 ms) and ``decode_seconds`` the wall-clock time spent inside the
recognizer (stacking, encoder, LID, search).  Set ``torch.set_num_threads(1)`` for a one-core RTF.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Literal, Sequence

import torch

from speechkit.features.stack import FrameStacker, stack_frames
from speechkit.models.rnnt import RNNT

logger = logging.getLogger(__name__)

__all__ = [
    "DecodeConfig", "GreedyDecoder", "BeamDecoder", "StreamingRecognizer", "RecognitionResult",
    "recognize", "recognize_batch", "t_avg",
]


@dataclass
class DecodeConfig:
    """Decoding options (what ``speechkit-asr-decode`` exposes).

    Attributes:
        mode: oracle (known language) | lid_free (one decoder per language, LID head picks).
        method: greedy | beam (modified beam search, one symbol per frame).
        beam: beam width for ``method: beam``.
        length_norm: ``method: beam``: pick the final hypothesis by ``log P / (1 + U)`` instead of
            ``log P`` (icefall's default; see :class:`BeamDecoder`).
        max_symbols_per_frame: greedy search: most non-blank symbols emitted per encoder frame.
        tau: early switch-off: the paper's minimum wait time (section 6.3): every decoder runs
            the first ``tau`` encoder frames (30 ms each with the paper's stacking; the paper's
            text counts tau in frames); null disables switch-off.
        s_th: early switch-off threshold: ``switch_off_rule: gap`` (the paper's rule, eq. 1): the
            gap of cumulative LID log-posteriors ``s_l(t)`` below the best running language's,
            nats, ``.inf`` never switches off; ``posterior`` (the recipe's own variant): on the
            running average LID posterior (0..1), ``.inf`` stops every decoder but the best at
            ``tau``. null disables switch-off.
        switch_off_rule: gap (the paper's rule, section 6.3, eq. 1: cumulative log-posterior gap,
            nats) | posterior (the recipe's own variant, not in the paper: running average
            posterior below ``s_th``); see the module docstring.
        chunk_frames: raw feature frames fed per chunk (streaming); 0 = whole utterance at once.
        num_stack: frames stacked per encoder input frame (paper: 8).
        stack_stride: input frames between encoder frames (paper: 3).
        frame_shift: seconds per raw feature frame (for the real-time factor).
    """

    mode: Literal["oracle", "lid_free"] = "oracle"
    method: Literal["greedy", "beam"] = "greedy"
    beam: int = 4
    length_norm: bool = False
    max_symbols_per_frame: int = 3
    tau: int | None = None
    s_th: float | None = None
    switch_off_rule: Literal["gap", "posterior"] = "gap"
    chunk_frames: int = 0
    num_stack: int = 8
    stack_stride: int = 3
    frame_shift: float = 0.01


class GreedyDecoder:
    """Streaming greedy search for one language.

    Args:
        model: an :class:`RNNT` (in eval mode).
        lang: the language whose prediction/joint networks are used (ignored by vanilla/onehot).
        max_symbols_per_frame: most non-blank symbols per encoder frame (>= 1).
    """

    def __init__(self, model: RNNT, lang, max_symbols_per_frame: int = 3):
        if max_symbols_per_frame < 1:
            raise ValueError(f"max_symbols_per_frame must be >= 1, got {max_symbols_per_frame}")
        self.model, self.lang, self.max_symbols = model, lang, int(max_symbols_per_frame)
        self.joint_net = model.joint_network(lang)
        self.blank = model.blank
        self.tokens: list[int] = []
        self.log_prob = 0.0
        self.num_frames = 0
        dev = next(model.parameters()).device
        self._token = torch.empty(1, dtype=torch.long, device=dev)
        self._set_pred(self.blank, None)

    def _set_pred(self, token: int, state):
        self._token.fill_(token)
        out, self.state = self.model.prediction_step(self.lang, self._token, state)
        self.pred_proj = self.joint_net.lin_pred(out[0])

    @torch.inference_mode()
    def advance(self, enc: torch.Tensor) -> None:
        """Consume encoder frames ``enc (T, E)``."""
        enc_proj = self.joint_net.lin_enc(enc)
        for t in range(enc_proj.size(0)):
            e = enc_proj[t]
            for _ in range(self.max_symbols):
                lp = self.joint_net.from_projections(e, self.pred_proj)
                k = int(lp.argmax())
                self.log_prob += float(lp[k])
                if k == self.blank:
                    break
                self.tokens.append(k)
                self._set_pred(k, self.state)
            self.num_frames += 1

    def best(self) -> tuple[list[int], float]:
        """``(tokens, log_prob)`` of the current hypothesis (log_prob: nats, blanks included)."""
        return list(self.tokens), self.log_prob


class BeamDecoder:
    """Streaming modified beam search (k2/icefall style, at most one symbol per frame).

    Args:
        model: an :class:`RNNT` (in eval mode).
        lang: the language whose prediction/joint networks are used.
        beam: hypotheses kept after each frame (>= 1).
        length_norm: :meth:`best` returns the hypothesis of highest ``log P / (1 + U)`` (``U``
            symbols; the ``1`` counts the start blank, as icefall's ``len(hyp.ys)`` with context
            size 1) instead of the highest ``log P``; pruning during the search is unchanged.
    """

    def __init__(self, model: RNNT, lang, beam: int = 4, length_norm: bool = False):
        if beam < 1:
            raise ValueError(f"beam must be >= 1, got {beam}")
        self.model, self.lang, self.beam = model, lang, int(beam)
        self.length_norm = bool(length_norm)
        self.joint_net = model.joint_network(lang)
        self.blank = model.blank
        self.num_frames = 0
        dev = next(model.parameters()).device
        with torch.inference_mode():
            out, (h, c) = model.prediction_step(lang, torch.full((1,), self.blank, dtype=torch.long, device=dev))
            self.hyps: list[tuple[int, ...]] = [()]
            self.scores = torch.zeros(1, dtype=torch.float64, device=dev)
            self.pred_proj = self.joint_net.lin_pred(out)  # (K, J)
            self.h, self.c = h, c  # (layers, K, .)

    @torch.inference_mode()
    def advance(self, enc: torch.Tensor) -> None:
        """Consume encoder frames ``enc (T, E)``."""
        enc_proj = self.joint_net.lin_enc(enc)
        for t in range(enc_proj.size(0)):
            self._step(enc_proj[t])
            self.num_frames += 1

    def _step(self, e: torch.Tensor) -> None:
        lp = self.joint_net.from_projections(e[None, :], self.pred_proj).double()  # (K, V)
        K, V = lp.shape
        total = (lp + self.scores[:, None]).flatten()
        top_scores, top_idx = total.topk(min(self.beam, total.numel()))
        merged: dict[tuple[int, ...], list] = {}  # tokens -> [score, parent, new token or None]
        for s, i in zip(top_scores.tolist(), top_idx.tolist()):
            k, v = divmod(i, V)
            toks = self.hyps[k] if v == self.blank else self.hyps[k] + (v,)
            if toks in merged:
                m = merged[toks]
                m[0] = max(m[0], s) + math.log1p(math.exp(-abs(m[0] - s)))
            else:
                merged[toks] = [s, k, None if v == self.blank else v]
        hyps = list(merged)
        parents = torch.tensor([merged[h][1] for h in hyps], device=self.scores.device)
        scores = torch.tensor([merged[h][0] for h in hyps], dtype=torch.float64, device=self.scores.device)
        pred_proj = self.pred_proj[parents]
        h, c = self.h[:, parents], self.c[:, parents]
        ext = [j for j, hy in enumerate(hyps) if merged[hy][2] is not None]
        if ext:
            ext_t = torch.tensor(ext, device=self.scores.device)
            tokens = torch.tensor([merged[hyps[j]][2] for j in ext], dtype=torch.long, device=self.scores.device)
            out, (h2, c2) = self.model.prediction_step(self.lang, tokens, (h[:, ext_t].contiguous(), c[:, ext_t].contiguous()))
            pred_proj[ext_t] = self.joint_net.lin_pred(out)
            h[:, ext_t], c[:, ext_t] = h2, c2
        self.hyps, self.scores, self.pred_proj, self.h, self.c = hyps, scores, pred_proj, h, c

    def best(self) -> tuple[list[int], float]:
        """``(tokens, log_prob)`` of the best hypothesis in the beam (``log_prob`` unnormalised, nats).

        Best: highest ``log_prob``, or with ``length_norm`` highest ``log_prob / (1 + len(tokens))``;
        ties go to the hypothesis listed first.
        """
        if self.length_norm:
            lengths = torch.tensor([1 + len(h) for h in self.hyps], dtype=torch.float64, device=self.scores.device)
            k = int((self.scores / lengths).argmax())
        else:
            k = int(self.scores.argmax())
        return list(self.hyps[k]), float(self.scores[k])


@dataclass
class RecognitionResult:
    """What :class:`StreamingRecognizer` returns for one utterance.

    Attributes:
        language: chosen language (oracle: the given one; lid_free: highest average LID posterior
            among decoders still running); ``None`` for vanilla decoding without a language.
        tokens: the chosen hypothesis (unit ids of ``language``; union ids for vanilla/onehot).
        hyps: per decoder (language name, or ``"union"`` for vanilla without a language): tokens.
        scores: per decoder: hypothesis log-probability (nats).
        lid_posteriors: per language: ``P_t(l)`` averaged over the utterance's encoder frames
            (``None`` without an LID head).
        decoder_frames: per decoder: encoder frames it processed (``T_{n,l}``).
        switched_off_at: per decoder: 0-based frame at which it was stopped, or ``None``.
        num_frames: encoder frames of the utterance (``T_n``).
        num_input_frames: raw feature frames.
        audio_seconds: ``num_input_frames * frame_shift``.
        decode_seconds: wall-clock seconds spent decoding.
        rtf: real-time factor ``decode_seconds / audio_seconds``.
    """

    language: str | None
    tokens: list[int]
    hyps: dict[str, list[int]]
    scores: dict[str, float]
    lid_posteriors: dict[str, float] | None
    decoder_frames: dict[str, int]
    switched_off_at: dict[str, int | None]
    num_frames: int
    num_input_frames: int
    audio_seconds: float
    decode_seconds: float
    rtf: float

    @property
    def active_decoders_per_frame(self) -> float:
        """``sum_l T_{n,l} / T_n`` (see :func:`t_avg`)."""
        return sum(self.decoder_frames.values()) / self.num_frames

    def to_dict(self) -> dict:
        return asdict(self)


def t_avg(results: Sequence[RecognitionResult]) -> float:
    """``T_avg = (1/N) sum_n sum_l T_{n,l} / T_n``: average active decoders per encoder frame.

    Eq. 2 of Joshi et al. (2021, section 6.3), ``T_avg = sum_l T_l^off`` with ``T_l^off`` the
    fraction of an utterance's frames decoder ``l`` was active, averaged over the ``N``
    utterances (how the paper combines utterances it does not state): ``L`` with all decoders
    running for the whole utterance, 1 when every decoder but one stops immediately.

    Raises:
        ValueError: no results.
    """
    if not results:
        raise ValueError("t_avg of no results")
    return sum(r.active_decoders_per_frame for r in results) / len(results)


class StreamingRecognizer:
    """Chunk-by-chunk recognition of one utterance (create one per utterance).

    Args:
        model: an :class:`RNNT` (put in eval mode by the recognizer's callers; see :func:`recognize`).
        config: :class:`DecodeConfig` (mode, method, beam, switch-off, stacking).
        lang: the utterance's language: required in ``oracle`` mode except for vanilla models;
            ignored in ``lid_free`` mode.
        stacked_input: the features given to :meth:`accept` are already stacked (skip the stacker).

    Raises:
        ValueError: ``lid_free`` on a model without an LID head, ``oracle`` without ``lang`` on a
        model that needs one, bad search options.

    Example::

        rec = StreamingRecognizer(model, DecodeConfig(mode="lid_free", tau=30, s_th=20.0))
        for chunk in chunks:                  # (n, 80) log-mel frames
            partial = rec.accept(chunk)       # {lang: tokens so far}
        result = rec.finalize()
    """

    def __init__(self, model: RNNT, config: DecodeConfig | None = None, lang=None, stacked_input: bool = False):
        cfg = config or DecodeConfig()
        self.model, self.config = model, cfg
        if cfg.method not in ("greedy", "beam"):
            raise ValueError(f"method must be greedy or beam, got {cfg.method!r}")
        if cfg.tau is not None and cfg.tau < 0:
            raise ValueError(f"tau must be >= 0 frames, got {cfg.tau}")
        if cfg.s_th is not None and not cfg.s_th >= 0:
            raise ValueError(f"s_th must be >= 0 (or inf), got {cfg.s_th}")
        if cfg.switch_off_rule not in ("gap", "posterior"):
            raise ValueError(f"switch_off_rule must be gap or posterior, got {cfg.switch_off_rule!r}")
        if cfg.frame_shift <= 0:
            raise ValueError(f"frame_shift must be > 0 seconds, got {cfg.frame_shift}")
        if cfg.mode == "lid_free":
            if not model.has_lid:
                raise ValueError(f"lid_free decoding needs an LID head (variant multisoftmax_lid), "
                                 f"this model is {model.config.variant}")
            names = list(model.languages)
            self.lang = None
        elif cfg.mode == "oracle":
            if lang is None and model.config.variant != "vanilla":
                raise ValueError(f"oracle decoding with a {model.config.variant} model needs the language")
            self.lang = None if lang is None else model.lang_name(lang)
            names = [self.lang or "union"]
        else:
            raise ValueError(f"mode must be oracle or lid_free, got {cfg.mode!r}")
        self.switch_off = cfg.mode == "lid_free" and cfg.tau is not None and cfg.s_th is not None
        self.names = names

        def make(name):
            lang_arg = 0 if name == "union" else name
            if cfg.method == "greedy":
                return GreedyDecoder(model, lang_arg, cfg.max_symbols_per_frame)
            return BeamDecoder(model, lang_arg, cfg.beam, cfg.length_norm)

        self.decoders = {n: make(n) for n in names}
        self.active = {n: True for n in names}
        self.switched_off_at: dict[str, int | None] = {n: None for n in names}
        self.stacker = None if stacked_input else FrameStacker(cfg.num_stack, cfg.stack_stride)
        self.enc_state = None
        self.num_frames = 0
        self.num_input_frames = 0
        self.decode_seconds = 0.0
        L = len(model.languages)
        self.s = torch.zeros(L, dtype=torch.float64)  # cumulative LID log-posteriors s_l(t)
        self.post_sum = torch.zeros(L, dtype=torch.float64)
        self.run_post_sum = torch.zeros(L, dtype=torch.float64)  # sum of P_t'(l), t' <= t (switch-off)
        self._finished = False

    @torch.inference_mode()
    def accept(self, feats: torch.Tensor) -> dict[str, list[int]]:
        """Feed ``feats (n, D)`` raw frames (or stacked frames); return the partial hypotheses.

        Raises:
            ValueError: after :meth:`finalize`, a chunk of the wrong shape, or a NaN or infinite
                value (it would make every score NaN: an empty hypothesis that looks decoded).
        """
        if self._finished:
            raise ValueError("this utterance is finalized; create a new StreamingRecognizer")
        t0 = time.perf_counter()
        dev = next(self.model.parameters()).device
        feats = feats.to(dev, torch.float32)
        _check_finite(feats, self.num_input_frames)
        self.num_input_frames += feats.size(0)
        x = self.stacker.accept(feats) if self.stacker is not None else feats
        if x.dim() != 2 or x.size(1) != self.model.config.input_dim:
            raise ValueError(f"encoder input must be (n, {self.model.config.input_dim}), got {tuple(x.shape)}")
        if x.size(0):
            enc, _, self.enc_state = self.model.encode(x[None], state=self.enc_state, lang=self.lang)
            self._consume(enc[0])
        self.decode_seconds += time.perf_counter() - t0
        return self.partial()

    @torch.inference_mode()
    def accept_encoded(self, enc: torch.Tensor, num_input_frames: int, encode_seconds: float = 0.0
                       ) -> dict[str, list[int]]:
        """Feed encoder output computed elsewhere (:func:`recognize_batch`'s batched forward).

        Args:
            enc: ``(n, encoder_dim)`` encoder frames of this utterance, continuing those fed so far.
            num_input_frames: raw feature frames they came from (for the audio duration).
            encode_seconds: time spent on them in the encoder, added to :attr:`decode_seconds`.

        Raises:
            ValueError: after :meth:`finalize`, or ``enc`` of the wrong shape.
        """
        if self._finished:
            raise ValueError("this utterance is finalized; create a new StreamingRecognizer")
        if enc.dim() != 2 or enc.size(1) != self.model.config.encoder_dim:
            raise ValueError(f"encoder output must be (n, {self.model.config.encoder_dim}), got {tuple(enc.shape)}")
        t0 = time.perf_counter()
        self.num_input_frames += int(num_input_frames)
        if enc.size(0):
            self._consume(enc)
        self.decode_seconds += time.perf_counter() - t0 + encode_seconds
        return self.partial()

    def _consume(self, enc: torch.Tensor) -> None:
        """LID posteriors, switch-off and the searches over encoder frames ``enc (n, E)``."""
        if self.model.has_lid:
            logp = torch.log_softmax(self.model.lid_logits(enc), dim=-1).double().cpu()
            self.post_sum += logp.exp().sum(0)
        # Frames of this chunk each decoder still decodes: switch-off depends on the LID
        # posteriors only, so it is settled for the whole chunk before any search runs.
        budget = {n: enc.size(0) for n in self.names if self.active[n]}
        if self.switch_off:
            for t in range(enc.size(0)):
                self.s += logp[t]
                self.run_post_sum += logp[t].exp()
                for n in self._maybe_switch_off(self.num_frames + t + 1):
                    budget[n] = t
        elif self.model.has_lid:
            self.s += logp.sum(0)
        for n, frames in budget.items():
            if frames:
                self.decoders[n].advance(enc[:frames])
        self.num_frames += enc.size(0)

    def _maybe_switch_off(self, t: int) -> list[str]:
        """Stop decoders by the switch-off rule at frame count ``t`` (1-based); return those stopped."""
        cfg = self.config
        if t <= cfg.tau:
            return []
        # the best among the decoders still running: a stopped language whose score later overtakes
        # them must not stop them all (then no hypothesis would be left)
        if cfg.switch_off_rule == "posterior":  # the recipe's own variant: running average posterior
            avg = self.run_post_sum / t
            best = max((i for i, n in enumerate(self.names) if self.active[n]), key=lambda i: float(avg[i]))
            stop = [i != best and float(avg[i]) < cfg.s_th for i in range(len(self.names))]
        else:  # the paper's rule (section 6.3): s_l(t) of eq. 1 more than s_th below the best
            s_max = max(float(self.s[i]) for i, n in enumerate(self.names) if self.active[n])
            stop = [float(self.s[i]) < s_max - cfg.s_th for i in range(len(self.names))]
        stopped = []
        for i, n in enumerate(self.names):
            if self.active[n] and stop[i]:
                self.active[n] = False
                self.switched_off_at[n] = t - 1
                stopped.append(n)
                logger.debug("switch-off: decoder %s stopped at frame %d", n, t - 1)
        return stopped

    def partial(self) -> dict[str, list[int]]:
        """Current best tokens of every decoder (stopped decoders keep their last hypothesis)."""
        return {n: d.best()[0] for n, d in self.decoders.items()}

    def finalize(self) -> RecognitionResult:
        """Finish the utterance and return its :class:`RecognitionResult`.

        Raises:
            ValueError: the utterance produced no encoder frame (fewer raw frames than ``num_stack``).
        """
        if self.num_frames == 0:
            raise ValueError(
                f"utterance too short: {self.num_input_frames} input frames give no encoder frame "
                f"(need >= {self.config.num_stack})"
            )
        self._finished = True
        hyps, scores = {}, {}
        for n, d in self.decoders.items():
            hyps[n], scores[n] = d.best()
        post = None
        if self.model.has_lid:
            avg = self.post_sum / self.num_frames
            post = {k: float(avg[i]) for i, k in enumerate(self.model.languages)}
        if self.config.mode == "lid_free":
            running = [n for n in self.names if self.active[n]]
            language = max(running, key=lambda n: post[n])
        else:
            language = self.lang
        key = language if language is not None else self.names[0]
        audio = self.num_input_frames * self.config.frame_shift
        return RecognitionResult(
            language=language,
            tokens=hyps[key],
            hyps=hyps,
            scores=scores,
            lid_posteriors=post,
            decoder_frames={n: d.num_frames for n, d in self.decoders.items()},
            switched_off_at=dict(self.switched_off_at),
            num_frames=self.num_frames,
            num_input_frames=self.num_input_frames,
            audio_seconds=audio,
            decode_seconds=self.decode_seconds,
            rtf=self.decode_seconds / audio if audio > 0 else float("nan"),
        )


def _check_finite(feats: torch.Tensor, offset: int = 0) -> None:
    """Raise ValueError naming the first frame (``offset`` + row) of ``feats`` with a NaN or infinity."""
    finite = torch.isfinite(feats)
    if not bool(finite.all()):
        where = [int(i) for i in torch.nonzero(~finite)[0]]
        dim = f" in dimension {where[1]}" if len(where) > 1 else ""
        raise ValueError(f"frame {offset + where[0]} has a non-finite value ({float(feats[tuple(where)])}{dim}); "
                         "every score would be NaN")


def recognize(
    model: RNNT,
    feats: torch.Tensor,
    config: DecodeConfig | None = None,
    lang=None,
    stacked_input: bool = False,
    on_partial=None,
) -> RecognitionResult:
    """Decode one utterance ``feats (T, D)``, in chunks of ``config.chunk_frames`` (0: all at once).

    ``on_partial(partial_hyps)`` is called after every chunk if given.  The model is put in eval
    mode.  See :class:`StreamingRecognizer` for the arguments and errors.
    """
    cfg = config or DecodeConfig()
    model.eval()
    rec = StreamingRecognizer(model, cfg, lang=lang, stacked_input=stacked_input)
    step = cfg.chunk_frames if cfg.chunk_frames > 0 else max(1, feats.size(0))
    for i in range(0, feats.size(0), step):
        partial = rec.accept(feats[i : i + step])
        if on_partial is not None:
            on_partial(partial)
    return rec.finalize()


def recognize_batch(
    model: RNNT,
    feats: Sequence[torch.Tensor],
    config: DecodeConfig | None = None,
    langs: Sequence | None = None,
) -> list[RecognitionResult | None]:
    """Decode several utterances with one batched encoder forward, then one search per utterance.

    The encoder is unidirectional, so each utterance's encoder frames in the zero-padded batch
    equal those of :func:`recognize` on it alone (chunked or not), and the searches, LID
    posteriors and switch-off, which run frame by frame, give the same hypotheses (tested). What a
    batch saves is the encoder's per-call overhead, most of the decoding time on a GPU.

    Args:
        model: an :class:`RNNT` (put in eval mode).
        feats: ``B`` raw ``(T_b, D)`` feature matrices (``config.num_stack`` frames are stacked
            here, as :class:`StreamingRecognizer` does).
        config: :class:`DecodeConfig`; ``chunk_frames`` is ignored (the result does not depend on it).
        langs: each utterance's language (``oracle`` mode; ``None`` entries or no list for vanilla
            and ``lid_free``).

    Returns:
        One :class:`RecognitionResult` per utterance, ``None`` for an utterance with fewer than
        ``num_stack`` frames (no encoder frame); each ``decode_seconds`` holds its search time plus
        its share (by frames) of the batched encoder's time.

    Raises:
        ValueError: as :class:`StreamingRecognizer`; ``langs`` of another length than ``feats``;
            a NaN or infinite feature value (names the utterance's index in ``feats``).
    """
    cfg = config or DecodeConfig()
    if langs is None:
        langs = [None] * len(feats)
    if len(langs) != len(feats):
        raise ValueError(f"langs has {len(langs)} entries for {len(feats)} utterances")
    for i, f in enumerate(feats):
        try:
            _check_finite(f)
        except ValueError as e:
            raise ValueError(f"utterance {i} of the batch: {e}") from None
    model.eval()
    recs = [StreamingRecognizer(model, cfg, lang=lang, stacked_input=True) for lang in langs]
    dev = next(model.parameters()).device
    with torch.inference_mode():
        t0 = time.perf_counter()
        stacked = [stack_frames(f.to(dev, torch.float32), num_stack=cfg.num_stack, stride=cfg.stack_stride)[0]
                   for f in feats]
        keep = [i for i, x in enumerate(stacked) if x.size(0) > 0]
        if keep:
            lengths = torch.tensor([stacked[i].size(0) for i in keep], dtype=torch.long, device=dev)
            x = torch.nn.utils.rnn.pad_sequence([stacked[i] for i in keep], batch_first=True)
            lang_arg = [recs[i].lang for i in keep] if model.config.variant == "onehot" else None
            enc, _, _ = model.encode(x, lengths, lang=lang_arg)
        seconds = time.perf_counter() - t0
    total = sum(stacked[i].size(0) for i in keep) or 1
    out: list[RecognitionResult | None] = [None] * len(feats)
    for j, i in enumerate(keep):
        n = stacked[i].size(0)
        recs[i].accept_encoded(enc[j, :n], feats[i].size(0), encode_seconds=seconds * n / total)
        out[i] = recs[i].finalize()
    return out
