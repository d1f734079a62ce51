"""What every frontend shares: the :class:`Frontend` interface, its config base
:class:`FrontendConfig`, the registry of types by name (:data:`FRONTENDS`, :func:`register_frontend`)
and building one from a YAML config (:func:`build_frontend`, :func:`load_frontend_conf`,
:func:`frontend_from_file`).

Configs follow the toolkit's one rule (:mod:`speechkit.utils.config`, in its strict mode: an int
key takes no ``80.0``, a bool key no Python string): unknown keys, wrong types and bad values raise
:class:`~speechkit.utils.cli.ConfigError` naming the key and the config file.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from speechkit.utils.cli import ConfigError
from speechkit.utils.config import from_dict, read_yaml

# ----------------------------------------------------------------------------- registry / config

#: type name -> Frontend subclass (the STFT and Kaldi families register themselves when
#: :mod:`speechkit.features.frontends` loads, ``world`` when speechkit.features.world does).
FRONTENDS: dict[str, type["Frontend"]] = {}
# types whose module is imported on first use (pyworld/pysptk are slow to import)
_LAZY_TYPES = {"world": "speechkit.features.world"}


def register_frontend(cls: type["Frontend"]) -> type["Frontend"]:
    """Class decorator: register a :class:`Frontend` subclass under ``cls.name``."""
    FRONTENDS[cls.name] = cls
    return cls


def _require(cond: bool, where: str, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{where}: key '{key}' {msg}")


@dataclass
class FrontendConfig:
    """Fields shared by every frontend."""

    type_name: ClassVar[str] = "?"
    #: sample rate in Hz the audio must have (wav.scp entries at another rate are an error, no resampling).
    sample_rate: int = 16000

    def check(self, where: str) -> None:
        """Validate values (types are already checked); raise ConfigError naming the key."""
        _require(self.sample_rate > 0, where, "sample_rate", f"must be positive (Hz), got {self.sample_rate}")

    def to_dict(self) -> dict:
        """The resolved config, ``type`` first (what ``feats.yaml`` stores)."""
        return {"type": self.type_name, **dataclasses.asdict(self)}


def load_frontend_conf(path: str | os.PathLike) -> dict:
    """Read a frontend YAML file into a dict (:func:`speechkit.utils.config.read_yaml`, the rules of
    every config in the toolkit; :func:`build_frontend` checks it).

    Raises:
        FileNotFoundError: no such file.
        ConfigError: not valid YAML (names line and column), or not a mapping.
    """
    return read_yaml(path)


def build_frontend(conf: dict, source: str = "<config>") -> "Frontend":
    """Build the frontend described by ``conf`` (a dict with ``type`` and that type's keys).

    Args:
        conf: e.g. ``{"type": "mfcc", "n_mfcc": 13}``; missing keys take the documented defaults.
        source: the file ``conf`` came from, for error messages.

    Raises:
        ConfigError: missing/unknown ``type``, unknown key, wrong type or bad value (names the key
            and ``source``).
    """
    if not isinstance(conf, dict):
        raise ConfigError(f"{source}: frontend config must be a mapping, got {type(conf).__name__}")
    if "type" not in conf:
        raise ConfigError(f"{source}: missing key 'type' (one of {', '.join(sorted(_known_types()))})")
    typ = conf["type"]
    if typ in _LAZY_TYPES and typ not in FRONTENDS:
        importlib.import_module(_LAZY_TYPES[typ])
    if typ not in FRONTENDS:
        close = difflib.get_close_matches(str(typ), _known_types(), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{source}: key 'type': unknown frontend {typ!r}{hint}; "
                          f"known: {', '.join(sorted(_known_types()))}")
    cls = FRONTENDS[typ]
    # the toolkit's one config rule (speechkit.utils.config), with scalars taken exactly
    cfg = from_dict(cls.Config, {k: v for k, v in conf.items() if k != "type"}, source=source, strict=True)
    cfg.check(source)
    return cls(cfg)


def frontend_from_file(path: str | os.PathLike, overrides: dict | None = None) -> "Frontend":
    """:func:`load_frontend_conf` + ``overrides`` (key -> value) + :func:`build_frontend`."""
    conf = load_frontend_conf(path)
    conf.update(overrides or {})
    return build_frontend(conf, source=str(path))


def _known_types() -> list[str]:
    return sorted(set(FRONTENDS) | set(_LAZY_TYPES))


# ----------------------------------------------------------------------------- base class


def as_samples(samples: Any) -> np.ndarray:
    """Check and convert a waveform to a 1-D float32 numpy array.

    Raises:
        ValueError: not 1-D, empty, or containing NaN/inf.
    """
    torch = sys.modules.get("torch")  # not imported yet: samples cannot be a tensor (frontends import it on use)
    if torch is not None and isinstance(samples, torch.Tensor):
        x = samples.detach().cpu().numpy()
    else:
        x = np.asarray(samples)
    if x.ndim != 1:
        raise ValueError(f"samples must be a 1-D array (num_samples,), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError("samples are empty")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        raise ValueError("samples contain NaN or infinity")
    return x


class Frontend:
    """A feature extractor. Subclasses set ``name``, ``Config`` and implement :meth:`compute`.

    Attributes:
        config: the parsed config dataclass.
        sample_rate: input sample rate (Hz).
        frame_shift: seconds between frames.
        frame_length: seconds of audio per frame (analysis window).
        dim: feature dimension.
    """

    name: ClassVar[str] = "?"
    Config: ClassVar[type[FrontendConfig]] = FrontendConfig

    def __init__(self, config: FrontendConfig):
        self.config = config

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    @property
    def frame_shift(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def frame_length(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def dim(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def num_frames(self, num_samples: int) -> int:  # pragma: no cover - abstract
        """Frames produced for a ``num_samples``-sample input."""
        raise NotImplementedError

    def compute(self, samples: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """Features of one waveform.

        Args:
            samples: float32 ``(N,)`` in [-1, 1] at :attr:`sample_rate` Hz.

        Returns:
            float32 ``(num_frames(N), dim)``.

        Raises:
            ValueError: input not 1-D, empty, non-finite, or too short to give one frame.
        """
        return self.compute(as_samples(samples))

    def compute_batch(self, batch: list[np.ndarray]) -> list[np.ndarray]:
        """Features of several waveforms; same result as calling the frontend on each."""
        return [self(x) for x in batch]

    def to_dict(self) -> dict:
        """The resolved config (``type`` + every parameter), loadable by :func:`build_frontend`."""
        return self.config.to_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()})"
