"""Streaming multilingual RNN-T models: vanilla, one-hot, multi-softmax (+LSP, +LID).

Joshi, Das, Sun, Mehta, Li, Gong, "Multiple Softmax Architecture for Streaming Multilingual
End-to-End ASR Systems" (Interspeech 2021).  All variants share the RNN-T skeleton (Graves 2012):
a unidirectional LSTM encoder over stacked low-frame-rate features (:mod:`speechkit.features.stack`),
an LSTM prediction network fed the previous non-blank output, and a joint network
``z = W_out tanh(W_enc h_t + W_pred g_u)`` followed by a softmax.  ``config.variant`` selects:

``vanilla``
    one softmax over the *union* of all languages' units; no language information (section 3).
``onehot``
    as vanilla, with the language one-hot appended to every encoder input frame (section 3; where
    the paper feeds the one-hot vector it does not say beyond "onehot embedding at input"); its hot
    entry is ``config.onehot_scale`` (see :class:`RNNTConfig`: at 1 the language is one input among
    640 normalised ones and is learnt too slowly to be used in a short run).
``multisoftmax``
    shared encoder and prediction LSTM; a language-specific embedding, joint network and softmax
    over that language's units (section 4, Figure 1).
``multisoftmax_lsp``
    multisoftmax plus a language-specific prediction network (embedding + LSTM) per language
    (section 4.1, the blue box of Figure 2; Table 2's "Multi-softmax LSP").
``multisoftmax_lid``
    multisoftmax plus an LID head on the encoder output, trained with frame-level cross-entropy
    added to the RNN-T loss; the LID head reads only the encoder, so the CE gradient reaches only
    the encoder and the LID parameters (section 4.2).  Its frame posteriors drive LID-free
    decoding and early switch-off (:mod:`speechkit.decode.rnnt_search`).
``multisoftmax_lsp_lid``
    both: a prediction network per language and the LID head.  Figure 2 draws the LID head on the
    LSP model "for the sake of convenience" (section 4.2); the paper evaluates the LID head on the
    plain multi-softmax model only (Tables 4-7), so this variant is the recipe's own extension.

``share_joint_proj`` (multi-softmax variants): the joint network's encoder and prediction
projections ``W_enc``, ``W_pred`` are shared by all languages and only the output layer (the
softmax) and the label embedding are per language; the ``paper`` preset uses it (Table 6). The
paper calls the joint layers language-specific (abstract, section 4), but its Table 6 counts leave
room only for per-language embeddings and output layers (a per-language ``W_enc``/``W_pred`` of the
``paper`` sizes would add 2.1 M each); the default (false) keeps a whole joint network per language.

Auxiliary CTC (``config.ctc_weight > 0``): a linear CTC head on the encoder output (per language
for the multi-softmax variants, over the union for vanilla/onehot) whose CTC loss (Graves et al.
2006) is added to the RNN-T loss, as in ESPnet's / icefall's transducer recipes. It makes the
encoder carry the transcript by itself; without it, on small or repetitive data, the RNN-T can
settle in the "prediction-network LM" optimum where every label is emitted in the first encoder
frames and the encoder only says when the utterance ends (egs/indic_multilingual/results/mini/NOTES.md,
"Why the default has an auxiliary CTC loss"). The paper trains with the RNN-T loss (plus the LID
cross-entropy) alone. The head is not used for decoding.

Units: every language's inventory has blank at id 0 (``vocab_sizes[lang]`` includes it).  Targets
are always given in per-language ids; the shared-softmax variants (vanilla, onehot) map them into
the union inventory through ``config.union_maps`` (per language, list index = language id, value =
union id; blank -> 0), by default a disjoint union (blank, then each language's non-blank units in
``vocab_sizes`` order).  Their decoded hypotheses are union ids.

Tensor conventions: ``feats (B, T, input_dim)`` stacked features, ``feat_lengths (B,)`` frames,
``targets (B, U)`` per-language ids (padding past ``target_lengths`` ignored).
"""
from __future__ import annotations

import dataclasses
import logging

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.models.rnnt_config import LID_VARIANTS, LSP_VARIANTS, VARIANTS, RNNTConfig
from speechkit.nn.rnnt_loss import rnnt_loss

