"""Tacotron 2: phones -> mel spectrogram with location-sensitive attention, speaker-conditioned.

Shen et al., "Natural TTS Synthesis by Conditioning WaveNet on Mel Spectrogram Predictions",
ICASSP 2018 (the *spectrogram prediction network* of sec. 2.2; training setup of sec. 3.1), with
the speaker conditioning of Jia et al., NeurIPS 2018 (sec. 2.2): a fixed speaker vector (the GE2E
embedding) is concatenated to every encoder output. Hemati & Borth 2021 condition their Tacotron 2
on the mean speaker embedding (sec. 2.1, 3; Figure 2) without saying where it enters the model.

Architecture (paper sizes are the :class:`Tacotron2Config` defaults)
    Encoder: phone embedding (512) -> 3 x [Conv1d 512, kernel 5 -> BatchNorm -> ReLU -> dropout 0.5]
    -> one bidirectional LSTM (256 units per direction). The encoder output ``h_j`` (512) of every
    phone is concatenated with the speaker vector ``s`` (``E``): the attention memory is
    ``[h_j | s]`` (``512 + E``).

    Attention: location-sensitive (Chorowski et al., "Attention-Based Models for Speech Recognition",
    NeurIPS 2015, eqs. 8-9)::

        f_i     = F * [alpha_{i-1}; sum_{k<i} alpha_k]           (32 filters, kernel 31)
        e_{i,j} = w^T tanh(W q_i + V h_j + U f_{i,j} + b)       (128-dim)
        alpha_i = softmax_j(e_{i,j}) over the unpadded phones,  c_i = sum_j alpha_{i,j} h_j

    where, as in Tacotron 2 (sec. 2.2: "cumulative attention weights from previous decoder time
    steps as an additional feature"), the location features convolve both the previous and the
    cumulative weights (two input channels; Chorowski's eq. 8 uses the previous ones only).

    Decoder (autoregressive, one step = ``r`` frames): the previous frame goes through the prenet
    (2 x [Linear 256 -> ReLU -> dropout 0.5], dropout *kept at inference*, sec. 2.2); then a stack of
    2 unidirectional LSTMs (1024 units, zoneout 0.1): LSTM 1 reads ``[prenet | c_{i-1}]`` and its
    output is the attention query ``q_i``; LSTM 2 reads ``[q_i | c_i]``. ``[LSTM 2 output | c_i]`` is
    linearly projected to the ``r`` mel frames and to ``r`` stop-token logits (sec. 2.2: "the
    concatenation of the LSTM output and the attention context vector is projected ... to predict
    the probability that the output sequence has completed"). The LSTM wiring is the one of
    NVIDIA's reference implementation (attention computed from the first LSTM layer).

    Postnet: 5 x [Conv1d 512, kernel 5 -> BatchNorm -> tanh (not on the last) -> dropout 0.5],
    the last one back to ``n_mels``, added to the decoder output (residual).

Units
    The model predicts frames in its *target space*: the task feeds per-dimension mean/variance
    normalised log-mel frames (:meth:`Tacotron2.normalize`); the statistics are buffers of the
    model (``mel_mean``, ``mel_std``), so checkpoints carry them, and :meth:`Tacotron2.denormalize`
    maps predictions back to natural-log mel energies. :func:`speechkit.decode.griffin_lim.mel_to_waveform` turns those into a
    waveform with Griffin-Lim (the paper used WaveNet; no pretrained neural vocoder is available
    offline here).

Reduction factor ``r`` (Tacotron, Wang et al. 2017, sec. 3.3): each decoder step emits ``r``
frames and is fed the last frame of the previous group; ``r = 1`` is Tacotron 2. Use ``r = 2``
or ``3`` on a CPU.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from speechkit.utils.config import FieldError

__all__ = ["Tacotron2Config", "Tacotron2", "Tacotron2Output", "Tacotron2Inference", "LocationSensitiveAttention",
           "ZoneoutLSTMCell", "Prenet", "Postnet", "Tacotron2Encoder", "stop_targets", "length_mask",
           "guided_attention_weights", "count_parameters"]

log = logging.getLogger(__name__)


@dataclass
class Tacotron2Config:
    """Tacotron 2 hyper-parameters; the defaults are the paper's (Shen et al. 2018, sec. 2.2).

    Attributes:
        num_phones: input vocabulary size, padding (id 0) included; 0 = from the task's
            data.token_list.
        n_mels: mel channels per frame (paper: 80).
        speaker_dim: size E of the speaker vector concatenated to every encoder output (256 for
            the GE2E embedding); 0 = no speaker conditioning. The task reads it from
            data.speaker_embeddings.
        embed_dim: phone embedding size (paper: 512).
        encoder_conv_layers: convolutions of the encoder (paper: 3).
        encoder_conv_channels: their channels (paper: 512).
        encoder_kernel: their kernel size in phones (paper: 5).
        encoder_lstm_units: units per direction of the encoder's BiLSTM (paper: 256).
        attention_dim: size of the attention's hidden layer (paper: 128).
        attention_filters: location convolution filters (paper: 32).
        attention_kernel: location convolution kernel in phones, odd (paper: 31).
        prenet_layers: fully connected prenet layers (paper: 2).
        prenet_dim: their units (paper: 256).
        prenet_dropout: prenet dropout, applied in training and at inference (paper: 0.5).
        decoder_lstm_layers: unidirectional decoder LSTMs, >= 1 (paper: 2); the first one's output
            is the attention query.
        decoder_lstm_units: their units (paper: 1024).
        zoneout: zoneout probability of the decoder LSTMs (paper: 0.1).
        postnet_layers: postnet convolutions, >= 1 (paper: 5).
        postnet_channels: their channels (paper: 512).
        postnet_kernel: their kernel size in frames, odd (paper: 5).
        dropout: dropout after each encoder and postnet convolution (paper: 0.5).
        reduction_factor: frames emitted per decoder step r (Tacotron 2: 1; 2 or 3 on a CPU).
        stop_threshold: inference stops at the first frame whose stop probability exceeds this
            (paper: 0.5).
    """

    num_phones: int = 0
    n_mels: int = 80
    speaker_dim: int = 0
    embed_dim: int = 512
    encoder_conv_layers: int = 3
    encoder_conv_channels: int = 512
    encoder_kernel: int = 5
    encoder_lstm_units: int = 256
    attention_dim: int = 128
    attention_filters: int = 32
    attention_kernel: int = 31
    prenet_layers: int = 2
    prenet_dim: int = 256
    prenet_dropout: float = 0.5
    decoder_lstm_layers: int = 2
    decoder_lstm_units: int = 1024
    zoneout: float = 0.1
    postnet_layers: int = 5
    postnet_channels: int = 512
    postnet_kernel: int = 5
    dropout: float = 0.5
    reduction_factor: int = 1
    stop_threshold: float = 0.5

    def __post_init__(self) -> None:
        for key in ("n_mels", "embed_dim", "encoder_conv_channels", "encoder_kernel", "encoder_lstm_units",
                    "attention_dim", "attention_filters", "attention_kernel", "prenet_dim", "decoder_lstm_layers",
                    "decoder_lstm_units", "postnet_layers", "postnet_channels", "postnet_kernel",
                    "reduction_factor"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise FieldError(key, f"must be an integer >= 1 (got {v!r})")
        for key in ("num_phones", "speaker_dim", "encoder_conv_layers", "prenet_layers"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise FieldError(key, f"must be an integer >= 0 (got {v!r})")
        for key in ("attention_kernel", "encoder_kernel", "postnet_kernel"):
            if getattr(self, key) % 2 == 0:
                raise FieldError(key, f"must be odd so that the output keeps its length (got {getattr(self, key)})")
        for key in ("prenet_dropout", "zoneout", "dropout"):
            v = getattr(self, key)
            if not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise FieldError(key, f"must be in [0, 1) (got {v!r})")
        if not 0.0 < self.stop_threshold < 1.0:
            raise FieldError("stop_threshold", f"must be in (0, 1) (got {self.stop_threshold!r})")


class Tacotron2Output(NamedTuple):
    """Teacher-forced outputs of :meth:`Tacotron2.forward` (target space, see the module docstring).

    Attributes:
        mel_before: ``(B, T, n_mels)`` decoder output before the postnet.
        mel_after: ``(B, T, n_mels)`` after the residual postnet.
        stop_logits: ``(B, T)`` stop-token logits, one per frame.
        alignments: ``(B, ceil(T / r), N)`` attention weights of every decoder step.
    """

    mel_before: torch.Tensor
    mel_after: torch.Tensor
    stop_logits: torch.Tensor
    alignments: torch.Tensor


class Tacotron2Inference(NamedTuple):
    """Free-running outputs of :meth:`Tacotron2.inference` (target space).

    Attributes:
        mel: ``(B, T, n_mels)`` postnet outputs; frames at or after ``lengths[b]`` are zero.
        lengths: ``(B,)`` frames up to and including the first frame whose stop probability
            exceeds the threshold (``max_frames`` rounded up to a multiple of r if none did).
        stop_probs: ``(B, T)`` stop probabilities.
        alignments: ``(B, steps, N)`` attention weights.
        stopped: ``(B,)`` bool, whether the stop token fired (False = cut at ``max_frames``).
    """

    mel: torch.Tensor
    lengths: torch.Tensor
    stop_probs: torch.Tensor
    alignments: torch.Tensor
    stopped: torch.Tensor


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters (buffers such as the normalisation statistics excluded)."""
    return sum(p.numel() for p in model.parameters())


