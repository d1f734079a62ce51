"""MUSA-RNN: the LSTM acoustic baseline of the SALAD paper.

Pascual, Bonafonte & Serrà, "Self-Attention Linguistic-Acoustic Decoder", IberSPEECH 2018, sec. 2
(Fig. 1) and sec. 3.3 (Table 1) (authors' code: santi-pdp/musa_tts, ``acoustic_rnn``)::

    labels x_t (B, T, D)
    h_t = ReLU(W_e x_t + b_e)                     the embedding of sec. 2, the same as SALAD's
    s_t = Dropout(LSTM_H(h_{1..t}))               hidden LSTM of size H, dropout 0.5 after it
    y_t = LSTM_43(s_{1..t})                       recurrent output layer: an LSTM whose 43 units
                                                  are the (normalised) acoustic features

Both LSTMs are causal and stateful: their ``(h, c)`` states carry over from one training window
to the next of the same stream (sec. 3.3), and an utterance is synthesised from zero state, frame
after frame (the recursion the paper blames for the RNN's slow CPU inference: abstract, sec. 4,
Table 3). The output LSTM's values lie in (-1, 1), which covers the [0, 1]-normalised targets.

Parameter counts (``D = 364``, PyTorch LSTMs with two bias vectors)::

    small: d = 128, H = 450    ->  1,175,860  (Table 2: 1.17 M)
    big:   d = 512, H = 1300   ->  9,851,020  (Table 2: 9.85 M)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from speechkit.models.salad import LabelEmbedding, OutputNormalizer, _check_dropout, _check_positive

__all__ = ["MusaRnnConfig", "MusaRnn", "RnnState"]

#: ``((h, c) of the hidden LSTM, (h, c) of the output LSTM)``, each ``(layers, B, size)``.
RnnState = tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class MusaRnnConfig:
    """MUSA-RNN hyper-parameters (the ``model:`` section of a ``musa_rnn`` training config).

    Small / big presets follow Table 1 of the paper: embedding 128 / 512, LSTM 450 / 1300.

    Attributes:
        input_dim: ``D``, size of a frame's linguistic label vector; 0 = read it from the first
            matrix of data.train_dir/labels.scp when the config is loaded.
        output_dim: acoustic features per frame = size of the output LSTM (43).
        embed_dim: ``d``, size of the ReLU embedding projection (sec. 2; Table 1's "Emb").
        hidden_size: units of the hidden LSTM (Table 1's "HidRNN": 450 / 1300). Sec. 2 calls it
            "an LSTM layer of size H", H also being its name for the embedding size there.
        num_layers: stacked layers of the hidden LSTM (1 in the paper).
        dropout: dropout after the hidden LSTM (and between its layers when num_layers > 1).
    """

    input_dim: int = 0
    output_dim: int = 43
    embed_dim: int = 128
    hidden_size: int = 450
    num_layers: int = 1
    dropout: float = 0.5

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field.

        Raises:
            FieldError: naming the key.
        """
        _check_positive(self, "input_dim", "output_dim", "embed_dim", "hidden_size", "num_layers",
                        allow_zero=("input_dim",))
        _check_dropout(self, "dropout")


class MusaRnn(nn.Module):
    """The MUSA-RNN acoustic model; see the module docstring.

    Args:
        cfg: :class:`MusaRnnConfig` with ``input_dim >= 1``.

    Raises:
        ValueError: ``cfg.input_dim`` is 0 (unresolved).
    """

    def __init__(self, cfg: MusaRnnConfig) -> None:
        super().__init__()
        cfg.validate()
        if cfg.input_dim < 1:
            raise ValueError("MusaRnn: model.input_dim is 0; set it to the label dimension (or give "
                             "data.train_dir so that it is read from labels.scp)")
        self.cfg = cfg
        self.embedding = LabelEmbedding(cfg.input_dim, cfg.embed_dim)
        self.rnn = nn.LSTM(cfg.embed_dim, cfg.hidden_size, num_layers=cfg.num_layers, batch_first=True,
                           dropout=cfg.dropout if cfg.num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(cfg.dropout)
        self.output = nn.LSTM(cfg.hidden_size, cfg.output_dim, num_layers=1, batch_first=True)
        self.normalizer = OutputNormalizer(cfg.output_dim)

    def forward(self, labels: torch.Tensor, state: RnnState | None = None) -> tuple[torch.Tensor, RnnState]:
        """Predict normalised acoustic features, continuing from ``state``.

        Args:
            labels: ``(B, T, D)`` frame-level label vectors.
            state: the states returned by the previous call on the same streams; None = zeros.

        Returns:
            ``(y, state)``: ``(B, T, output_dim)`` normalised features and the final states
            (attached to the graph: detach them before carrying them to the next training window).

        Raises:
            ValueError: ``labels`` not ``(B, T, input_dim)``.
        """
        if labels.dim() != 3 or labels.size(-1) != self.cfg.input_dim:
            raise ValueError(f"MusaRnn: expected labels (B, T, {self.cfg.input_dim}), got {tuple(labels.shape)}")
        hid_state, out_state = (None, None) if state is None else state
        s, hid_state = self.rnn(self.embedding(labels), hid_state)
        y, out_state = self.output(self.dropout(s), out_state)
        return y, (hid_state, out_state)

    @torch.no_grad()
    def infer(self, labels: torch.Tensor) -> torch.Tensor:
        """Whole utterances from zero state: ``(B, T, D) -> (B, T, output_dim)`` normalised features."""
        return self(labels)[0]


def detach_state(state: RnnState | None) -> RnnState | None:
    """``state`` cut from the autograd graph (truncated back-propagation through time)."""
    if state is None:
        return None
    return tuple(tuple(t.detach() for t in pair) for pair in state)  # type: ignore[return-value]
