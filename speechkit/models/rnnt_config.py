"""Configuration of the multilingual RNN-T models (:class:`RNNTConfig`), their variants and the
size presets (``paper``: Joshi et al. 2021; ``small``). The model is :mod:`speechkit.models.rnnt`,
which describes the variants; parameter counts against the paper's Table 6 are in
:mod:`speechkit.models.rnnt_parameters`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Mapping

from torch import nn

from speechkit.utils.cli import ConfigError

# Names a language cannot have: nn.ModuleDict keys that torch refuses (they shadow its attributes).
_MODULEDICT_ATTRS = frozenset(dir(nn.ModuleDict()))

__all__ = ["VARIANTS", "LSP_VARIANTS", "LID_VARIANTS", "PRESETS", "RNNTConfig"]

VARIANTS = ("vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid", "multisoftmax_lsp_lid")
Variant = Literal["vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid", "multisoftmax_lsp_lid"]
LSP_VARIANTS = ("multisoftmax_lsp", "multisoftmax_lsp_lid")   # a prediction network per language
LID_VARIANTS = ("multisoftmax_lid", "multisoftmax_lsp_lid")   # an LID head on the encoder

# Sizes for the presets.  "paper": Joshi et al. 2021 give a 6 x 1024 LSTM encoder and a 2-layer LSTM
# prediction network.  The rest is fitted to their Table 6 (parameter counts, see PAPER_TABLE6 and
# paper_parameter_table in speechkit.models.rnnt_parameters): no LSTM projections, 1024-dim label
# embeddings and joint network, the joint's W_enc/W_pred shared by the languages (multi-softmax
# 0.57 M above En-IN's monolingual model is the three other languages' embedding + output layers,
# 59 + 97 + 123 units of Table 1; a per-language W_enc/W_pred alone would be 2.1 M each), the
# LSP difference 50.39 M = 3 x one 2 x 1024 prediction LSTM with 1024-dim input (so four
# languages), and an LID head with one hidden layer of 1536 units (1.58 M; Table 6: 1.53 M). The
# paper states only the encoder and prediction LSTMs (section 5), not the LID model's structure,
# and calls the joint layers language-specific (section 4), which Table 6's counts do not leave
# room for beyond the output layer: hence share_joint_proj here (the 'small' preset: false).
PRESETS: dict[str, dict] = {
    "paper": dict(encoder_layers=6, encoder_hidden=1024, encoder_proj=0, pred_layers=2,
                  pred_hidden=1024, pred_proj=0, embed_dim=1024, joint_dim=1024, lid_hidden=1536,
                  share_joint_proj=True),
    "small": dict(encoder_layers=3, encoder_hidden=256, encoder_proj=0, pred_layers=2,
                  pred_hidden=192, pred_proj=0, embed_dim=64, joint_dim=192, lid_hidden=0),
}


@dataclass
class RNNTConfig:
    """Configuration of :class:`~speechkit.models.rnnt.RNNT` (one place for every model size/choice).

    Attributes:
        vocab_sizes: output units per language, blank (id 0) included; the key order defines the
            language ids (0, 1, ...) used by the LID head, the one-hot input and ``lang`` tensors.
        variant: vanilla | onehot | multisoftmax | multisoftmax_lsp | multisoftmax_lid.
        input_dim: encoder input dimension (stacked features: 8 x 80 = 640).
        encoder_layers: unidirectional LSTM layers in the encoder (paper: 6).
        encoder_hidden: LSTM cells per encoder layer (paper: 1024).
        encoder_proj: LSTM projection size (LSTMP); 0 = no projection.  Encoder output dimension
            is ``encoder_proj or encoder_hidden``.
        pred_layers: LSTM layers in the prediction network (paper: 2).
        pred_hidden: LSTM cells per prediction layer.
        pred_proj: prediction LSTM projection size; 0 = none.
        embed_dim: label embedding dimension of the prediction network.
        joint_dim: joint network hidden dimension.
        lid_hidden: LID head hidden layer size (ReLU); 0 = a linear LID head.
        share_joint_proj: multi-softmax variants: one encoder projection ``W_enc`` and one
            prediction projection ``W_pred`` of the joint network for all languages (only the
            output layer and the label embedding per language; the ``paper`` preset); false = a
            whole joint network per language. No effect on vanilla/onehot (one joint network).
        lid_weight: weight ``lambda`` of the LID cross-entropy in ``total = rnnt + lambda * lid_ce``
            (multisoftmax_lid; the paper adds the two losses, section 4.2: ``lambda`` = 1).
        lid_ce_norm: normalisation of the LID cross-entropy (multisoftmax_lid). The RNN-T term is
            ``-log P(y|x)`` of each utterance (a sum over its ~T frames and U labels) averaged over
            the utterances of the batch, so its scale grows with T. ``frame`` (default, the results
            in egs/indic_multilingual): the frame CE averaged over every valid encoder frame of the
            batch, nats per frame, so the LID term weighs about ``lambda / T`` per frame against
            the RNN-T term. ``utterance``: the frame CE summed over each utterance's frames and
            averaged over utterances, nats per utterance, normalised as the RNN-T term (``lambda``
            weighs both per frame alike). Joshi et al. (2021) do not state theirs.
        ctc_weight: weight of an auxiliary CTC loss on the encoder output, ``total = rnnt +
            lid_weight * lid_ce + ctc_weight * ctc``; 0 (default) = no CTC head at all (the
            parameter counts of the paper's tables). ``ctc`` is ``-log P_ctc(y|x)`` summed over
            each utterance and averaged over utterances, normalised as the RNN-T term (so 0.3,
            ESPnet's usual transducer value, weighs it at 0.3 of the RNN-T loss). The CTC head is
            a linear layer per language (the union for vanilla/onehot); training only.
        ctc_warmup_epochs: the rnnt task trains the first this many epochs on the encoder
            losses only (CTC, plus the LID CE of the LID variants; ``forward(ctc_only=True)``),
            then on the full loss. An encoder that already carries the transcript keeps the RNN-T
            out of the prediction-network-LM optimum (see :mod:`speechkit.models.rnnt`). Needs
            ``ctc_weight > 0``; 0 = no warm-up.
        onehot_scale: onehot variant: the value of the hot entry of the language one-hot appended
            to every encoder input frame (the others are 0); 1 (default) = a plain one-hot, as the
            models trained before this key. At 1 the one-hot is one of ``input_dim`` unit-variance
            inputs (global CMVN): its weights move a gate pre-activation by ~0.04 at
            initialisation against ~1 from the features, and Adam moves a weight by about the
            learning rate per update, so the language is learnt late; ``sqrt(input_dim)`` (25.3
            for 640) gives the one-hot the expected norm of a normalised input frame. On the mini
            corpus (1096 updates, seeds 0 and 1) the one-hot model at 1 gave the same hypothesis
            for 82.5 % of test utterances whatever language it was given; at 25.3 it followed the
            language given (99-100 % of hypotheses in its script) and its WER fell (test 55.6 /
            39.4 against 52.4 / 54.5, unseen voice 60.0 / 42.6 against 74.0 / 67.5), still behind
            vanilla's on test (egs/indic_multilingual/README.md, claims). Joshi et al. (2021) say
            only "onehot embedding at input" (section 3).
        dropout: dropout between LSTM layers and on the encoder/prediction outputs.
        union_maps: vanilla/onehot only: per language, union id of each per-language id
            (``len == vocab_sizes[lang]``, blank -> 0); null = disjoint union.
        loss_impl: RNN-T loss implementation (:func:`speechkit.nn.rnnt_loss.rnnt_loss` ``impl``):
            auto (on CUDA torchaudio's compiled op where it runs and the batch's logits fit its int32
            indexing, several times faster; speechkit's otherwise, and on the CPU, where it is the
            faster), torchaudio (an error where it cannot run) or speechkit (pure PyTorch, any size,
            least memory). The same loss either way, to float rounding.
    """

    vocab_sizes: dict[str, int] = field(default_factory=dict)
    variant: Variant = "multisoftmax"
    input_dim: int = 640
    encoder_layers: int = 6
    encoder_hidden: int = 1024
    encoder_proj: int = 640
    pred_layers: int = 2
    pred_hidden: int = 1024
    pred_proj: int = 640
    embed_dim: int = 512
    joint_dim: int = 640
    lid_hidden: int = 0
    share_joint_proj: bool = False
    lid_weight: float = 1.0
    lid_ce_norm: Literal["frame", "utterance"] = "frame"
    ctc_weight: float = 0.0
    ctc_warmup_epochs: int = 0
    onehot_scale: float = 1.0
    dropout: float = 0.0
    union_maps: dict[str, list[int]] | None = None
    loss_impl: Literal["auto", "torchaudio", "speechkit"] = "auto"

    def __post_init__(self):
        # vocab_sizes may still be empty here (a task fills it from the unit inventories before
        # building the model, and --print-config shows the defaults); RNNT() requires it.
        self.validate(require_languages=False)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, vocab_sizes: Mapping[str, int], variant: str = "multisoftmax", **overrides):
        """A config from a named size preset (``"paper"`` or ``"small"``) plus overrides.

        Raises:
            ConfigError: unknown preset name or override key, bad value.
        """
        if name not in PRESETS:
            raise ConfigError(f"unknown RNN-T preset {name!r} (known: {', '.join(PRESETS)})")
        kw = dict(PRESETS[name])
        kw.update(overrides)
        return cls.from_dict({"vocab_sizes": dict(vocab_sizes), "variant": variant, **kw})

    @classmethod
    def from_dict(cls, d: Mapping) -> "RNNTConfig":
        """Build from a plain dict (e.g. YAML); an unknown key is a :class:`ConfigError` naming it."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"unknown RNN-T config key {unknown[0]!r} (known: {', '.join(sorted(names))})")
        return cls(**dict(d))

    def to_dict(self) -> dict:
        """Plain-dict form (YAML/checkpoint friendly); ``from_dict(to_dict())`` round-trips."""
        return dataclasses.asdict(self)

    # -- validation ---------------------------------------------------------------------------
    def validate(self, require_languages: bool = True) -> None:
        """Check every field; raises :class:`ConfigError` naming the key."""
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant: {self.variant!r} is not one of {', '.join(VARIANTS)}")
        if not isinstance(self.vocab_sizes, Mapping) or (require_languages and not self.vocab_sizes):
            raise ConfigError("vocab_sizes: needs at least one language (a mapping lang -> units incl. blank)")
        for lang, v in self.vocab_sizes.items():
            # the per-language layers live in nn.ModuleDicts keyed by the language: no '.', and not
            # a ModuleDict attribute (Tongan 'to' would be refused by torch at model build time)
            if not isinstance(lang, str) or not lang or "." in lang or lang in _MODULEDICT_ATTRS:
                raise ConfigError(f"vocab_sizes: bad language name {lang!r} (non-empty, no '.', not an "
                                  f"attribute name of torch.nn.ModuleDict such as 'to' or 'keys')")
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ConfigError(f"vocab_sizes.{lang}: expected an int >= 2 (blank + units), got {v!r}")
        for key in ("input_dim", "encoder_layers", "encoder_hidden", "pred_layers", "pred_hidden",
                    "embed_dim", "joint_dim"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{key}: expected a positive int, got {v!r}")
        for key in ("encoder_proj", "pred_proj", "lid_hidden"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{key}: expected an int >= 0, got {v!r}")
        if self.encoder_proj >= self.encoder_hidden:
            raise ConfigError(f"encoder_proj: must be < encoder_hidden ({self.encoder_hidden}) or 0")
        if self.pred_proj >= self.pred_hidden:
            raise ConfigError(f"pred_proj: must be < pred_hidden ({self.pred_hidden}) or 0")
        v = self.onehot_scale
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
            raise ConfigError(f"onehot_scale: expected a finite number > 0, got {v!r}")
        for key in ("lid_weight", "ctc_weight", "dropout"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{key}: expected a number >= 0, got {v!r}")
        if not isinstance(self.share_joint_proj, bool):
            raise ConfigError(f"share_joint_proj: expected true or false, got {self.share_joint_proj!r}")
        v = self.ctc_warmup_epochs
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"ctc_warmup_epochs: expected an int >= 0, got {v!r}")
        if v > 0 and not self.ctc_weight > 0:
            raise ConfigError("ctc_warmup_epochs: needs ctc_weight > 0 (the warm-up trains the CTC head)")
        if self.lid_ce_norm not in ("frame", "utterance"):
            raise ConfigError(f"lid_ce_norm: {self.lid_ce_norm!r} is not one of frame, utterance")
        if self.loss_impl not in ("auto", "torchaudio", "speechkit"):
            raise ConfigError(f"loss_impl: {self.loss_impl!r} is not one of auto, torchaudio, speechkit")
        if self.dropout >= 1:
            raise ConfigError(f"dropout: must be < 1, got {self.dropout}")
        if self.union_maps is not None:
            if self.variant not in ("vanilla", "onehot"):
                raise ConfigError(f"union_maps: only for the vanilla/onehot variants, not {self.variant}")
            for lang, v in self.vocab_sizes.items():
                m = self.union_maps.get(lang)
                if m is None or len(m) != v:
                    raise ConfigError(f"union_maps.{lang}: expected a list of {v} union ids")
                if m[0] != 0 or any((not isinstance(i, int)) or i < 1 for i in m[1:]):
                    raise ConfigError(f"union_maps.{lang}: blank must map to 0 and every unit to an id >= 1")
            extra = sorted(set(self.union_maps) - set(self.vocab_sizes))
            if extra:
                raise ConfigError(f"union_maps.{extra[0]}: language not in vocab_sizes")

    # -- derived ------------------------------------------------------------------------------
    @property
    def languages(self) -> list[str]:
        return list(self.vocab_sizes)

    @property
    def encoder_dim(self) -> int:
        return self.encoder_proj or self.encoder_hidden

    @property
    def pred_dim(self) -> int:
        return self.pred_proj or self.pred_hidden

    @property
    def shared_softmax(self) -> bool:
        return self.variant in ("vanilla", "onehot")

    @property
    def lsp(self) -> bool:
        """A prediction network per language (multisoftmax_lsp, multisoftmax_lsp_lid)."""
        return self.variant in LSP_VARIANTS

    @property
    def lid(self) -> bool:
        """An LID head on the encoder (multisoftmax_lid, multisoftmax_lsp_lid)."""
        return self.variant in LID_VARIANTS

    def union_map_lists(self) -> dict[str, list[int]]:
        """Per-language union ids (``union_maps`` or the default disjoint union)."""
        if self.union_maps is not None:
            return {k: list(self.union_maps[k]) for k in self.vocab_sizes}
        out, nxt = {}, 1
        for lang, v in self.vocab_sizes.items():
            out[lang] = [0] + list(range(nxt, nxt + v - 1))
            nxt += v - 1
        return out
