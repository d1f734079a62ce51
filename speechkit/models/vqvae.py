"""Transformer VQ-VAE for unsupervised unit discovery, and the convolutional VQ-VAE baseline.

Reproduces Tjandra, Sakti & Nakamura, "Transformer VQ-VAE for Unsupervised Unit Discovery and Speech
Synthesis: ZeroSpeech 2020 Challenge", Interspeech 2020 (arXiv 2005.11676); the baseline encoder is the
convolutional one of Tjandra, Sisman, Zhang, Sakti, Li & Nakamura, "VQVAE Unsupervised Unit Discovery and
Multi-scale Code2Spec Inverter for Zerospeech Challenge 2019", Interspeech 2019 (arXiv 1905.11449).

Architecture (``x (B, T, D_in)`` -> ``x_hat (B, T, D_in)``)::

    encoder   transformer: Linear(D_in -> d) + sinusoidal positions, then
                           [Transformer blocks] (strided Conv1d, stride 2) [Transformer blocks] ... ,
                           LayerNorm + Linear(d -> De)                 (2020 paper, sec. 3, Fig. 3a)
              conv:        Conv1d(D_in -> C), then per factor 2 of the stride a strided Conv1d and
                           residual conv blocks, LayerNorm + Linear(C -> De)   (2019 baseline)
    quantizer z_q = nearest codebook row of z_e, EMA codebook, commitment loss (eq. 4-7),
              see :mod:`speechkit.nn.vector_quantizer`
    jitter    each z_q frame replaced by a neighbour with probability p (eq. 11-13), training only
    decoder   [z_q ; V[speaker]] -> Linear(De + Dv -> d_dec) -> conv blocks, then per factor 2:
              repeat-upsample x2 + conv blocks; LayerNorm + Linear(d_dec -> D_in); cropped to T
              (Fig. 3b: "1D convolution, followed by up-sampling"; Fig. 2: conditioned on v_s)

Encoder depth: the caption of the paper's Fig. 3a reads "Encoder consisted of 2x Transformer layer and 1D
convolution with stride to downsample input sequence length" (its widths, heads and the number of such
blocks are not stated). ``encoder_blocks_per_stage`` is the number of Transformer blocks before each strided
convolution and after the last: its default 2 is Fig. 3a's pair; the CPU configs of egs/zerospeech2019 use 1.

Length rule: the total ``stride`` is a power of two, realised by ``log2(stride)`` stride-2 convolutions,
each mapping ``L`` frames to ``ceil(L / 2)``; hence ``T' = ceil(T / stride)`` code frames for ``T`` input
frames. The decoder retraces the same lengths upwards and returns exactly ``T`` frames.
An utterance with fewer frames than ``stride`` is an error.

Losses (all averaged over valid, unpadded frames of the batch; padded frames never touch the
codebook or any loss):

    recon       mean_t ||x_t - x_hat_t||^2                             (eq. 7, first term, see below)
    commitment  gamma * mean_t ||z_e,t - sg(e_{k_t})||^2               (eq. 7, gamma = commitment_cost)
    smoothing   lambda * sum_t ||z_e,t - z_e,t+1||^2 / N                         (eq. 9-10)
    total       recon + commitment + smoothing

The paper's eq. 7 is ``L_VQ = sum_{t=1}^{T} -log p_phi(x_t | y_t, s) + gamma ||z_t - sg(e_{c_t})||_2^2``
and does not say which distribution ``p_phi`` is. The recipe's reconstruction term is the squared error
(twice the negative log-likelihood of a unit-variance Gaussian, the constant dropped), averaged over the
valid input frames; the commitment term is averaged over the valid code frames (``T / stride`` of them),
where eq. 7 writes both terms under one sum over ``t``.

Smoothing: the paper prints eq. 9 as ``L_reg = sum_{i=1}^{T-1} ||z_t - z_{t+1}||_2^2`` (the summation
index ``i`` with a summand in ``t``: a typo); this module sums over ``t``, the adjacent valid code-frame
pairs of each utterance, weighted by lambda (eq. 10; the paper's Table 3 has lambda in {1e-2, 5e-3,
1e-3}). The sum over the batch is divided by ``N``, the number of valid *input* frames of the batch --
the normaliser of the reconstruction term, which is itself the per-frame sum divided by ``N`` -- so the
ratio of the two terms, and hence lambda, is eq. 10's when eq. 7's first term is read as the squared
error (read as a unit-variance Gaussian's negative log-likelihood, half the squared error, the paper's
lambda would be 2 lambda here). (Earlier versions took the MEAN over code-frame pairs, i.e. divided by
about ``N / stride``: their lambda = 1 equals lambda = ``stride`` = 4 here.)

The codebook receives no gradient (EMA updates); ``||.||^2`` is the squared L2 norm of one frame.
"""
import logging
import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from speechkit.nn.conv import ConvBlock, conv_output_lengths, repeat_upsample
from speechkit.nn.jitter import TemporalJitter
from speechkit.nn.positional import SinusoidalPositionalEncoding
from speechkit.nn.transformer import TransformerStack, lengths_to_mask
from speechkit.nn.vector_quantizer import EMAVectorQuantizer
from speechkit.utils.config import FieldError