logger = logging.getLogger(__name__)

# RNNTConfig and the variant names are the model's constructor argument and vocabulary: they stay
# importable from here (speechkit.models.rnnt_config defines them).
__all__ = [
    "VARIANTS", "RNNTConfig", "RNNT", "JointNetwork", "to_monolingual", "parameter_counts", "LSP_VARIANTS",
    "LID_VARIANTS", "lstm_step",
]


class JointNetwork(nn.Module):
    """``log_softmax(W_out tanh(W_enc enc + W_pred pred))`` (Graves 2012; He et al. 2019 form).

    ``forward(enc (..., E), pred (..., P))`` broadcasts the leading dimensions and returns
    ``(..., vocab_size)`` unnormalised logits; :meth:`log_probs` normalises.
    """

    def __init__(self, enc_dim: int, pred_dim: int, joint_dim: int, vocab_size: int):
        super().__init__()
        self.lin_enc = nn.Linear(enc_dim, joint_dim)
        self.lin_pred = nn.Linear(pred_dim, joint_dim, bias=False)
        self.out = nn.Linear(joint_dim, vocab_size)

    def forward(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.lin_enc(enc) + self.lin_pred(pred)))

    def from_projections(self, enc_proj: torch.Tensor, pred_proj: torch.Tensor) -> torch.Tensor:
        """Log-probs from ``lin_enc(enc)`` and ``lin_pred(pred)`` computed once and reused (decoding)."""
        return torch.log_softmax(self.out(torch.tanh(enc_proj + pred_proj)), dim=-1)

    def log_probs(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.forward(enc, pred), dim=-1)


def _lstm(input_size: int, hidden: int, layers: int, proj: int, dropout: float) -> nn.LSTM:
    return nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True,
                   dropout=dropout if layers > 1 else 0.0, proj_size=proj)


