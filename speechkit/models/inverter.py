"""Codebook-to-spectrogram inverter (Code2Spec).

Tjandra, Sakti & Nakamura, Interspeech 2020 (arXiv 2005.11676), sec. 4, building on the multi-scale
Code2Spec inverter of Tjandra et al., Interspeech 2019 (arXiv 1905.11449), sec. 3: the code sequence of
an utterance (``T'`` codes, or their codebook vectors) is turned into a linear magnitude spectrogram
(``S`` frames, ``F`` bins), which Griffin-Lim (:mod:`speechkit.decode.griffin_lim`) turns into a waveform.

Architecture::

    codes (B, T') --embedding--> (B, T', De)     [or codebook vectors given directly]
    [ ; U[speaker] ]  optional target-voice embedding (num_speakers > 0)
    Linear(-> d), each frame repeated r = S / T' times, cut/extended to S frames, + sinusoidal positions
    multi-scale conv stack 1  (conv_layers x MultiScaleConv1d, parallel kernels conv_kernel_sizes)
    Transformer stack         (transformer_layers blocks; 3 in the paper)
    multi-scale conv stack 2
    LayerNorm + Linear(d -> F) + output activation (softplus: magnitudes are >= 0)

The paper (sec. 4, Fig. 4): the input is the codebook vectors ``[E[c_1], .., E[c_T]]``, each duplicated
``r = S / T`` times, with sinusoidal position encoding; the inverter "consists of two multiscale 1D
convolutions and three Transformer layers" (the text of sec. 4 does not state their order). Here
``conv_layers = 1`` gives two multi-scale blocks in all, one on each side of the Transformer stack; the
paper does not state the widths or kernel sizes.

Frame ``s`` of utterance ``b`` reads code ``min(s // r, T'_b - 1)``: the spectrogram may be up to ``r``
frames shorter or longer than ``T'_b * r`` (framing differences between the feature and STFT
front ends); anything else is an error.

Loss: the paper's eq. 14 is ``L_INV = ||X^R - X^R_hat||_2``, the L2 norm (not squared) of the whole
spectrogram difference. :func:`inverter_loss` is the recipe's own form, ``mean over valid frames s of
||S_s - S_hat_s||_2^2`` (the squared norm of each frame, averaged over the frames of the batch): for one
utterance it has the same minimiser as eq. 14 (a monotone function of it, up to the frame count), but its
gradient is not rescaled by the norm and a batch weights each frame equally.
"""
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.nn.conv import MultiScaleConv1d
from speechkit.nn.positional import SinusoidalPositionalEncoding
from speechkit.nn.transformer import TransformerStack, lengths_to_mask
from speechkit.utils.config import FieldError