log = logging.getLogger(__name__)


@dataclass
class VQVAEConfig:
    """VQ-VAE hyper-parameters (the ``model:`` section of a ``vqvae`` training config).

    Symbols follow Tjandra et al. 2020. Where the paper gives a value it is the default (marked "paper",
    with its section or table); the other defaults are ours, sized for a GPU run (the paper does not state
    its widths); :meth:`small` is a CPU preset.

    Attributes:
        input_dim: ``D_in``, feature dimension of the input and of the reconstruction
            (39 = 13 MFCC + delta + delta-delta, the papers' librosa MFCC setup).
        num_speakers: ``L``, rows of the speaker embedding table ``V`` (training speakers);
            0 = no speaker conditioning.
        speaker_dim: ``Dv``, speaker embedding size.
        encoder_type: ``transformer`` (2020 paper) or ``conv`` (2019 baseline).
        stride: total time reduction ``T / T'``; a power of two: 1, 2, 4, 8, ... (paper: 4, Tables 1-3).
        encoder_dim: ``d``, model size of the encoder (Transformer width or conv channels).
        encoder_blocks_per_stage: Transformer blocks before, between and after the strided convolutions
            (``(log2(stride) + 1) * encoder_blocks_per_stage`` blocks in all; 2 = the "2x Transformer
            layer" of the paper's Fig. 3a).
        attention_heads: heads of every self-attention layer (``encoder_dim`` must be divisible by it).
        ff_dim: inner size of the Transformer feed-forward layers (two linear layers with a ReLU).
        encoder_kernel_size: kernel of the strided convolutions (and of every conv of the conv encoder).
        conv_layers_per_stage: conv encoder only: residual conv blocks after the input conv and
            after each strided conv.
        dropout: dropout in the encoder and decoder.
        codebook_size: ``K``, number of codebook vectors (> 0).
        codebook_dim: ``De``, size of ``z_e``, ``z_q`` and codebook vectors.
        commitment_cost: ``gamma`` of the commitment loss, eq. 7 (paper: 0.25, sec. 3.1).
        ema_decay: EMA decay of the codebook statistics (van den Oord 2017: 0.99; the paper, sec. 3.1,
            uses an EMA codebook [Kaiser et al. 2018] without stating the decay).
        ema_epsilon: Laplace smoothing constant of the EMA cluster sizes.
        restart_unused_steps: restart a code unused for this many training steps (0 = off).
        decoder_dim: ``d_dec``, channels of the decoder convolutions.
        decoder_kernel_size: kernel of the decoder convolutions.
        decoder_layers_per_stage: residual conv blocks at the code rate and after each x2 upsampling.
        activation: non-linearity of the conv blocks (``relu``, ``leaky_relu``, ``gelu``, ``tanh``).
        smoothing_weight: ``lambda`` of the temporal smoothing loss, eq. 9-10, in the paper's scale
            (paper, Table 3: 1e-2, 5e-3, 1e-3; the submitted system 5e-3, the best 1e-3, each with jitter
            p = 0.05; 0 = off); see the module docstring for the normalisation.
        jitter_prob: ``p`` of the time jitter, eq. 11-13: probability of EACH neighbour, in [0, 0.5]
            (paper, Table 3: 0.05, 0.075; the submitted and the best systems 0.05; 0 = off).
    """

    input_dim: int = 39
    num_speakers: int = 1
    speaker_dim: int = 64
    encoder_type: Literal["transformer", "conv"] = "transformer"
    stride: int = 4
    encoder_dim: int = 256
    encoder_blocks_per_stage: int = 2
    attention_heads: int = 4
    ff_dim: int = 1024
    encoder_kernel_size: int = 3
    conv_layers_per_stage: int = 2
    dropout: float = 0.1
    codebook_size: int = 256
    codebook_dim: int = 64
    commitment_cost: float = 0.25
    ema_decay: float = 0.99
    ema_epsilon: float = 1e-5
    restart_unused_steps: int = 0
    decoder_dim: int = 256
    decoder_kernel_size: int = 5
    decoder_layers_per_stage: int = 2
    activation: Literal["relu", "leaky_relu", "gelu", "tanh"] = "relu"
    smoothing_weight: float = 0.0
    jitter_prob: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def small(cls, **overrides) -> "VQVAEConfig":
        """A CPU-sized preset (about 0.2 M parameters); keyword arguments override fields."""
        base = dict(speaker_dim=16, encoder_dim=64, encoder_blocks_per_stage=1, attention_heads=2, ff_dim=128,
                    codebook_size=64, codebook_dim=32, decoder_dim=64, decoder_layers_per_stage=1,
                    conv_layers_per_stage=1)
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

        for key in ("input_dim", "speaker_dim", "encoder_dim", "attention_heads", "ff_dim",
                    "encoder_kernel_size", "codebook_size", "codebook_dim", "decoder_dim", "decoder_kernel_size"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                bad(key, "must be a positive integer")
        for key in ("num_speakers", "encoder_blocks_per_stage", "conv_layers_per_stage",
                    "decoder_layers_per_stage", "restart_unused_steps"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 0:
                bad(key, "must be a non-negative integer")
        if not isinstance(self.stride, int) or self.stride < 1 or self.stride & (self.stride - 1):
            bad("stride", "must be a power of two (1, 2, 4, 8, ...)")
        if self.encoder_type not in ("transformer", "conv"):
            bad("encoder_type", "must be 'transformer' or 'conv'")
        if self.activation not in ("relu", "leaky_relu", "gelu", "tanh"):
            bad("activation", "must be one of relu, leaky_relu, gelu, tanh")
        if self.encoder_type == "transformer" and self.encoder_dim % self.attention_heads:
            bad("encoder_dim", f"must be divisible by attention_heads={self.attention_heads}")
        if not 0.0 <= self.dropout < 1.0:
            bad("dropout", "must be in [0, 1)")
        if not 0.0 <= self.ema_decay < 1.0:
            bad("ema_decay", "must be in [0, 1)")
        if not self.ema_epsilon > 0:
            bad("ema_epsilon", "must be > 0")
        for key in ("commitment_cost", "smoothing_weight"):
            if not getattr(self, key) >= 0:
                bad(key, "must be >= 0")
        if not 0.0 <= self.jitter_prob <= 0.5:
            bad("jitter_prob", "must be in [0, 0.5] (probability of each neighbour, eq. 11)")

    @property
    def num_downsamplings(self) -> int:
        """``log2(stride)``: number of stride-2 convolutions."""
        return int(math.log2(self.stride))


@dataclass
class VQVAEOutput:
    """Result of :meth:`VQVAE.forward`.

    Attributes:
        recon: ``(B, T, D_in)`` reconstruction (zero at padded frames).
        z_e: ``(B, T', De)`` encoder output (zero at padded frames).
        z_q: ``(B, T', De)`` quantized frames fed to the decoder (before jitter), straight-through gradient.
        codes: ``(B, T')`` long code indices (0 at padded frames).
        mask: ``(B, T')`` bool, True at valid code frames.
        out_lengths: ``(B,)`` valid code frames per utterance, ``ceil(lengths / stride)``.
        losses: ``recon``, ``commitment``, ``smoothing`` (weighted terms) and ``total`` (scalars).
        stats: ``perplexity`` and ``codes_used`` of the batch's codes (detached scalars).
    """

    recon: torch.Tensor
    z_e: torch.Tensor
    z_q: torch.Tensor
    codes: torch.Tensor
    mask: torch.Tensor
    out_lengths: torch.Tensor
    losses: dict[str, torch.Tensor] = field(default_factory=dict)
    stats: dict[str, torch.Tensor] = field(default_factory=dict)


class TransformerEncoder(nn.Module):
    """The Transformer VQ-VAE encoder (2020 paper, sec. 3, Fig. 3a): Transformer blocks interleaved with
    stride-2 convolutions. ``(B, T, D_in)``, ``lengths`` -> ``(B, ceil(T / stride), De)``, out lengths."""

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        d = cfg.encoder_dim
        self.input = nn.Linear(cfg.input_dim, d)
        self.pos = SinusoidalPositionalEncoding(d, cfg.dropout)
        self.stages = nn.ModuleList(
            TransformerStack(cfg.encoder_blocks_per_stage, d, cfg.attention_heads, cfg.ff_dim, cfg.dropout)
            for _ in range(cfg.num_downsamplings + 1)
        )
        self.downs = nn.ModuleList(
            ConvBlock(d, d, cfg.encoder_kernel_size, stride=2, activation=cfg.activation, norm=False)
            for _ in range(cfg.num_downsamplings)
        )
        self.norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, cfg.codebook_dim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.pos(self.input(x))
        x = self.stages[0](x, lengths)
        for down, stage in zip(self.downs, self.stages[1:]):
            x, lengths = down(x, lengths)
            x = stage(x, lengths)
        z = self.output(self.norm(x))
        return z * lengths_to_mask(lengths, z.size(1)).unsqueeze(-1).to(z.dtype), lengths


class ConvEncoder(nn.Module):
    """The convolutional VQ-VAE encoder of the 2019 system (baseline): an input convolution, then per
    factor 2 of the stride a stride-2 convolution, each followed by residual conv blocks.
    ``(B, T, D_in)``, ``lengths`` -> ``(B, ceil(T / stride), De)``, out lengths."""

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        c, k, act = cfg.encoder_dim, cfg.encoder_kernel_size, cfg.activation

        def stage() -> nn.ModuleList:
            return nn.ModuleList(ConvBlock(c, c, k, activation=act, dropout=cfg.dropout)
                                 for _ in range(cfg.conv_layers_per_stage))

        self.input = ConvBlock(cfg.input_dim, c, k, activation=act, norm=False)
        self.stages = nn.ModuleList(stage() for _ in range(cfg.num_downsamplings + 1))
        self.downs = nn.ModuleList(ConvBlock(c, c, k, stride=2, activation=act)
                                   for _ in range(cfg.num_downsamplings))
        self.norm = nn.LayerNorm(c)
        self.output = nn.Linear(c, cfg.codebook_dim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, lengths = self.input(x, lengths)
        for i, stage in enumerate(self.stages):
            if i:
                x, lengths = self.downs[i - 1](x, lengths)
            for block in stage:
                x, lengths = block(x, lengths)
        z = self.output(self.norm(x))
        return z * lengths_to_mask(lengths, z.size(1)).unsqueeze(-1).to(z.dtype), lengths


class ConvDecoder(nn.Module):
    """Speaker-conditioned decoder: ``[z_q ; V[speaker]]`` -> conv blocks, x2 repeat-upsampling stages
    -> ``(B, T, D_in)``, exactly the encoder's input length (see :class:`VQVAE`)."""

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        d, k, act = cfg.decoder_dim, cfg.decoder_kernel_size, cfg.activation
        self.speaker_embedding = nn.Embedding(cfg.num_speakers, cfg.speaker_dim) if cfg.num_speakers else None
        in_dim = cfg.codebook_dim + (cfg.speaker_dim if cfg.num_speakers else 0)
        self.input = nn.Linear(in_dim, d)
        self.stages = nn.ModuleList(
            nn.ModuleList(ConvBlock(d, d, k, activation=act, dropout=cfg.dropout)
                          for _ in range(cfg.decoder_layers_per_stage))
            for _ in range(cfg.num_downsamplings + 1)
        )
        self.norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, cfg.input_dim)

    def forward(self, z_q: torch.Tensor, stage_lengths: list[torch.Tensor],
                speakers: torch.Tensor | None) -> torch.Tensor:
        """``z_q (B, T', De)``; ``stage_lengths``: frame lengths from the input rate down to the code rate
        (``[T, ceil(T/2), ..., T']``, each ``(B,)``); ``speakers (B,)`` -> ``(B, T, D_in)``."""
        x = z_q
        if self.speaker_embedding is not None:
            spk = self.speaker_embedding(speakers).unsqueeze(1).expand(-1, x.size(1), -1)
            x = torch.cat([x, spk.to(x.dtype)], dim=-1)
        x = self.input(x)
        for i, stage in enumerate(self.stages):
            lengths = stage_lengths[len(stage_lengths) - 1 - i]
            if i:
                x, _ = repeat_upsample(x, 2)
                x = x[:, : int(lengths.max())]
            for block in stage:
                x, _ = block(x, lengths)
        x = self.output(self.norm(x))
        return x * lengths_to_mask(stage_lengths[0], x.size(1)).unsqueeze(-1).to(x.dtype)


def masked_frame_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``mean over valid t of ||pred_t - target_t||^2`` (squared L2 norm per frame); ``(B, T, D)``, ``mask (B, T)``."""
    m = mask.unsqueeze(-1).to(pred.dtype)
    return (((pred - target) ** 2) * m).sum() / mask.sum().clamp_min(1)


def temporal_smoothness(z: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``sum over the batch and its adjacent valid pairs of ||z_t - z_{t+1}||^2`` (Tjandra 2020, eq. 9;
    unweighted, unnormalised).

    ``z (B, T, D)``, ``lengths (B,)``; pairs ``(t, t+1)`` with ``t + 1 < lengths[b]``; 0 if there are none.
    :class:`VQVAE` divides it by the batch's valid input frames (see the module docstring).
    """
    if z.size(1) < 2:
        return z.new_zeros(())
    diff = ((z[:, 1:] - z[:, :-1]) ** 2).sum(-1)  # (B, T-1)
    pair_mask = lengths_to_mask(lengths - 1, z.size(1) - 1)
    return (diff * pair_mask.to(diff.dtype)).sum()


class VQVAE(nn.Module):
    """VQ-VAE with a Transformer (2020) or convolutional (2019 baseline) encoder; see the module docstring.

    Args:
        cfg: :class:`VQVAEConfig`.
    """

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.encoder = TransformerEncoder(cfg) if cfg.encoder_type == "transformer" else ConvEncoder(cfg)
        self.quantizer = EMAVectorQuantizer(cfg.codebook_size, cfg.codebook_dim, cfg.commitment_cost,
                                            cfg.ema_decay, cfg.ema_epsilon, cfg.restart_unused_steps)
        self.jitter = TemporalJitter(cfg.jitter_prob)
        self.decoder = ConvDecoder(cfg)
        # EMA codebook updates belong to the optimizer step: a skipped step (non-finite gradient)
        # never updates the codebook (see speechkit.nn.vector_quantizer, "Deferred updates").
        self.quantizer.defer_updates(owner=self)

    def _gradients_cleared(self) -> bool:
        """True when no parameter holds a non-zero gradient (``zero_grad`` ran since the last backward)."""
        return not any(p.grad is not None and bool(p.grad.ne(0).any()) for p in self.parameters())

    def _drop_unapplied_codebook_update(self) -> None:
        """A training forward that starts a new accumulation group (gradients cleared) while EMA
        statistics are still pending: the previous step was skipped, so its update is dropped."""
        vq = self.quantizer
        if vq.has_pending_update and self._gradients_cleared():
            if vq.pending_saw_backward:
                log.warning("the previous training step was skipped (no optimizer step after its backward): "
                            "its EMA codebook update is discarded")
            vq.discard_update()

    @property
    def stride(self) -> int:
        """Total time reduction ``T / T'``."""
        return self.cfg.stride

    def code_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Code frames for ``lengths`` input frames: ``ceil(lengths / stride)``."""
        return conv_output_lengths(lengths, self.cfg.stride)

    def _stage_lengths(self, lengths: torch.Tensor) -> list[torch.Tensor]:
        out = [lengths]
        for _ in range(self.cfg.num_downsamplings):
            out.append(conv_output_lengths(out[-1], 2))
        return out

    def _check_input(self, feats: torch.Tensor, lengths: torch.Tensor) -> None:
        if feats.dim() != 3 or feats.size(-1) != self.cfg.input_dim:
            raise ValueError(f"VQVAE: expected feats of shape (B, T, {self.cfg.input_dim}), got {tuple(feats.shape)}")
        if lengths.dim() != 1 or lengths.size(0) != feats.size(0):
            raise ValueError(f"VQVAE: lengths must have shape ({feats.size(0)},), got {tuple(lengths.shape)}")
        if lengths.numel() and int(lengths.max()) > feats.size(1):
            raise ValueError(f"VQVAE: a length ({int(lengths.max())}) exceeds the padded length {feats.size(1)}")
        short = (lengths < self.cfg.stride).nonzero().flatten()
        if short.numel():
            b = int(short[0])
            raise ValueError(f"utterance at batch index {b} has {int(lengths[b])} frames, shorter than the "
                             f"total stride {self.cfg.stride} (model.stride)")

    def _check_speakers(self, speakers: torch.Tensor | None, batch: int) -> None:
        if not self.cfg.num_speakers:
            return
        if speakers is None:
            raise ValueError(f"VQVAE: speakers (B,) are required (model.num_speakers={self.cfg.num_speakers})")
        if speakers.shape != (batch,):
            raise ValueError(f"VQVAE: speakers must have shape ({batch},), got {tuple(speakers.shape)}")
        if speakers.numel() and (int(speakers.min()) < 0 or int(speakers.max()) >= self.cfg.num_speakers):
            raise ValueError(f"VQVAE: speaker index out of range [0, {self.cfg.num_speakers}): "
                             f"{speakers.tolist()}")

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor,
                speakers: torch.Tensor | None = None) -> VQVAEOutput:
        """Encode, quantize, decode, and compute the losses.

        In training mode the EMA codebook statistics of the batch are applied by the next
        ``optimizer.step()`` (of an optimizer holding this model's parameters); they are dropped
        if the model's gradients are cleared without a step (a step skipped for a non-finite
        gradient norm), so a NaN batch never reaches the codebook.

        Args:
            feats: ``(B, T, D_in)`` float, padded.
            lengths: ``(B,)`` long, valid frames per utterance (each >= ``stride``).
            speakers: ``(B,)`` long speaker indices into ``V`` (required when ``num_speakers > 0``).

        Raises:
            ValueError: wrong shapes, an utterance shorter than the stride (names its length and the
                stride), or a speaker index out of range.
        """
        self._check_input(feats, lengths)
        self._check_speakers(speakers, feats.size(0))
        stage_lengths = self._stage_lengths(lengths)
        if self.training:
            self._drop_unapplied_codebook_update()
        z_e, out_lengths = self.encoder(feats, lengths)
        mask = lengths_to_mask(out_lengths, z_e.size(1))
        vq = self.quantizer(z_e, mask)
        recon = self.decoder(self.jitter(vq.z_q, out_lengths), stage_lengths, speakers)

        frame_mask = lengths_to_mask(lengths, feats.size(1))
        losses = {"recon": masked_frame_mse(recon, feats, frame_mask), "commitment": vq.commitment_loss}
        if self.cfg.smoothing_weight > 0:
            n_input = lengths.sum().clamp_min(1).to(z_e.dtype)  # the reconstruction term's normaliser
            losses["smoothing"] = self.cfg.smoothing_weight * temporal_smoothness(z_e, out_lengths) / n_input
        else:
            losses["smoothing"] = z_e.new_zeros(())
        losses["total"] = losses["recon"] + losses["commitment"] + losses["smoothing"]
        stats = {"perplexity": vq.perplexity.detach(), "codes_used": vq.codes_used.detach()}
        return VQVAEOutput(recon=recon, z_e=z_e, z_q=vq.z_q, codes=vq.codes, mask=mask,
                           out_lengths=out_lengths, losses=losses, stats=stats)

    def encode(self, feats: torch.Tensor, lengths: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Unit extraction: never updates the codebook (call ``model.eval()`` to disable dropout too).

        Args:
            feats: ``(B, T, D_in)``; lengths: ``(B,)`` (each >= ``stride``).

        Returns:
            ``codes (B, T') long``, ``z_e (B, T', De)`` (continuous), ``z_q (B, T', De)`` (codebook rows),
            ``out_lengths (B,) = ceil(lengths / stride)``; padded frames are 0.

        Raises:
            ValueError: as :meth:`forward`.
        """
        self._check_input(feats, lengths)
        z_e, out_lengths = self.encoder(feats, lengths)
        mask = lengths_to_mask(out_lengths, z_e.size(1))
        codes = self.quantizer.quantize(z_e).masked_fill(~mask, 0)
        z_q = self.quantizer.embed(codes).to(z_e.dtype) * mask.unsqueeze(-1).to(z_e.dtype)
        return codes, z_e, z_q, out_lengths

    def decode(self, z_q: torch.Tensor, lengths: torch.Tensor, speakers: torch.Tensor | None = None) -> torch.Tensor:
        """Decode code vectors to features (e.g. voice conversion with another speaker index).

        Args:
            z_q: ``(B, T', De)`` codebook vectors (``quantizer.embed(codes)``).
            lengths: ``(B,)`` target frame lengths ``T`` (``T' = ceil(T / stride)``).
            speakers: ``(B,)`` speaker indices.

        Returns:
            ``(B, max(lengths), D_in)``.
        """
        self._check_speakers(speakers, z_q.size(0))
        stage_lengths = self._stage_lengths(lengths)
        if int(stage_lengths[-1].max()) > z_q.size(1):
            raise ValueError(f"VQVAE.decode: lengths need {int(stage_lengths[-1].max())} code frames, "
                             f"z_q has {z_q.size(1)}")
        z_q = z_q[:, : int(stage_lengths[-1].max())]
        return self.decoder(z_q, stage_lengths, speakers)



def default_hop(window: int, stride: int) -> int:
    """Half a window, in whole strides (at least one): the hop of :func:`encode_windowed` by default."""
    return max(stride, window // 2 // stride * stride)


def window_starts(num_frames: int, window: int, hop: int) -> list[int]:
    """Start frames of the analysis windows of :func:`encode_windowed`: ``0, hop, 2 hop, ...`` up to
    the first window that reaches the end (one window, starting at 0, when ``num_frames <= window``)."""
    if window < 1 or hop < 1 or hop > window:
        raise ValueError(f"need 1 <= hop <= window, got window {window}, hop {hop}")
    starts = [0]
    while starts[-1] + window < num_frames:
        starts.append(starts[-1] + hop)
    return starts


@torch.no_grad()
def encode_windowed(model: VQVAE, feats: torch.Tensor, window: int, hop: int | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode one utterance over overlapping windows of the training crop length.

    Training encodes ``data.crop_frames``-frame crops, each with positions counted from its own
    start; encoding a whole utterance at once shows the encoder positions and contexts it never saw.
    Here the utterance is cut into windows of ``window`` input frames starting every ``hop`` frames
    (both multiples of ``model.cfg.stride``), the windows are encoded in one batch, and every
    code frame is taken from the window whose centre is nearest to it (so from the central part of
    a window wherever windows overlap; ``hop = window // 2`` by default).

    Args:
        model: a :class:`VQVAE` (in eval mode).
        feats: ``(T, D_in)`` input features (after CMVN), ``T >= stride``.
        window, hop: input frames.

    Returns:
        ``codes (T',)`` and ``z_e (T', De)`` with ``T' = ceil(T / stride)``, as :meth:`VQVAE.encode`.

    Raises:
        ValueError: ``window`` / ``hop`` not positive multiples of the stride, or ``hop > window``.
    """
    s = model.cfg.stride
    hop = hop or default_hop(window, s)
    if window % s or hop % s:
        raise ValueError(f"window ({window}) and hop ({hop}) must be multiples of the stride {s}")
    T = feats.size(0)
    starts = window_starts(T, window, hop)
    pieces = [feats[a: a + window] for a in starts]
    x = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True)
    lengths = torch.tensor([len(p) for p in pieces])
    _, z_w, _, out_lengths = model.encode(x, lengths)
    n_out = -(-T // s)
    begin = torch.tensor(starts, dtype=torch.float64)
    end = begin + lengths.double()
    first = torch.arange(n_out, dtype=torch.float64) * s
    frame_mid = (first + (first + s).clamp(max=T)) / 2  # the last code frame may cover fewer than s frames
    inside = (frame_mid[:, None] >= begin[None]) & (frame_mid[:, None] < end[None])  # every frame is in some window
    dist = (frame_mid[:, None] - (begin + end)[None] / 2).abs().masked_fill(~inside, float("inf"))
    k = dist.argmin(dim=1)
    j = torch.arange(n_out) - torch.tensor(starts)[k] // s
    z_e = z_w[k, j]
    codes = model.quantizer.quantize(z_e[None])[0]
    return codes, z_e


def phase_offsets(stride: int, phases: int) -> list[int]:
    """Input-frame offsets ``a_p`` of the phases of :func:`encode_phases`: phase ``p`` encodes the input
    from frame ``a_p = p * (stride // phases) - (stride - stride // phases) // 2`` on (a negative offset
    repeats the first frame ``-a_p`` times in front).

    Raises:
        ValueError: ``phases`` not a divisor of ``stride``.
    """
    if phases < 1 or stride % phases:
        raise ValueError(f"phases must divide the model's stride {stride}, got {phases}")
    step = stride // phases
    return [p * step - (stride - step) // 2 for p in range(phases)]


@torch.no_grad()
def encode_phases(model: VQVAE, feats: torch.Tensor, phases: int, window: int = 0, hop: int | None = None
                  ) -> torch.Tensor:
    """The continuous encoder output z every ``stride / phases`` input frames (shift-and-stitch).

    A stride-``s`` encoder gives one z per ``s`` input frames (40 ms for s = 4 on 10 ms frames). Here
    the utterance is encoded ``phases`` times, phase ``p`` with its input shifted by
    :func:`phase_offsets` ``a_p`` frames, and the outputs are interleaved: row ``r = phases * i + p``
    is frame ``i`` of phase ``p`` ("shift-and-stitch", Long, Shelhamer & Darrell, "Fully
    convolutional networks for semantic segmentation", CVPR 2015, sec. 3.2). Every row is a true
    encoder output (nothing interpolated), from input frames ``[a_p + s i, a_p + s i + s)`` (the first
    frame repeated where they start before 0; the last repeated up to one stride where a shifted input
    is shorter than that); with
    ``step = s / phases`` row ``r`` is centred at ``(r + 1/2) step + e`` input frames, where
    ``e = ((s - step) mod 2) / 2`` (half an input frame, 5 ms, for s = 4 at every frame; 0 for two
    phases). ``phases = 1`` is the plain encoding.

    Args:
        model: a :class:`VQVAE` (in eval mode).
        feats: ``(T, D_in)`` input features (after CMVN), ``T >= stride``.
        phases: a divisor of ``model.cfg.stride``.
        window, hop: > 0: each phase over overlapping windows (:func:`encode_windowed`); 0: whole.

    Returns:
        ``z_e (ceil(T / step), De)``.

    Raises:
        ValueError: ``phases`` not a divisor of the stride; bad ``window`` / ``hop`` as
        :func:`encode_windowed`.
    """
    s = model.cfg.stride
    offsets = phase_offsets(s, phases)
    step = s // phases
    T = feats.size(0)
    n_rows = -(-T // step)
    rows = feats.new_zeros(n_rows, model.cfg.codebook_dim)
    for p, a in enumerate(offsets):
        # the input from frame a on (the first frame repeated in front where a < 0); it always yields the
        # ceil((T - p step) / s) frames this phase needs, since a <= p step
        x = torch.cat([feats[:1].expand(-a, -1), feats], 0) if a < 0 else feats[a:]
        if len(x) < s:  # an utterance of fewer than 2 strides: the last frame repeated up to one stride
            x = torch.cat([x, x[-1:].expand(s - len(x), -1)], 0)
        n_p = -(-(n_rows - p) // phases)  # rows p, p + phases, ... below n_rows
        if window > 0:
            _, z = encode_windowed(model, x, window, hop)
        else:
            _, z, _, _ = model.encode(x[None], torch.tensor([len(x)]))
            z = z[0]
        rows[p::phases] = z[:n_p]
    return rows