def length_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """``(B,)`` lengths -> ``(B, max_len)`` bool mask, True on the valid (unpadded) positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def stop_targets(mel_lens: torch.Tensor, max_len: int) -> torch.Tensor:
    """Stop-token targets ``(B, max_len)`` float: 1 from the last frame ``mel_lens[b] - 1`` on, else 0."""
    return (torch.arange(max_len, device=mel_lens.device)[None, :] >= (mel_lens[:, None] - 1)).float()


def guided_attention_weights(phone_lens: torch.Tensor, step_lens: torch.Tensor, sigma: float = 0.4
                             ) -> torch.Tensor:
    """Penalty matrix of the guided attention loss (Tachibana et al., ICASSP 2018, sec. 4.1).

    ``W[b, t, n] = 1 - exp(-(n / N_b - t / T_b)^2 / (2 sigma^2))`` on the valid region
    (``t < T_b = step_lens[b]``, ``n < N_b = phone_lens[b]``) and 0 outside; the loss is the mean
    of ``alignments * W`` over the valid region.

    Args:
        phone_lens: ``(B,)`` phones per utterance.
        step_lens: ``(B,)`` decoder steps per utterance (``ceil(frames / r)``).
        sigma: width ``g`` (Tachibana et al.: 0.2; ESPnet's default 0.4).

    Returns:
        ``(B, max(step_lens), max(phone_lens))`` float.
    """
    n = torch.arange(int(phone_lens.max()), device=phone_lens.device, dtype=torch.float32)
    t = torch.arange(int(step_lens.max()), device=phone_lens.device, dtype=torch.float32)
    grid = n[None, None, :] / phone_lens[:, None, None].float() - t[None, :, None] / step_lens[:, None, None].float()
    w = 1.0 - torch.exp(-grid.square() / (2.0 * sigma ** 2))
    valid = length_mask(step_lens)[:, :, None] & length_mask(phone_lens)[:, None, :]
    return w * valid


class ZoneoutLSTMCell(nn.Module):
    """An LSTM cell with zoneout (Krueger et al., ICLR 2017), as Tacotron 2's decoder (sec. 2.2).

    In training each unit of ``h`` and ``c`` keeps its previous value with probability ``p``
    (a fresh Bernoulli mask per unit and step); in eval mode the expectation
    ``p * previous + (1 - p) * new`` is used.

    Args:
        input_size, hidden_size: as :class:`torch.nn.LSTMCell`.
        zoneout: ``p`` in [0, 1).
    """

    def __init__(self, input_size: int, hidden_size: int, zoneout: float = 0.0) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(input_size, hidden_size)
        self.zoneout = zoneout

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, input_size)``, ``state = (h, c)`` each ``(B, hidden_size)`` -> new ``(h, c)``."""
        h, c = self.cell(x, state)
        p = self.zoneout
        if p <= 0.0:
            return h, c
        if self.training:
            keep_h = torch.bernoulli(torch.full_like(h, p))
            keep_c = torch.bernoulli(torch.full_like(c, p))
            return keep_h * state[0] + (1 - keep_h) * h, keep_c * state[1] + (1 - keep_c) * c
        return p * state[0] + (1 - p) * h, p * state[1] + (1 - p) * c


class Prenet(nn.Module):
    """The decoder prenet: ``layers x [Linear -> ReLU -> dropout]``, dropout always on (Shen et al. sec. 2.2:
    "dropout ... is applied ... in the pre-net of the autoregressive decoder ... at inference time").

    ``(..., in_dim) -> (..., dim)``; with 0 layers, the identity.
    """

    def __init__(self, in_dim: int, dim: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(in_dim if i == 0 else dim, dim) for i in range(layers))
        self.dropout = dropout
        self.out_dim = dim if layers else in_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), p=self.dropout, training=True)
        return x