@dataclass
class InverterConfig:
    """Inverter hyper-parameters (the ``model:`` section of an ``inverter`` training config).

    Defaults marked "paper" are the paper's (sec. 4); the rest are ours (the paper does not state its
    widths, kernels or activations). :meth:`small` is a CPU preset.

    Attributes:
        codebook_size: ``K``, number of distinct input codes (the VQ-VAE's ``codebook_size``).
        input_dim: ``De``, size of the code vectors (the VQ-VAE's ``codebook_dim``).
        output_dim: ``F``, linear-magnitude bins, ``n_fft // 2 + 1`` (257 for the toolkit's
            ``conf/spectrogram.yaml``, ``n_fft = 512``).
        upsample_ratio: ``r = S / T'``, spectrogram frames per code (the VQ-VAE stride times the
            ratio of the feature and spectrogram frame shifts; 4 for stride 4 and the toolkit's
            MFCC and spectrogram, which share the 10 ms hop and centred frames).
        num_speakers: rows of the target-voice embedding table (0 = one voice, no table).
        speaker_dim: size of a target-voice embedding.
        model_dim: ``d``, width of the conv and Transformer layers.
        conv_kernel_sizes: kernel sizes of the parallel branches of each multi-scale block.
        conv_layers: multi-scale blocks in each of the two conv stacks (the paper, sec. 4: two multi-scale
            1D convolutions in all, i.e. 1 per stack).
        transformer_layers: Transformer blocks between the conv stacks (paper: 3, sec. 4).
        attention_heads: self-attention heads (``model_dim`` divisible by it).
        ff_dim: inner size of the Transformer feed-forward layers.
        dropout: dropout everywhere.
        activation: non-linearity of the multi-scale blocks.
        output_activation: ``softplus`` (default), ``relu`` or ``none`` on the predicted magnitudes.
    """

    codebook_size: int = 256
    input_dim: int = 64
    output_dim: int = 257
    upsample_ratio: int = 4
    num_speakers: int = 0
    speaker_dim: int = 64
    model_dim: int = 256
    conv_kernel_sizes: list[int] = field(default_factory=lambda: [1, 3, 5, 7])
    conv_layers: int = 2
    transformer_layers: int = 3
    attention_heads: int = 4
    ff_dim: int = 1024
    dropout: float = 0.1
    activation: Literal["relu", "leaky_relu", "gelu", "tanh"] = "relu"
    output_activation: Literal["softplus", "relu", "none"] = "softplus"

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def small(cls, **overrides) -> "InverterConfig":
        """A CPU-sized preset; keyword arguments override fields."""
        base = dict(codebook_size=64, input_dim=32, output_dim=257, model_dim=64, conv_kernel_sizes=[1, 3, 5],
                    conv_layers=1, attention_heads=2, ff_dim=128, speaker_dim=16)
        base.update(overrides)
        return cls(**base)

    def validate(self) -> None:
        """Check every field.

        Raises:
            FieldError: (a ``ConfigError``) naming the key; loaded from YAML under ``model:`` the message
                reads ``conf/x.yaml: key 'model.codebook_size': must be a positive integer (got 0)``.
        """
        def bad(key: str, why: str):
            raise FieldError(key, f"{why} (got {getattr(self, key)!r})")

        for key in ("codebook_size", "input_dim", "output_dim", "upsample_ratio", "speaker_dim", "model_dim",
                    "attention_heads", "ff_dim"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                bad(key, "must be a positive integer")
        for key in ("num_speakers", "conv_layers", "transformer_layers"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 0:
                bad(key, "must be a non-negative integer")
        if not self.conv_kernel_sizes or not all(isinstance(k, int) and k >= 1 for k in self.conv_kernel_sizes):
            bad("conv_kernel_sizes", "must be a non-empty list of positive integers")
        if self.transformer_layers and self.model_dim % self.attention_heads:
            bad("model_dim", f"must be divisible by attention_heads={self.attention_heads}")
        if not 0.0 <= self.dropout < 1.0:
            bad("dropout", "must be in [0, 1)")
        if self.activation not in ("relu", "leaky_relu", "gelu", "tanh"):
            bad("activation", "must be one of relu, leaky_relu, gelu, tanh")
        if self.output_activation not in ("softplus", "relu", "none"):
            bad("output_activation", "must be one of softplus, relu, none")


def inverter_loss(pred: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The recipe's inverter loss, ``mean over valid frames s of ||S_s - S_hat_s||_2^2`` (squared error).

    The paper's eq. 14 (Tjandra et al. 2020, sec. 4) is ``||X^R - X^R_hat||_2``, the L2 norm, not squared,
    of the whole spectrogram difference; see the module docstring for how the two differ.

    Args:
        pred, target: ``(B, S, F)`` linear magnitudes (padded frames ignored).
        lengths: ``(B,)`` valid frames.

    Raises:
        ValueError: shapes differ.
    """
    if pred.shape != target.shape:
        raise ValueError(f"inverter_loss: prediction {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    mask = lengths_to_mask(lengths, pred.size(1))
    return (((pred - target) ** 2) * mask.unsqueeze(-1).to(pred.dtype)).sum() / mask.sum().clamp_min(1)


class CodebookInverter(nn.Module):
    """Codes (or codebook vectors) -> linear magnitude spectrogram; see the module docstring.

    Args:
        cfg: :class:`InverterConfig`.
    """

    def __init__(self, cfg: InverterConfig) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        d = cfg.model_dim
        self.code_embedding = nn.Embedding(cfg.codebook_size, cfg.input_dim)
        self.speaker_embedding = nn.Embedding(cfg.num_speakers, cfg.speaker_dim) if cfg.num_speakers else None
        self.input = nn.Linear(cfg.input_dim + (cfg.speaker_dim if cfg.num_speakers else 0), d)
        self.pos = SinusoidalPositionalEncoding(d, cfg.dropout)

        def conv_stack() -> nn.ModuleList:
            return nn.ModuleList(MultiScaleConv1d(d, cfg.conv_kernel_sizes, activation=cfg.activation,
                                                  dropout=cfg.dropout) for _ in range(cfg.conv_layers))

        self.conv1 = conv_stack()
        self.transformer = TransformerStack(cfg.transformer_layers, d, cfg.attention_heads, cfg.ff_dim, cfg.dropout)
        self.conv2 = conv_stack()
        self.norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, cfg.output_dim)

    @torch.no_grad()
    def init_from_codebook(self, codebook: torch.Tensor, freeze: bool = True) -> None:
        """Use a trained VQ-VAE codebook ``(K, De)`` as the code embedding (frozen by default).

        Raises:
            ValueError: shape differs from ``(codebook_size, input_dim)``.
        """
        if codebook.shape != self.code_embedding.weight.shape:
            raise ValueError(f"init_from_codebook: expected {tuple(self.code_embedding.weight.shape)}, "
                             f"got {tuple(codebook.shape)}")
        self.code_embedding.weight.copy_(codebook)
        self.code_embedding.weight.requires_grad_(not freeze)

    def output_lengths(self, code_lengths: torch.Tensor) -> torch.Tensor:
        """Default spectrogram lengths ``T' * r``."""
        return code_lengths * self.cfg.upsample_ratio

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor, speakers: torch.Tensor | None = None,
                target_lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Predict linear magnitudes.

        Args:
            inputs: ``(B, T')`` long codes, or ``(B, T', De)`` float codebook vectors.
            lengths: ``(B,)`` valid code frames ``T'_b`` (>= 1).
            speakers: ``(B,)`` target-voice indices (required when ``num_speakers > 0``).
            target_lengths: ``(B,)`` spectrogram frames ``S_b`` to produce (default ``T'_b * r``);
                must lie in ``[(T'_b - 1) r, (T'_b + 1) r]``.

        Returns:
            ``(B, max S_b, F)`` magnitudes (zero at padded frames) and ``(B,)`` lengths ``S_b``.

        Raises:
            ValueError: bad shapes, code or speaker index out of range, a target length incompatible with
                the code length.
        """
        cfg = self.cfg
        if inputs.dim() == 2:
            if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= cfg.codebook_size):
                raise ValueError(f"CodebookInverter: code index out of range [0, {cfg.codebook_size})")
            x = self.code_embedding(inputs)
        elif inputs.dim() == 3 and inputs.size(-1) == cfg.input_dim:
            x = inputs
        else:
            raise ValueError(f"CodebookInverter: expected codes (B, T') or vectors (B, T', {cfg.input_dim}), "
                             f"got {tuple(inputs.shape)}")
        B, T = x.shape[:2]
        if lengths.shape != (B,) or (B and (int(lengths.min()) < 1 or int(lengths.max()) > T)):
            raise ValueError(f"CodebookInverter: lengths must be (B,) = ({B},) with values in [1, {T}], "
                             f"got {lengths.tolist()}")
        if self.speaker_embedding is not None:
            if speakers is None or speakers.shape != (B,):
                raise ValueError(f"CodebookInverter: speakers (B,) required (model.num_speakers={cfg.num_speakers})")
            if int(speakers.min()) < 0 or int(speakers.max()) >= cfg.num_speakers:
                raise ValueError(f"CodebookInverter: speaker index out of range [0, {cfg.num_speakers})")
            x = torch.cat([x, self.speaker_embedding(speakers).unsqueeze(1).expand(-1, T, -1).to(x.dtype)], -1)
        r = cfg.upsample_ratio
        if target_lengths is None:
            target_lengths = lengths * r
        elif target_lengths.shape != (B,):
            raise ValueError(f"CodebookInverter: target_lengths must have shape ({B},)")
        else:
            bad = (target_lengths < (lengths - 1) * r) | (target_lengths > (lengths + 1) * r) | (target_lengths < 1)
            if bool(bad.any()):
                b = int(bad.nonzero()[0])
                raise ValueError(f"CodebookInverter: utterance at batch index {b}: {int(target_lengths[b])} "
                                 f"spectrogram frames do not match {int(lengths[b])} codes x upsample_ratio {r} "
                                 f"(allowed {max(1, (int(lengths[b]) - 1) * r)}..{(int(lengths[b]) + 1) * r})")

        x = self.input(x)
        S = int(target_lengths.max())
        # frame s reads code min(s // r, T'_b - 1): repeat r times, cut or extend with the last code
        index = torch.minimum(torch.arange(S, device=x.device).unsqueeze(0) // r, (lengths - 1).unsqueeze(1))
        x = torch.gather(x, 1, index.unsqueeze(-1).expand(B, S, x.size(-1)))
        x = self.pos(x)
        for block in self.conv1:
            x = block(x, target_lengths)
        x = self.transformer(x, target_lengths)
        for block in self.conv2:
            x = block(x, target_lengths)
        y = self.output(self.norm(x))
        if cfg.output_activation == "softplus":
            y = F.softplus(y)
        elif cfg.output_activation == "relu":
            y = F.relu(y)
        mask = lengths_to_mask(target_lengths, S).unsqueeze(-1).to(y.dtype)
        return y * mask, target_lengths