def lstm_step(lstm: nn.LSTM, x: torch.Tensor, state=None) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One time step of a (batch-first, unidirectional, optionally projected) ``nn.LSTM``.

    Same result as ``lstm(x[:, None], state)`` (to float rounding) without the per-call overhead of
    the fused kernel, which dominates single-step decoding on CPU (measured 2-3x faster).  No
    inter-layer dropout: use it in eval mode.

    Args:
        x: ``(N, input_size)``; state: ``(h, c)`` each ``(layers, N, .)`` or ``None`` (zeros).
    Returns:
        ``(out (N, proj_size or hidden_size), (h, c))``.
    """
    N = x.size(0)
    H, P = lstm.hidden_size, lstm.proj_size
    if state is None:
        h0 = x.new_zeros(lstm.num_layers, N, P or H)
        c0 = x.new_zeros(lstm.num_layers, N, H)
    else:
        h0, c0 = state
    hs, cs, inp = [], [], x
    for k in range(lstm.num_layers):
        gates = F.linear(inp, getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"bias_ih_l{k}"))
        gates = gates + F.linear(h0[k], getattr(lstm, f"weight_hh_l{k}"), getattr(lstm, f"bias_hh_l{k}"))
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c0[k] + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        if P:
            h = F.linear(h, getattr(lstm, f"weight_hr_l{k}"))
        hs.append(h)
        cs.append(c)
        inp = h
    return inp, (torch.stack(hs), torch.stack(cs))


class RNNT(nn.Module):
    """Multilingual RNN-T; the variant is ``config.variant`` (see the module docstring).

    Languages are named by the keys of ``config.vocab_sizes``; wherever a ``lang`` argument is
    taken it may be the name, the integer id, or (for batches) a ``(B,)`` tensor / list of either.
    Blank is id 0 in every output inventory and is also the prediction network's start symbol
    (its embedding is the zero vector).

    Submodules: ``encoder`` (LSTM), ``lid_head`` (multisoftmax_lid), ``ctc_head`` (shared
    variants) or ``ctc_heads[lang]`` (the others) when ``config.ctc_weight > 0``; shared variants have
    ``embedding``, ``pred_rnn``, ``joint_net``; multisoftmax has ``embeddings[lang]``,
    ``pred_rnn``, ``joint_nets[lang]`` (with ``share_joint_proj`` their ``lin_enc``/``lin_pred``
    are one module, listed once by ``parameters()``); the LSP variants have ``pred_rnns[lang]``
    instead of ``pred_rnn``.
    """

    blank = 0

    def __init__(self, config: RNNTConfig):
        super().__init__()
        config.validate()
        self.config = config
        c = config
        L = len(c.languages)
        self.languages = c.languages
        self._lang_index = {k: i for i, k in enumerate(self.languages)}
        enc_in = c.input_dim + (L if c.variant == "onehot" else 0)
        self.encoder = _lstm(enc_in, c.encoder_hidden, c.encoder_layers, c.encoder_proj, c.dropout)
        self.dropout = nn.Dropout(c.dropout)
        if c.shared_softmax:
            maps = c.union_map_lists()
            self.union_vocab_size = 1 + max(max(m) for m in maps.values())
            vmax = max(c.vocab_sizes.values())
            table = torch.zeros(L, vmax, dtype=torch.long)
            for i, lang in enumerate(self.languages):
                table[i, : len(maps[lang])] = torch.tensor(maps[lang])
            self.register_buffer("union_map", table, persistent=False)
            self.embedding = nn.Embedding(self.union_vocab_size, c.embed_dim, padding_idx=self.blank)
            self.pred_rnn = _lstm(c.embed_dim, c.pred_hidden, c.pred_layers, c.pred_proj, c.dropout)
            self.joint_net = JointNetwork(c.encoder_dim, c.pred_dim, c.joint_dim, self.union_vocab_size)
        else:
            self.union_vocab_size = None
            self.embeddings = nn.ModuleDict({
                k: nn.Embedding(v, c.embed_dim, padding_idx=self.blank) for k, v in c.vocab_sizes.items()
            })
            if c.lsp:
                self.pred_rnns = nn.ModuleDict({
                    k: _lstm(c.embed_dim, c.pred_hidden, c.pred_layers, c.pred_proj, c.dropout)
                    for k in self.languages
                })
            else:
                self.pred_rnn = _lstm(c.embed_dim, c.pred_hidden, c.pred_layers, c.pred_proj, c.dropout)
            self.joint_nets = nn.ModuleDict({
                k: JointNetwork(c.encoder_dim, c.pred_dim, c.joint_dim, v) for k, v in c.vocab_sizes.items()
            })
            if c.share_joint_proj:  # one W_enc / W_pred module object in every language's joint
                first = self.joint_nets[self.languages[0]]
                for k in self.languages[1:]:
                    self.joint_nets[k].lin_enc = first.lin_enc
                    self.joint_nets[k].lin_pred = first.lin_pred
        self.has_ctc = c.ctc_weight > 0
        if self.has_ctc:  # auxiliary CTC head(s) on the encoder output (training only); blank = 0
            if c.shared_softmax:
                self.ctc_head = nn.Linear(c.encoder_dim, self.union_vocab_size)
            else:
                self.ctc_heads = nn.ModuleDict({k: nn.Linear(c.encoder_dim, v) for k, v in c.vocab_sizes.items()})
        self.has_lid = c.lid
        if self.has_lid:
            if c.lid_hidden:
                self.lid_head = nn.Sequential(nn.Linear(c.encoder_dim, c.lid_hidden), nn.ReLU(),
                                              nn.Linear(c.lid_hidden, L))
            else:
                self.lid_head = nn.Linear(c.encoder_dim, L)

    # -- languages ------------------------------------------------------------------------------
    def lang_id(self, lang: str | int) -> int:
        """Integer id of a language name or id; raises ``ValueError`` for an unknown one."""
        if isinstance(lang, torch.Tensor):
            lang = lang.item()
        if isinstance(lang, str):
            if lang not in self._lang_index:
                raise ValueError(f"unknown language {lang!r} (model languages: {', '.join(self.languages)})")
            return self._lang_index[lang]
        i = int(lang)
        if not 0 <= i < len(self.languages):
            raise ValueError(f"language id {i} out of range [0, {len(self.languages)})")
        return i

    def lang_name(self, lang: str | int) -> str:
        return self.languages[self.lang_id(lang)]

    def _lang_ids(self, lang, batch: int) -> torch.Tensor:
        dev = self.encoder.weight_ih_l0.device
        if isinstance(lang, (str, int)) or (isinstance(lang, torch.Tensor) and lang.dim() == 0):
            return torch.full((batch,), self.lang_id(lang), dtype=torch.long, device=dev)
        ids = torch.tensor([self.lang_id(x) for x in (lang.tolist() if isinstance(lang, torch.Tensor) else lang)],
                           dtype=torch.long, device=dev)
        if ids.numel() != batch:
            raise ValueError(f"lang has {ids.numel()} entries for a batch of {batch}")
        return ids

    def vocab_size(self, lang: str | int | None = None) -> int:
        """Output size of the softmax used for ``lang`` (the union size for vanilla/onehot)."""
        if self.config.shared_softmax:
            return self.union_vocab_size
        return self.config.vocab_sizes[self.lang_name(lang)]

    def to_union(self, lang: str | int, ids: torch.Tensor) -> torch.Tensor:
        """Map per-language unit ids to union ids (vanilla/onehot)."""
        if not self.config.shared_softmax:
            raise ValueError(f"variant {self.config.variant} has per-language outputs, no union inventory")
        return self.union_map[self.lang_id(lang)][ids]

    # -- encoder --------------------------------------------------------------------------------
    def encode(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor | None = None,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
        lang=None,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run the (streaming, unidirectional) encoder.

        Args:
            feats: ``(B, T, input_dim)`` stacked features (a chunk when streaming).
            lengths: ``(B,)`` valid frames (default: all ``T``); frames past a length are padding.
            state: LSTM ``(h, c)`` from the previous chunk (``None``: start of utterance).  Feeding
                an utterance chunk by chunk with the returned state gives the same output as one
                call on the whole utterance (tested).  For a padded batch the returned state is
                the one after the padded end, so stream one utterance (or equal lengths) at a time.
            lang: language (name/id or ``(B,)``), required by the ``onehot`` variant only (its
                one-hot, hot entry ``config.onehot_scale``, is appended to every frame).

        Returns:
            ``(enc (B, T, encoder_dim), lengths (B,), state)``.
        """
        B, T, _ = feats.shape
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.long, device=feats.device)
        x = feats
        if self.config.variant == "onehot":
            if lang is None:
                raise ValueError("the onehot variant needs the language of the input (lang=...)")
            ids = self._lang_ids(lang, B)
            onehot = F.one_hot(ids, len(self.languages)).to(feats.dtype) * self.config.onehot_scale
            x = torch.cat([feats, onehot[:, None, :].expand(B, T, -1)], dim=-1)
        enc, state = self.encoder(x, state)
        return self.dropout(enc), lengths, state

    def lid_logits(self, enc: torch.Tensor) -> torch.Tensor:
        """``(B, T, L)`` LID logits from encoder output (multisoftmax_lid only)."""
        if not self.has_lid:
            raise ValueError(f"variant {self.config.variant} has no LID head (use multisoftmax_lid or "
                             f"multisoftmax_lsp_lid)")
        return self.lid_head(enc)

    def lid_posteriors(self, enc: torch.Tensor) -> torch.Tensor:
        """``(B, T, L)`` frame-level language posteriors P_t(l) (softmax of the LID head)."""
        return torch.softmax(self.lid_logits(enc), dim=-1)

    # -- prediction network ---------------------------------------------------------------------
    def _embedding(self, lang) -> nn.Embedding:
        return self.embedding if self.config.shared_softmax else self.embeddings[self.lang_name(lang)]

    def _pred_rnn(self, lang) -> nn.LSTM:
        return self.pred_rnns[self.lang_name(lang)] if self.config.lsp else self.pred_rnn

    def joint_network(self, lang) -> JointNetwork:
        """The :class:`JointNetwork` used for ``lang`` (the shared one for vanilla/onehot)."""
        return self._joint_net(lang)

    def _joint_net(self, lang) -> JointNetwork:
        return self.joint_net if self.config.shared_softmax else self.joint_nets[self.lang_name(lang)]

    def prediction_network(self, lang, tokens: torch.Tensor) -> torch.Tensor:
        """Prediction network over whole label sequences: ``tokens (B, U+1)`` (blank first) -> ``(B, U+1, P)``.

        Tokens are union ids for vanilla/onehot, ``lang``'s ids otherwise (``lang`` is one language).
        """
        out, _ = self._pred_rnn(lang)(self._embedding(lang)(tokens))
        return self.dropout(out)

    def prediction_step(
        self, lang, token: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One prediction-network step: ``token (N,)`` (blank = start) -> ``(out (N, P), state)``.

        ``state`` is the LSTM ``(h, c)``, each ``(pred_layers, N, ·)``; ``None`` starts afresh.
        ``lang`` is ignored by the shared-softmax variants (tokens are union ids there).
        In eval mode the step runs through :func:`lstm_step` (no fused-kernel overhead).
        """
        emb = self._embedding(lang)(token)
        rnn = self._pred_rnn(lang)
        if self.training:
            out, state = rnn(emb[:, None, :], state)
            return self.dropout(out[:, 0]), state
        return lstm_step(rnn, emb, state)

    def joint(self, lang, enc_t: torch.Tensor, pred_u: torch.Tensor) -> torch.Tensor:
        """Joint network + log-softmax of ``lang`` (broadcasting ``(..., E)`` with ``(..., P)``) -> ``(..., V)``."""
        return self._joint_net(lang).log_probs(enc_t, pred_u)

    # -- training -------------------------------------------------------------------------------
    def forward(
        self,
        feats: torch.Tensor,
        feat_lengths: torch.Tensor,
        targets: torch.Tensor,
        target_lengths: torch.Tensor,
        lang,
        ctc_only: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Training losses for a batch.

        Args:
            feats: ``(B, T, input_dim)`` stacked features; feat_lengths ``(B,)``.
            targets: ``(B, U)`` per-language unit ids (no blank); target_lengths ``(B,)``.
            lang: the batch's language (name or id) or a ``(B,)`` tensor/list of them (mixed
                batches are split by language for the language-specific parts).
            ctc_only: the encoder warm-up (``ctc_warmup_epochs``): skip the prediction and joint
                networks; ``rnnt`` is 0 and ``total = ctc_weight * ctc + lid_weight * lid_ce``.
                Needs ``ctc_weight > 0``.

        Returns:
            ``{"rnnt", "lid_ce", "total"}`` (and ``"ctc"`` with a CTC head) scalars: ``rnnt`` is
            the RNN-T loss (nats) averaged over utterances, ``ctc`` the auxiliary CTC loss (nats
            per utterance), ``lid_ce`` the frame-level LID cross-entropy (0 without an LID head)
            averaged over valid frames (``lid_ce_norm: frame``, nats per frame) or summed over
            each utterance's frames and averaged over utterances (``utterance``, nats per
            utterance), ``total = rnnt + lid_weight * lid_ce + ctc_weight * ctc``.

        Raises:
            ValueError: an utterance with no (stacked) frames, labels outside its language's
            inventory or equal to blank, unknown language; ``ctc_only`` without a CTC head.
        """
        if ctc_only and not self.has_ctc:
            raise ValueError("ctc_only needs a CTC head (model.ctc_weight > 0)")
        B = feats.size(0)
        lang_ids = self._lang_ids(lang, B)
        feat_lengths = feat_lengths.to(feats.device)
        target_lengths = target_lengths.to(feats.device)
        targets = targets.to(feats.device).long()
        empty = (feat_lengths < 1).nonzero().flatten()
        if empty.numel():
            raise ValueError(f"utterance {int(empty[0])} of the batch has no encoder frames (too short to stack)")
        enc, enc_lengths, _ = self.encode(feats, feat_lengths, lang=lang_ids)
        U = targets.size(1)
        valid = torch.arange(U, device=targets.device)[None, :] < target_lengths[:, None]
        for i in lang_ids.unique().tolist():
            sel = lang_ids == i
            bad = valid[sel] & ((targets[sel] < 1) | (targets[sel] >= self.config.vocab_sizes[self.languages[i]]))
            if bool(bad.any()):
                raise ValueError(f"targets of language {self.languages[i]!r} outside [1, "
                                 f"{self.config.vocab_sizes[self.languages[i]]})")
        losses = feats.new_zeros(B)
        tgt = targets.masked_fill(~valid, 0)
        if self.config.shared_softmax:
            groups = [(None, torch.arange(B, device=feats.device))]
            tgt = self.union_map[lang_ids[:, None], tgt]  # blank (padding) stays 0
        else:
            groups = [(i, (lang_ids == i).nonzero().flatten()) for i in lang_ids.unique().tolist()]
        for i, idx in ([] if ctc_only else groups):
            g_lang = 0 if i is None else i
            T_g = int(enc_lengths[idx].max())
            U_g = int(target_lengths[idx].max())
            y = tgt[idx, :U_g]
            pred_in = torch.cat([y.new_zeros(len(idx), 1), y], dim=1)  # blank = start symbol
            pred = self.prediction_network(g_lang, pred_in)  # (b, U_g+1, P)
            logits = self._joint_net(g_lang)(enc[idx, :T_g, None, :], pred[:, None, :, :])
            losses[idx] = rnnt_loss(logits, y, enc_lengths[idx], target_lengths[idx],
                                    blank=self.blank, reduction="none", impl=self.config.loss_impl)
        out = {"rnnt": losses.mean()}
        if self.has_ctc:
            out["ctc"] = self.ctc_loss(enc, enc_lengths, tgt, target_lengths, groups)
        if self.has_lid:
            T = enc.size(1)
            frame_ok = torch.arange(T, device=enc.device)[None, :] < enc_lengths[:, None]
            logits = self.lid_logits(enc)[frame_ok]  # (frames, L)
            ce = F.cross_entropy(logits, lang_ids[:, None].expand(B, T)[frame_ok], reduction="sum")
            # frame: mean over the batch's valid frames; utterance: per-utterance sums, mean over B
            out["lid_ce"] = ce / (frame_ok.sum() if self.config.lid_ce_norm == "frame" else B)
        else:
            out["lid_ce"] = out["rnnt"].new_zeros(())
        out["total"] = out["rnnt"] + self.config.lid_weight * out["lid_ce"]
        if self.has_ctc:
            out["total"] = out["total"] + self.config.ctc_weight * out["ctc"]
        return out

    def ctc_loss(self, enc: torch.Tensor, enc_lengths: torch.Tensor, targets: torch.Tensor,
                 target_lengths: torch.Tensor, groups) -> torch.Tensor:
        """Auxiliary CTC loss (Graves et al. 2006) of the encoder output, nats per utterance.

        Args:
            enc: ``(B, T, E)`` encoder output; enc_lengths ``(B,)``.
            targets: ``(B, U)`` ids of the output inventory the CTC head of each group uses
                (union ids for vanilla/onehot), 0-padded; target_lengths ``(B,)``.
            groups: ``[(language index or None for the shared head, utterance indices), ...]``.

        Returns:
            ``-log P_ctc(y|x)`` summed per utterance, averaged over the batch. An utterance whose
            labels (with the blanks CTC needs between repeats) do not fit its frames contributes
            0 (``zero_infinity``): it cannot be aligned, and the RNN-T term still trains on it.
        """
        losses = enc.new_zeros(enc.size(0))
        for i, idx in groups:
            head = self.ctc_head if i is None else self.ctc_heads[self.languages[i]]
            T_g = int(enc_lengths[idx].max())
            lp = torch.log_softmax(head(enc[idx, :T_g]).float(), dim=-1).transpose(0, 1)  # (T, b, V)
            losses[idx] = F.ctc_loss(lp, targets[idx], enc_lengths[idx], target_lengths[idx], blank=self.blank,
                                     reduction="none", zero_infinity=True).to(losses.dtype)
        return losses.mean()


def to_monolingual(model: RNNT, lang: str | int) -> RNNT:
    """A one-language model for fine-tuning (Table 3): keep the shared encoder and ``lang``'s
    embedding, prediction network, joint network and softmax; drop the other languages' parameters
    and the LID head.

    * multisoftmax / multisoftmax_lid -> ``multisoftmax`` with one language; multisoftmax_lsp /
      multisoftmax_lsp_lid -> ``multisoftmax_lsp``.  Same outputs for ``lang`` (tested).
    * vanilla / onehot (the paper fine-tunes the one-hot model per language): -> ``multisoftmax``
      with one language.  The union softmax is cut to ``lang``'s units (the rows of
      ``union_maps[lang]`` of the embedding and of the joint's output layer), and for onehot the
      constant one-hot input of ``lang`` (``onehot_scale`` times its weight column) is folded into
      the first encoder layer's bias (its weight columns dropped).  The joint *logits* of ``lang``'s units are unchanged (tested);
      their log-softmax is renormalised over ``lang``'s units only, so the other languages'
      units can no longer be emitted.
    * an auxiliary CTC head (``ctc_weight > 0``) keeps ``lang``'s (the union head cut to
      ``lang``'s rows).

    Raises:
        ValueError: unknown ``lang``.
    """
    c = model.config
    name = model.lang_name(lang)
    variant = "multisoftmax_lsp" if c.lsp else "multisoftmax"
    new_cfg = dataclasses.replace(c, vocab_sizes={name: c.vocab_sizes[name]}, variant=variant, union_maps=None)
    new = RNNT(new_cfg)
    src = model.state_dict()
    keep = {}
    if c.shared_softmax:
        rows = torch.as_tensor(c.union_map_lists()[name], device=model.union_map.device)
        i = model.lang_id(name)
        for k, v in src.items():
            if k.startswith("encoder."):
                if c.variant == "onehot" and k == "encoder.weight_ih_l0":
                    v = v[:, : c.input_dim]
                elif c.variant == "onehot" and k == "encoder.bias_ih_l0":
                    v = v + c.onehot_scale * src["encoder.weight_ih_l0"][:, c.input_dim + i]
                keep[k] = v
            elif k.startswith("pred_rnn."):
                keep[k] = v
            elif k == "embedding.weight":
                keep[f"embeddings.{name}.weight"] = v[rows]
            elif k.startswith("joint_net."):
                sub = k[len("joint_net."):]
                keep[f"joint_nets.{name}.{sub}"] = v[rows] if sub.startswith("out.") else v
            elif k.startswith("ctc_head."):  # the union CTC head cut to lang's units, as the softmax
                keep[f"ctc_heads.{name}.{k[len('ctc_head.'):]}"] = v[rows]
    else:
        per_lang = ("embeddings.", "joint_nets.", "pred_rnns.", "ctc_heads.")
        for k, v in src.items():
            if k.startswith("lid_head."):
                continue
            if k.startswith(per_lang) and k.split(".")[1] != name:
                continue
            keep[k] = v
    new.load_state_dict(keep, strict=True)
    new.train(model.training)
    return new.to(next(model.parameters()).device)


def _count(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def parameter_counts(model: RNNT) -> dict[str, int]:
    """Parameter counts by part: ``encoder``, ``prediction`` (embeddings + LSTMs), ``joint``,
    ``lid``, ``ctc`` (auxiliary CTC heads, training only; 0 without ``ctc_weight``), ``total``,
    and ``decode_<lang>``: parameters used when decoding one language.

    Shared modules (``share_joint_proj``) are counted once in ``joint`` and ``total`` and in full
    in every ``decode_<lang>``."""
    c = model.config
    enc = _count(model.encoder)
    lid = _count(getattr(model, "lid_head", None))
    if c.shared_softmax:
        pred = _count(model.embedding) + _count(model.pred_rnn)
        joint = _count(model.joint_net)
        per_lang = {k: enc + pred + joint for k in model.languages}
    else:
        emb = {k: _count(model.embeddings[k]) for k in model.languages}
        rnn = ({k: _count(model.pred_rnns[k]) for k in model.languages} if c.lsp
               else {k: _count(model.pred_rnn) for k in model.languages})
        jn = {k: _count(model.joint_nets[k]) for k in model.languages}
        pred = sum(emb.values()) + (sum(rnn.values()) if c.lsp else _count(model.pred_rnn))
        joint = _count(model.joint_nets)  # parameters() lists a shared W_enc/W_pred once
        per_lang = {k: enc + emb[k] + rnn[k] + jn[k] for k in model.languages}
    ctc = _count(getattr(model, "ctc_head", None)) + _count(getattr(model, "ctc_heads", None))
    counts = {"encoder": enc, "prediction": pred, "joint": joint, "lid": lid, "ctc": ctc, "total": _count(model)}
    assert counts["total"] == enc + pred + joint + lid + ctc
    counts.update({f"decode_{k}": v for k, v in per_lang.items()})
    return counts
