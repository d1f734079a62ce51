"""Toy sequence-regression task: exercises the trainer without any corpus or other model code.

Data: ``num_train + num_valid`` sequences ``x`` of ``input_dim``-dimensional Gaussian frames with
lengths uniform in ``[min_len, max_len]``; targets ``y_t = tanh(x_t A + x_{t-1} B) C + noise``
(``x_{-1} = 0``), all drawn from ``data_seed``. The model (a causal width-2 convolution, tanh,
dropout, linear output) can represent the target map exactly, so the validation loss falls
towards ``noise**2``. Loss: mean squared error over the non-padded frames.

Used by the trainer tests and as a runnable example::

    speechkit-train toy --exp-dir exp/toy --trainer.max_epochs 3
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from speechkit.train.task import Task
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.config import FieldError

__all__ = ["ToyConfig", "ToyModelConfig", "ToyDataConfig", "ToyDataset", "ToyModel", "ToyTask"]


@dataclass
class ToyModelConfig:
    """Toy model settings.

    Attributes:
        input_dim: dimension of the input frames.
        hidden_dim: units of the hidden layer.
        output_dim: dimension of the target frames.
        dropout: dropout probability after the hidden layer (makes training use the torch RNG).
    """

    input_dim: int = 8
    hidden_dim: int = 32
    output_dim: int = 4
    dropout: float = 0.1

    def __post_init__(self) -> None:
        for name in ("input_dim", "hidden_dim", "output_dim"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise FieldError("dropout", f"must be in [0, 1), got {self.dropout}")


@dataclass
class ToyDataConfig:
    """Synthetic data settings.

    Attributes:
        num_train: training sequences.
        num_valid: validation sequences (0 = no validation set).
        min_len: shortest sequence, frames.
        max_len: longest sequence, frames.
        noise: standard deviation of the Gaussian noise added to the targets.
        data_seed: seed of the synthetic data and of the true target map (independent of trainer.seed).
        step_delay: seconds to sleep in each training forward pass; only for tests that need a run
            slow enough to interrupt.
    """

    num_train: int = 256
    num_valid: int = 64
    min_len: int = 4
    max_len: int = 24
    noise: float = 0.05
    data_seed: int = 1234
    step_delay: float = 0.0

    def __post_init__(self) -> None:
        if self.num_train < 1:
            raise FieldError("num_train", f"must be >= 1, got {self.num_train}")
        if self.num_valid < 0:
            raise FieldError("num_valid", f"must be >= 0, got {self.num_valid}")
        if not 1 <= self.min_len <= self.max_len:
            raise FieldError("max_len", f"need 1 <= min_len <= max_len, got {self.min_len} and {self.max_len}")


def _toy_trainer_defaults() -> TrainerConfig:
    return TrainerConfig(max_epochs=5, batch_size=16, lr=3e-3, log_interval=5, keep_last=2)


@dataclass
class ToyConfig:
    """Configuration of the toy task.

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig).
        model: model settings.
        data: synthetic data settings.
    """

    trainer: TrainerConfig = field(default_factory=_toy_trainer_defaults)
    model: ToyModelConfig = field(default_factory=ToyModelConfig)
    data: ToyDataConfig = field(default_factory=ToyDataConfig)


class ToyDataset(Dataset):
    """Synthetic sequences; item ``i`` is ``(x, y)`` with shapes ``(T_i, input_dim)``, ``(T_i, output_dim)``."""

    def __init__(self, xs: list[torch.Tensor], ys: list[torch.Tensor]) -> None:
        self.xs, self.ys = xs, ys

    def __len__(self) -> int:
        return len(self.xs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.xs[i], self.ys[i]

    def lengths(self) -> list[int]:
        """Frames per item."""
        return [len(x) for x in self.xs]


def make_toy_data(model_cfg: ToyModelConfig, data_cfg: ToyDataConfig) -> tuple[ToyDataset, ToyDataset | None]:
    """Draw the train/valid sets (deterministic in ``data_cfg.data_seed``)."""
    rng = np.random.default_rng(data_cfg.data_seed)
    d_in, d_out, d_h = model_cfg.input_dim, model_cfg.output_dim, 16
    a = rng.normal(0, 1 / np.sqrt(d_in), (d_in, d_h))
    b = rng.normal(0, 0.5 / np.sqrt(d_in), (d_in, d_h))
    c = rng.normal(0, 1 / np.sqrt(d_h), (d_h, d_out))

    def draw(n: int) -> ToyDataset:
        xs, ys = [], []
        for _ in range(n):
            t = int(rng.integers(data_cfg.min_len, data_cfg.max_len + 1))
            x = rng.normal(0, 1, (t, d_in))
            prev = np.vstack([np.zeros((1, d_in)), x[:-1]])
            y = np.tanh(x @ a + prev @ b) @ c + rng.normal(0, data_cfg.noise, (t, d_out))
            xs.append(torch.tensor(x, dtype=torch.float32))
            ys.append(torch.tensor(y, dtype=torch.float32))
        return ToyDataset(xs, ys)

    train = draw(data_cfg.num_train)
    valid = draw(data_cfg.num_valid) if data_cfg.num_valid > 0 else None
    return train, valid


class ToyModel(nn.Module):
    """Causal conv (kernel 2) -> tanh -> dropout -> linear; ``(B, T, input_dim) -> (B, T, output_dim)``."""

    def __init__(self, cfg: ToyModelConfig) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cfg.input_dim, cfg.hidden_dim, kernel_size=2)
        self.dropout = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.hidden_dim, cfg.output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(nn.functional.pad(x.transpose(1, 2), (1, 0)))  # left pad: causal
        return self.out(self.dropout(torch.tanh(h.transpose(1, 2))))


class ToyTask(Task):
    """Toy sequence regression (see the module docstring)."""

    name = "toy"
    Config = ToyConfig

    def __init__(self) -> None:
        self.step_delay = 0.0

    def build_model(self, cfg: ToyConfig) -> ToyModel:
        self.step_delay = cfg.data.step_delay
        return ToyModel(cfg.model)

    def build_datasets(self, cfg: ToyConfig) -> tuple[ToyDataset, ToyDataset | None]:
        return make_toy_data(cfg.model, cfg.data)

    def collate(self, items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Pad to ``x (B, T_max, input_dim)``, ``y (B, T_max, output_dim)``, ``lengths (B,)``."""
        xs, ys = zip(*items)
        return {
            "x": nn.utils.rnn.pad_sequence(list(xs), batch_first=True),
            "y": nn.utils.rnn.pad_sequence(list(ys), batch_first=True),
            "lengths": torch.tensor([len(x) for x in xs]),
        }

    def forward_loss(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """Masked mean squared error over the real (non-padded) frames and output dimensions."""
        if self.step_delay > 0 and model.training:
            time.sleep(self.step_delay)
        pred = model(batch["x"])
        mask = (torch.arange(pred.shape[1], device=pred.device)[None, :] < batch["lengths"][:, None]).unsqueeze(-1)
        sq = ((pred - batch["y"]) ** 2) * mask
        loss = sq.sum() / (mask.sum() * pred.shape[-1])
        return loss, {"loss": float(loss.detach())}
