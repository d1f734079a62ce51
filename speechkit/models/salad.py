"""SALAD: the Self-Attention Linguistic-Acoustic Decoder.

Pascual, Bonafonte & Serrà, "Self-Attention Linguistic-Acoustic Decoder", IberSPEECH 2018
(authors' code: santi-pdp/musa_tts, ``acoustic_satt``). A frame-level linguistic label vector
sequence (phone identity and context, positions, durations; ``D`` dims) is mapped to WORLD vocoder
features (``[mcep 40 | lf0 | vuv | bap]`` = 43 dims, min-max normalised to [0, 1]) by a
Transformer encoder, non-causally over the whole window::

    labels x_t (B, T, D)
    h_t = ReLU(W_e x_t + b_e)                          the embedding projection (d dims), sec. 2
    z_t = Dropout_p(s h_t + c_{t + offset})            sinusoidal positions, sec. 2; s = 1 or sqrt(d)
    N blocks:  z = z + Dropout_a(MHA(LN(z)))           self-attention, dropout on the weights too
               z = z + Dropout_f(W_2 Dropout_f(ReLU(W_1 LN(z))))   position-wise FFN (d_ff)
    y_t = W_o LN(z_t) + b_o                            linear output adapter (43 dims)

The paper's equations (sec. 2, unnumbered), with ``H`` the embedding size (``d`` here)::

    h_t = max(0, W x_t + b),   W in R^{H x L}, b in R^H
    c_{t,2i} = sin(t / 10000^(2i/H)),   c_{t,2i+1} = cos(t / 10000^(2i/H))

and "each time stamp c_t is summed to each embedding h_t". The paper says the blocks "are the same
as the ones proposed in the decoder of [17]" (Vaswani et al. 2017) with self-attention only; [17]
normalises after each residual sum, the paper does not state the placement, and the blocks here are
pre-norm (layer norm inside the residual branch, one final layer norm before the output adapter),
as in the authors' code (The Annotated Transformer's ``SublayerConnection``).

Embedding scale ``s`` (``scale_embedding``): the paper does not state one; the authors'
``PositionalEncoding`` adds the positions to the unscaled embedding (``s = 1``, the default here);
[17] (Vaswani et al. 2017, sec. 3.4) multiplies the embedding by ``sqrt(d)`` (``scale_embedding:
true``). It matters: with ``s = 1`` the ReLU embedding of a label vector has a norm of about 1.6 at
initialisation (d = 128, 247 z-normalised inputs) against ``sqrt(d / 2) = 8`` for the position code,
and the embeddings of consecutive frames of a phone differ by about 0.015 (median), so the input of
the first block is mostly position code (a stream offset in training, the utterance position in
synthesis). On the ``mini`` corpus such a model settles at the training mean (flat spectra within
each phone, every frame voiced) for the first ~100 updates and trains slowly after that.

Stateful training (sec. 3.3): a training window continues the previous window of the same stream,
so its first frame is at position ``offset = k * window`` of the stream; at inference an utterance
starts at position 0.

This module also holds what both acoustic models share: :class:`LabelEmbedding` (sec. 2), the
min-max output normalisation buffers (:class:`OutputNormalizer`) and :func:`count_parameters`.

Parameter counts (``D = 364``, the paper's 362 + 2 inputs; heads do not change the count)::

    small: d = 128, d_ff = 1024, N = 3  ->  1,042,091  (Table 2: 1.04 M)
    big:   d = 512, d_ff = 2048, N = 3  ->  9,667,115  (Table 2: 9.66 M)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.nn.positional import sinusoidal_table
from speechkit.nn.transformer import MultiHeadSelfAttention, lengths_to_mask
from speechkit.utils.config import FieldError

__all__ = ["SaladConfig", "Salad", "SaladBlock", "LabelEmbedding", "OutputNormalizer", "count_parameters",
           "format_parameters"]


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``model`` (buffers such as normalisation stats excluded)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def format_parameters(n: int) -> str:
    """``1042091`` -> ``'1.04 M'`` (the paper's Table 2 style)."""
    return f"{n / 1e6:.2f} M"


def _check_dropout(cfg: object, *names: str) -> None:
    for key in names:
        v = getattr(cfg, key)
        if not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
            raise FieldError(key, f"must be in [0, 1) (got {v!r})")


def _check_positive(cfg: object, *names: str, allow_zero: tuple[str, ...] = ()) -> None:
    for key in names:
        v = getattr(cfg, key)
        low = 0 if key in allow_zero else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise FieldError(key, f"must be an integer >= {low} (got {v!r})")


@dataclass
class SaladConfig:
    """SALAD hyper-parameters (the ``model:`` section of a ``salad`` training config).

    Small / big presets follow Table 1 of the paper (embedding 128 / 512, d_ff 1024 / 2048). The
    paper names N blocks and h heads (sec. 2, Fig. 1) but does not state either: N = 3 blocks gives
    Table 2's parameter counts (1.04 M / 9.66 M for 364 inputs; the authors' code's default N = 6
    would give 2.03 M / 19.12 M), heads = 8 as in the authors' code (heads do not change the count).

    Attributes:
        input_dim: ``D``, size of a frame's linguistic label vector; 0 = read it from the first
            matrix of data.train_dir/labels.scp when the config is loaded.
        output_dim: acoustic features per frame (43: mcep 40 | lf0 | vuv | bap 1 at 16 kHz).
        embed_dim: ``d`` (the paper's ``H``), size of the ReLU embedding projection and of every
            block (sec. 2).
        num_blocks: ``N``, Transformer-encoder blocks.
        num_heads: self-attention heads (embed_dim must be divisible by it).
        ff_dim: ``d_ff``, inner size of the position-wise feed-forward layers.
        attention_dropout: dropout on the attention weights and on the attention branch's output
            (paper: 0.1).
        ff_dropout: dropout inside the feed-forward layer (after the ReLU) and on its branch's
            output (paper: 0.5).
        position_dropout: dropout after adding the positions (paper: 0.5).
        output_activation: none (the linear adapter of the paper) or sigmoid (bounds the outputs to
            (0, 1) like the normalised targets; the authors' code does this).
        scale_embedding: multiply the embedding by ``sqrt(embed_dim)`` before the positions are
            added, as [17] sec. 3.4 (default false: unscaled, as the authors' code; module doc).
    """

    input_dim: int = 0
    output_dim: int = 43
    embed_dim: int = 128
    num_blocks: int = 3
    num_heads: int = 8
    ff_dim: int = 1024
    attention_dropout: float = 0.1
    ff_dropout: float = 0.5
    position_dropout: float = 0.5
    output_activation: Literal["none", "sigmoid"] = "none"
    scale_embedding: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field.

        Raises:
            FieldError: naming the key (``model.<key>`` when loaded from a YAML config).
        """
        _check_positive(self, "input_dim", "output_dim", "embed_dim", "num_blocks", "num_heads", "ff_dim",
                        allow_zero=("input_dim", "num_blocks"))
        _check_dropout(self, "attention_dropout", "ff_dropout", "position_dropout")
        if self.embed_dim % self.num_heads:
            raise FieldError("embed_dim", f"must be divisible by num_heads={self.num_heads} (got {self.embed_dim})")
        if not isinstance(self.scale_embedding, bool):
            raise FieldError("scale_embedding", f"must be true or false (got {self.scale_embedding!r})")
        if self.output_activation not in ("none", "sigmoid"):
            raise FieldError("output_activation", f"must be none or sigmoid (got {self.output_activation!r})")


class LabelEmbedding(nn.Module):
    """The embedding of sec. 2, ``h_t = max(0, W x_t + b)``: ``(B, T, D) -> (B, T, d)``."""

    def __init__(self, input_dim: int, embed_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(input_dim, embed_dim)

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        return F.relu(self.proj(labels))


class OutputNormalizer(nn.Module):
    """Per-dimension min-max normalisation of the acoustic targets to [0, 1] (buffers, no parameters).

    ``y_norm = (y - min) / range`` with ``range = max - min`` (1 where a dimension is constant on
    the training data). The statistics are buffers, so every checkpoint carries them and synthesis
    can denormalise with the model alone. Identity until :meth:`set_stats` is called.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("minimum", torch.zeros(dim))
        self.register_buffer("range", torch.ones(dim))

    @torch.no_grad()
    def set_stats(self, minimum: torch.Tensor, maximum: torch.Tensor) -> None:
        """Set ``(dim,)`` minima and maxima (e.g. over all training frames).

        Raises:
            ValueError: wrong shape, non-finite values or ``maximum < minimum``.
        """
        minimum = torch.as_tensor(minimum, dtype=torch.float32).flatten()
        maximum = torch.as_tensor(maximum, dtype=torch.float32).flatten()
        if minimum.shape != self.minimum.shape or maximum.shape != self.minimum.shape:
            raise ValueError(f"OutputNormalizer: expected ({self.minimum.numel()},) stats, got "
                             f"{tuple(minimum.shape)} and {tuple(maximum.shape)}")
        if not (torch.isfinite(minimum).all() and torch.isfinite(maximum).all()) or bool((maximum < minimum).any()):
            raise ValueError("OutputNormalizer: stats must be finite with maximum >= minimum")
        rng = maximum - minimum
        self.minimum.copy_(minimum)
        self.range.copy_(torch.where(rng > 1e-8, rng, torch.ones_like(rng)))

    def normalize(self, y: torch.Tensor) -> torch.Tensor:
        """``(..., dim)`` features -> [0, 1]-scaled features (training data)."""
        return (y - self.minimum) / self.range

    def denormalize(self, y: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`normalize`."""
        return y * self.range + self.minimum


class SaladBlock(nn.Module):
    """One pre-norm Transformer-encoder block with separate attention and feed-forward dropouts.

    ``z = z + Dropout_a(MHA(LN(z)))``; ``z = z + Dropout_f(W_2 Dropout_f(ReLU(W_1 LN(z))))``.
    (:class:`speechkit.nn.transformer.TransformerBlock` has one dropout for both branches; SALAD
    needs 0.1 in attention and 0.5 in the FFN.)

    Args:
        dim: model size ``d``.
        num_heads: attention heads.
        ff_dim: inner size ``d_ff`` of the feed-forward layer.
        attention_dropout: on the attention weights and the attention branch output.
        ff_dropout: inside the feed-forward layer and on its branch output.
    """

    def __init__(self, dim: int, num_heads: int, ff_dim: int, attention_dropout: float = 0.1,
                 ff_dropout: float = 0.5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, num_heads, attention_dropout)
        self.attn_dropout = nn.Dropout(attention_dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.ReLU(), nn.Dropout(ff_dropout), nn.Linear(ff_dim, dim))
        self.ff_dropout = nn.Dropout(ff_dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(B, T, d)``; ``mask``: ``(B, T)`` bool, True at valid frames -> ``(B, T, d)``."""
        x = x + self.attn_dropout(self.attn(self.norm1(x), mask))
        return x + self.ff_dropout(self.ff(self.norm2(x)))


class Salad(nn.Module):
    """The SALAD acoustic model; see the module docstring.

    Args:
        cfg: :class:`SaladConfig` with ``input_dim >= 1``.

    Raises:
        ValueError: ``cfg.input_dim`` is 0 (unresolved).
    """

    def __init__(self, cfg: SaladConfig) -> None:
        super().__init__()
        cfg.validate()
        if cfg.input_dim < 1:
            raise ValueError("Salad: model.input_dim is 0; set it to the label dimension (or give data.train_dir "
                             "so that it is read from labels.scp)")
        self.cfg = cfg
        d = cfg.embed_dim
        self.embedding = LabelEmbedding(cfg.input_dim, d)
        self.position_dropout = nn.Dropout(cfg.position_dropout)
        self.blocks = nn.ModuleList(SaladBlock(d, cfg.num_heads, cfg.ff_dim, cfg.attention_dropout, cfg.ff_dropout)
                                    for _ in range(cfg.num_blocks))
        self.norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, cfg.output_dim)
        self.normalizer = OutputNormalizer(cfg.output_dim)

    def forward(self, labels: torch.Tensor, offset: int = 0, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Predict normalised acoustic features.

        Args:
            labels: ``(B, T, D)`` frame-level label vectors.
            offset: position (frame index in its stream) of the first frame: ``k * window`` for the
                k-th window of a training stream, 0 for a whole utterance.
            lengths: ``(B,)`` valid frames of a padded batch (padded keys are masked out); None = all valid.

        Returns:
            ``(B, T, output_dim)`` normalised features (in [0, 1] on the training targets' scale).

        Raises:
            ValueError: ``labels`` not ``(B, T, input_dim)`` or a negative offset.
        """
        if labels.dim() != 3 or labels.size(-1) != self.cfg.input_dim:
            raise ValueError(f"Salad: expected labels (B, T, {self.cfg.input_dim}), got {tuple(labels.shape)}")
        if offset < 0:
            raise ValueError(f"Salad: offset must be >= 0, got {offset}")
        h = self.embedding(labels)
        if self.cfg.scale_embedding:
            h = h * self.cfg.embed_dim ** 0.5
        pe = sinusoidal_table(labels.size(1), self.cfg.embed_dim, offset=int(offset)).to(h.device, h.dtype)
        z = self.position_dropout(h + pe)
        mask = None if lengths is None else lengths_to_mask(lengths, labels.size(1))
        for block in self.blocks:
            z = block(z, mask)
        y = self.output(self.norm(z))
        return torch.sigmoid(y) if self.cfg.output_activation == "sigmoid" else y

    @torch.no_grad()
    def infer(self, labels: torch.Tensor) -> torch.Tensor:
        """Whole utterances from position 0: ``(B, T, D) -> (B, T, output_dim)`` normalised features."""
        return self(labels, offset=0)