def _conv_bn(in_ch: int, out_ch: int, kernel: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv1d(in_ch, out_ch, kernel, padding=kernel // 2), nn.BatchNorm1d(out_ch))


class Tacotron2Encoder(nn.Module):
    """Phone ids ``(B, N)`` + lengths ``(B,)`` -> encoder outputs ``(B, N, 2 * encoder_lstm_units)``
    (Shen et al. sec. 2.2); padded positions of the output are zero."""

    def __init__(self, cfg: Tacotron2Config) -> None:
        super().__init__()
        self.embedding = nn.Embedding(cfg.num_phones, cfg.embed_dim, padding_idx=0)
        ch = cfg.embed_dim
        self.convs = nn.ModuleList()
        for _ in range(cfg.encoder_conv_layers):
            self.convs.append(_conv_bn(ch, cfg.encoder_conv_channels, cfg.encoder_kernel))
            ch = cfg.encoder_conv_channels
        self.dropout = cfg.dropout
        self.lstm = nn.LSTM(ch, cfg.encoder_lstm_units, batch_first=True, bidirectional=True)
        self.out_dim = 2 * cfg.encoder_lstm_units

    def forward(self, phones: torch.Tensor, phone_lens: torch.Tensor) -> torch.Tensor:
        mask = length_mask(phone_lens, phones.shape[1])[:, None, :].float()
        x = self.embedding(phones).transpose(1, 2)  # (B, C, N)
        for conv in self.convs:
            # Zero the padding before each convolution so that a batch equals its items run alone.
            x = F.dropout(F.relu(conv(x * mask)), self.dropout, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x.transpose(1, 2), phone_lens.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=phones.shape[1])
        return out


class LocationSensitiveAttention(nn.Module):
    """Location-sensitive attention (Chorowski et al. 2015, eqs. 8-9) over previous + cumulative weights.

    ``e_{i,j} = w^T tanh(W q_i + V m_j + U f_{i,j})`` with ``f_i = F * [alpha_{i-1}; cum_{i-1}]``
    (``F``: ``filters`` kernels of width ``kernel`` over 2 channels; the bias ``b`` lives in ``V``),
    ``alpha_i = softmax(e_i)`` over the valid memory positions (padding gets exactly 0),
    context ``c_i = sum_j alpha_{i,j} m_j``.

    Args:
        query_dim: size of the query ``q_i`` (the first decoder LSTM's output).
        memory_dim: size of a memory vector ``m_j`` (encoder output + speaker vector).
        attention_dim, filters, kernel: see :class:`Tacotron2Config`.
    """

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int, filters: int, kernel: int) -> None:
        super().__init__()
        self.query_layer = nn.Linear(query_dim, attention_dim, bias=False)            # W
        self.memory_layer = nn.Linear(memory_dim, attention_dim, bias=True)           # V, b
        self.location_conv = nn.Conv1d(2, filters, kernel, padding=kernel // 2, bias=False)  # F
        self.location_layer = nn.Linear(filters, attention_dim, bias=False)           # U
        self.v = nn.Linear(attention_dim, 1, bias=False)                              # w

    def process_memory(self, memory: torch.Tensor) -> torch.Tensor:
        """``V m_j + b`` for every memory position: ``(B, N, memory_dim) -> (B, N, attention_dim)``
        (computed once per utterance)."""
        return self.memory_layer(memory)

    def forward(self, query: torch.Tensor, memory: torch.Tensor, processed_memory: torch.Tensor,
                previous: torch.Tensor, cumulative: torch.Tensor, mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step.

        Args:
            query: ``(B, query_dim)``.
            memory: ``(B, N, memory_dim)``.
            processed_memory: ``(B, N, attention_dim)`` from :meth:`process_memory`.
            previous, cumulative: ``(B, N)`` previous step's weights and their running sum.
            mask: ``(B, N)`` bool, True on valid positions (each row needs at least one).

        Returns:
            ``(context (B, memory_dim), weights (B, N))``; every row of ``weights`` sums to 1
            over its valid positions and is 0 on padding.
        """
        location = self.location_conv(torch.stack([previous, cumulative], dim=1)).transpose(1, 2)  # (B, N, filters)
        energies = self.v(torch.tanh(self.query_layer(query)[:, None, :] + processed_memory
                                     + self.location_layer(location))).squeeze(-1)
        weights = torch.softmax(energies.masked_fill(~mask, float("-inf")), dim=-1)
        context = torch.bmm(weights[:, None, :], memory).squeeze(1)
        return context, weights


class Postnet(nn.Module):
    """The residual postnet (Shen et al. sec. 2.2): ``(B, T, n_mels) -> (B, T, n_mels)`` correction
    (add it to the input). ``layers`` convolutions with BatchNorm, tanh on all but the last, dropout.

    With ``mask`` (``(B, T)`` bool, True on valid frames) the padding is zeroed before every
    convolution, so an utterance in a padded batch gets what it gets alone.
    """

    def __init__(self, n_mels: int, channels: int, kernel: int, layers: int, dropout: float) -> None:
        super().__init__()
        dims = [n_mels] + [channels] * (layers - 1) + [n_mels]
        self.convs = nn.ModuleList(_conv_bn(dims[i], dims[i + 1], kernel) for i in range(layers))
        self.dropout = dropout

    def forward(self, mel: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = mel.transpose(1, 2)
        m = None if mask is None else mask[:, None, :].to(x.dtype)
        for i, conv in enumerate(self.convs):
            x = conv(x if m is None else x * m)
            if i < len(self.convs) - 1:
                x = torch.tanh(x)
            x = F.dropout(x, self.dropout, self.training)
        return (x if m is None else x * m).transpose(1, 2)


class Tacotron2(nn.Module):
    """Tacotron 2's spectrogram prediction network with a speaker vector on every encoder output.

    See the module docstring for the architecture and units. Phone id 0 is padding.

    Args:
        cfg: :class:`Tacotron2Config`; ``cfg.num_phones`` must be set (> 1).

    Raises:
        ValueError: ``num_phones`` < 2.
    """

    def __init__(self, cfg: Tacotron2Config) -> None:
        super().__init__()
        if cfg.num_phones < 2:
            raise ValueError(f"Tacotron2: model.num_phones must be >= 2 (padding + at least one phone), "
                             f"got {cfg.num_phones}")
        self.cfg = cfg
        self.encoder = Tacotron2Encoder(cfg)
        memory_dim = self.encoder.out_dim + cfg.speaker_dim
        self.memory_dim = memory_dim
        self.prenet = Prenet(cfg.n_mels, cfg.prenet_dim, cfg.prenet_layers, cfg.prenet_dropout)
        units = cfg.decoder_lstm_units
        self.lstms = nn.ModuleList(
            ZoneoutLSTMCell((self.prenet.out_dim if i == 0 else units) + memory_dim, units, cfg.zoneout)
            for i in range(cfg.decoder_lstm_layers))
        self.attention = LocationSensitiveAttention(units, memory_dim, cfg.attention_dim, cfg.attention_filters,
                                                    cfg.attention_kernel)
        r = cfg.reduction_factor
        self.mel_proj = nn.Linear(units + memory_dim, cfg.n_mels * r)
        self.stop_proj = nn.Linear(units + memory_dim, r)
        self.postnet = Postnet(cfg.n_mels, cfg.postnet_channels, cfg.postnet_kernel, cfg.postnet_layers, cfg.dropout)
        self.register_buffer("mel_mean", torch.zeros(cfg.n_mels))
        self.register_buffer("mel_std", torch.ones(cfg.n_mels))

    # -- normalisation ------------------------------------------------------------------------

    def set_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Set the per-channel target statistics ``(n_mels,)`` (std floored at 1e-5)."""
        self.mel_mean.copy_(torch.as_tensor(mean, dtype=self.mel_mean.dtype))
        self.mel_std.copy_(torch.as_tensor(std, dtype=self.mel_std.dtype).clamp_min(1e-5))

    def normalize(self, mel: torch.Tensor) -> torch.Tensor:
        """Log-mel ``(..., n_mels)`` -> target space ``(mel - mean) / std``."""
        return (mel - self.mel_mean.to(mel.device)) / self.mel_std.to(mel.device)

    def denormalize(self, mel: torch.Tensor) -> torch.Tensor:
        """Target space ``(..., n_mels)`` -> log-mel (natural log of mel energies)."""
        return mel * self.mel_std.to(mel.device) + self.mel_mean.to(mel.device)

    # -- pieces -------------------------------------------------------------------------------

    def encode(self, phones: torch.Tensor, phone_lens: torch.Tensor, speaker: torch.Tensor | None) -> torch.Tensor:
        """Attention memory ``[h_j | s]``: ``(B, N, memory_dim)``.

        Raises:
            ValueError: a speaker vector of the wrong size, or missing while ``speaker_dim > 0``.
        """
        h = self.encoder(phones, phone_lens)
        e = self.cfg.speaker_dim
        if e == 0:
            if speaker is not None and speaker.numel() > 0:
                raise ValueError("Tacotron2: a speaker vector was given but model.speaker_dim is 0")
            return h
        if speaker is None or speaker.shape != (phones.shape[0], e):
            got = None if speaker is None else tuple(speaker.shape)
            raise ValueError(f"Tacotron2: speaker must be ({phones.shape[0]}, {e}) (model.speaker_dim), got {got}")
        return torch.cat([h, speaker.to(h.dtype)[:, None, :].expand(-1, h.shape[1], -1)], dim=-1)

    def _init_state(self, memory: torch.Tensor) -> dict[str, Any]:
        b, n, _ = memory.shape
        units = self.cfg.decoder_lstm_units
        zeros = memory.new_zeros
        return {"hc": [(zeros(b, units), zeros(b, units)) for _ in self.lstms], "context": zeros(b, self.memory_dim),
                "previous": zeros(b, n), "cumulative": zeros(b, n)}

    def _step(self, prenet_out: torch.Tensor, state: dict[str, Any], memory: torch.Tensor,
              processed: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoder step -> ``(frames (B, r * n_mels), stop logits (B, r), weights (B, N))``; updates ``state``."""
        hc = state["hc"]
        hc[0] = self.lstms[0](torch.cat([prenet_out, state["context"]], dim=-1), hc[0])
        context, weights = self.attention(hc[0][0], memory, processed, state["previous"], state["cumulative"], mask)
        for k in range(1, len(self.lstms)):
            hc[k] = self.lstms[k](torch.cat([hc[k - 1][0], context], dim=-1), hc[k])
        out = torch.cat([hc[-1][0], context], dim=-1)
        state["context"], state["previous"] = context, weights
        state["cumulative"] = state["cumulative"] + weights
        return self.mel_proj(out), self.stop_proj(out), weights

    # -- training -----------------------------------------------------------------------------

    def forward(self, phones: torch.Tensor, phone_lens: torch.Tensor, mels: torch.Tensor,
                speaker: torch.Tensor | None = None, mel_lens: torch.Tensor | None = None) -> Tacotron2Output:
        """Teacher-forced decoding (Shen et al. sec. 3.1: "teacher-forcing ... the decoder's input is the
        ground-truth output of the previous step").

        Args:
            phones: ``(B, N)`` long phone ids, 0 = padding.
            phone_lens: ``(B,)`` phones per utterance (>= 1).
            mels: ``(B, T, n_mels)`` target frames in target space (padding frames are ignored
                by the loss; their value does not matter).
            speaker: ``(B, E)`` speaker vectors (``E = cfg.speaker_dim``), or None when E = 0.
            mel_lens: ``(B,)`` frames per utterance; given, the postnet sees no padding frame
                (each utterance's outputs equal those it gets alone); None = no masking.

        Returns:
            :class:`Tacotron2Output` with ``T`` frames (``ceil(T / r)`` decoder steps); outputs on
            padding frames are meaningless.

        Raises:
            ValueError: wrong shapes, an utterance with no phone.
        """
        b, t, d = mels.shape
        if d != self.cfg.n_mels:
            raise ValueError(f"Tacotron2: mels must have {self.cfg.n_mels} channels (model.n_mels), got {d}")
        if phones.shape[0] != b or phone_lens.shape != (b,):
            raise ValueError(f"Tacotron2: batch sizes differ: phones {tuple(phones.shape)}, phone_lens "
                             f"{tuple(phone_lens.shape)}, mels {tuple(mels.shape)}")
        if int(phone_lens.min()) < 1:
            raise ValueError("Tacotron2: every utterance needs at least one phone (phone_lens >= 1)")
        r = self.cfg.reduction_factor
        steps = -(-t // r)
        padded = F.pad(mels, (0, 0, 0, steps * r - t))
        # Decoder input of step i: the last frame of group i - 1 (a zero "go" frame for step 0).
        previous = torch.cat([padded.new_zeros(b, 1, d), padded[:, r - 1::r][:, :-1]], dim=1)
        prenet_out = self.prenet(previous)
        memory = self.encode(phones, phone_lens, speaker)
        processed = self.attention.process_memory(memory)
        mask = length_mask(phone_lens, phones.shape[1])
        state = self._init_state(memory)
        frames, stops, aligns = [], [], []
        for i in range(steps):
            f, s, w = self._step(prenet_out[:, i], state, memory, processed, mask)
            frames.append(f)
            stops.append(s)
            aligns.append(w)
        mel_before = torch.stack(frames, dim=1).reshape(b, steps * r, d)[:, :t]
        stop_logits = torch.stack(stops, dim=1).reshape(b, steps * r)[:, :t]
        mel_after = mel_before + self.postnet(mel_before, None if mel_lens is None else length_mask(mel_lens, t))
        return Tacotron2Output(mel_before, mel_after, stop_logits, torch.stack(aligns, dim=1))

    # -- inference ----------------------------------------------------------------------------

    @torch.no_grad()
    def inference(self, phones: torch.Tensor, speaker: torch.Tensor | None = None, max_frames: int = 1000,
                  phone_lens: torch.Tensor | None = None, stop_threshold: float | None = None) -> Tacotron2Inference:
        """Greedy autoregressive decoding until the stop token fires (Shen et al. sec. 2.2).

        Each utterance stops at the first frame whose stop probability exceeds ``stop_threshold``
        (that frame included); the batch runs until every utterance stopped or ``max_frames``.
        Prenet dropout stays on, so the result depends on the torch RNG (seed it for a
        reproducible output); call ``model.eval()`` first (BatchNorm, dropout, zoneout).

        Args:
            phones: ``(B, N)`` or ``(N,)`` long phone ids.
            speaker: ``(B, E)`` or ``(E,)``, or None when ``speaker_dim`` is 0.
            max_frames: frame limit (rounded up to a multiple of r).
            phone_lens: ``(B,)``; default: every row is full length.
            stop_threshold: default ``cfg.stop_threshold`` (0.5).

        Returns:
            :class:`Tacotron2Inference` (target space; :meth:`denormalize` gives log-mel).

        Raises:
            ValueError: wrong shapes, ``max_frames < 1``.
        """
        if phones.dim() == 1:
            phones = phones[None]
            if speaker is not None and speaker.dim() == 1:
                speaker = speaker[None]
        if max_frames < 1:
            raise ValueError(f"Tacotron2.inference: max_frames must be >= 1, got {max_frames}")
        b, n = phones.shape
        if phone_lens is None:
            phone_lens = torch.full((b,), n, dtype=torch.long, device=phones.device)
        threshold = self.cfg.stop_threshold if stop_threshold is None else stop_threshold
        r, d = self.cfg.reduction_factor, self.cfg.n_mels
        memory = self.encode(phones, phone_lens, speaker)
        processed = self.attention.process_memory(memory)
        mask = length_mask(phone_lens, n)
        state = self._init_state(memory)
        frame = memory.new_zeros(b, d)
        lengths = torch.zeros(b, dtype=torch.long, device=phones.device)
        done = torch.zeros(b, dtype=torch.bool, device=phones.device)
        frames, stops, aligns = [], [], []
        for i in range(-(-max_frames // r)):
            f, s, w = self._step(self.prenet(frame), state, memory, processed, mask)
            frames.append(f)
            aligns.append(w)
            probs = torch.sigmoid(s)
            stops.append(probs)
            fired = probs > threshold
            first = torch.where(fired.any(dim=1), fired.float().argmax(dim=1) + 1, torch.full_like(lengths, r))
            new = ~done & fired.any(dim=1)
            lengths = torch.where(new, i * r + first, lengths)
            done = done | new
            frame = f.reshape(b, r, d)[:, -1]
            if bool(done.all()):
                break
        steps = len(frames)
        lengths = torch.where(done, lengths, torch.full_like(lengths, steps * r))
        mel_before = torch.stack(frames, dim=1).reshape(b, steps * r, d)
        valid = length_mask(lengths, steps * r)
        mel = (mel_before + self.postnet(mel_before, valid)) * valid[:, :, None]
        stop_probs = torch.stack(stops, dim=1).reshape(b, steps * r)
        return Tacotron2Inference(mel, lengths, stop_probs, torch.stack(aligns, dim=1), done)

