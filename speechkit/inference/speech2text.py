"""Recognition with a trained streaming RNN-T: built once from an experiment dir, called per utterance.

:class:`Recognizer` (ESPnet2's ``Speech2Text`` habit) is built from an experiment dir
(``speechkit-train rnnt``) and a checkpoint choice (:func:`speechkit.train.checkpoint.resolve_checkpoint`)
with its units (the model config's ``data.units_dir``) and the training set's global CMVN stats, and
turns one utterance's raw features ``(T, D)`` into hypotheses: the features are normalised with those
stats, stacked as in training and decoded (:func:`speechkit.decode.rnnt_search.recognize`) in the mode
and search of its :class:`DecodeOptions` (``oracle``: the given language's softmax; ``lid_free``: one
decoder per language, the LID head choosing; Joshi et al., Interspeech 2021, section 4.2).

A whole data dir in parts (``speechkit-asr-decode``) is :mod:`speechkit.inference.speech2text_dir`.
Errors name the parameters (:class:`DecodeOptions`' fields, ``model_dir``), which a CLI spells as its flags.

::

    rec = Recognizer("exp/rnnt_multisoftmax", options=DecodeOptions(search="beam"))
    out = rec(feats, lang="hi")            # {"lang": "hi", "text": "...", "hyps": {...}, "scores": ...}
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from speechkit.features.cmvn import apply_cmvn
from speechkit.features.io import load_global_cmvn_stats
from speechkit.tasks import load_model
from speechkit.train.checkpoint import resolve_checkpoint
from speechkit.utils.cli import ConfigError
from speechkit.utils.errors import ParameterError

# torch, tasks.rnnt, train.runtime and decode.rnnt_search (torch) are imported where used: DecodeOptions and a
# decode's merge step run without torch (a test checks it).

__all__ = ["DecodeOptions", "Recognizer"]


@dataclass
class DecodeOptions:
    """How ``speechkit-asr-decode`` decodes (its options of the same names).

    Attributes:
        mode: ``oracle`` (the utterance's known language; a vanilla model ignores it) | ``lid_free``
            (multisoftmax_lid models: every language, the LID head picks).
        search: ``greedy`` | ``beam`` (modified beam search, one symbol per frame).
        beam, length_norm: beam width; pick the final hypothesis by log-probability / (1 + symbols).
        max_symbols_per_frame: greedy search: most symbols emitted per encoder frame.
        blank_penalty: subtracted from every joint network's blank logit before the softmax.
        switch_off_tau, switch_off_threshold, switch_off_rule: ``lid_free`` early switch-off
            (Joshi et al. 2021, section 6.3): tau in encoder frames; the threshold in nats for
            ``gap`` (the paper's rule, eq. 1), a posterior for ``posterior`` (the recipe's own
            variant, not in the paper); both None = no switch-off.
        chunk_frames: feature frames fed per streaming chunk; 0 = the whole utterance.
        units_dir, cmvn_stats: overrides of the model config's units dir and global CMVN stats.
        device: ``cpu`` | ``cuda`` | ``auto``.
        batch_size: utterances per batched encoder forward (1 = stream each through its chunks).
        num_threads: torch threads (recorded: the RTF is per thread count).
        show_partial: log the partial hypotheses after every chunk.
    """

    mode: str = "oracle"
    search: str = "greedy"
    beam: int = 4
    length_norm: bool = False
    max_symbols_per_frame: int = 3
    blank_penalty: float = 0.0
    switch_off_tau: int | None = None
    switch_off_threshold: float | None = None
    switch_off_rule: str = "gap"
    chunk_frames: int = 0
    units_dir: str | None = None
    cmvn_stats: str | None = None
    device: str = "cpu"
    batch_size: int = 1
    num_threads: int = 1
    show_partial: bool = False

    def check(self) -> None:
        """Raise ParameterError for a field out of range or fields that do not go together (named by
        the field: ``beam must be >= 1, got 0``; ``--beam`` from ``speechkit-asr-decode``)."""
        if self.beam < 1:
            raise ParameterError("beam", f"`beam` must be >= 1, got {self.beam}")
        if self.max_symbols_per_frame < 1:
            raise ParameterError("max_symbols_per_frame",
                                 f"`max_symbols_per_frame` must be >= 1, got {self.max_symbols_per_frame}")
        if self.chunk_frames < 0:
            raise ParameterError("chunk_frames", f"`chunk_frames` must be >= 0, got {self.chunk_frames}")
        if self.num_threads < 1:
            raise ParameterError("num_threads", f"`num_threads` must be >= 1, got {self.num_threads}")
        if self.batch_size < 1:
            raise ParameterError("batch_size", f"`batch_size` must be >= 1, got {self.batch_size}")
        if self.batch_size > 1 and self.show_partial:
            raise ParameterError("show_partial", "`show_partial` needs `batch_size=1` (a batch is encoded at once, "
                                 "not chunk by chunk)")
        if not abs(self.blank_penalty) < float("inf"):
            raise ParameterError("blank_penalty", f"`blank_penalty` must be a finite number, got {self.blank_penalty}")
        if (self.switch_off_tau is None) != (self.switch_off_threshold is None):
            raise ParameterError("switch_off_tau", "`switch_off_tau` and `switch_off_threshold` go together")
        if self.switch_off_tau is not None:
            if self.mode != "lid_free":
                raise ParameterError("mode", "early switch-off (`switch_off_tau`/`switch_off_threshold`) needs "
                                     "`mode=lid_free`")
            if self.switch_off_tau < 0:
                raise ParameterError("switch_off_tau", f"`switch_off_tau` must be >= 0 frames, got {self.switch_off_tau}")
            if not self.switch_off_threshold >= 0:
                raise ParameterError("switch_off_threshold", "`switch_off_threshold` must be >= 0 (or inf), "
                                     f"got {self.switch_off_threshold}")

    def fingerprint_dict(self) -> dict:
        """The options that change the decoding result or its timing (part fingerprints, decode_stats.json)."""
        return {"mode": self.mode, "search": self.search, "beam": self.beam if self.search == "beam" else None,
                "max_symbols_per_frame": self.max_symbols_per_frame if self.search == "greedy" else None,
                "switch_off_tau": self.switch_off_tau, "switch_off_threshold": self.switch_off_threshold,
                "blank_penalty": self.blank_penalty, "chunk_frames": self.chunk_frames,
                "num_threads": self.num_threads, "units_dir": self.units_dir, "cmvn_stats": self.cmvn_stats,
                # only when set, so that the parts decoded before the option existed stay valid
                **({"length_norm": True} if self.length_norm and self.search == "beam" else {}),
                **({"switch_off_rule": self.switch_off_rule} if self.switch_off_rule != "gap" else {}),
                **({"device": self.device} if self.device != "cpu" else {}),
                **({"batch_size": self.batch_size} if self.batch_size > 1 else {})}


class Recognizer:
    """A trained RNN-T with its units and CMVN stats, ready to decode utterances.

    Args:
        model_dir: the experiment dir ``exp/<tag>`` (or a checkpoint file; see ``resolve_checkpoint``).
        checkpoint: ``None`` (best.pt, else the latest), ``"best"``, ``"latest"``, ``"avgN"``, a
            checkpoint name or path.
        options: the :class:`DecodeOptions` (default: the defaults, with ``**kwargs`` replaced).
        **kwargs: :class:`DecodeOptions` fields (``blank_penalty=2.5``, ``mode="lid_free"`` ...).

    Attributes:
        model_dir, checkpoint: the experiment dir as given and the checkpoint file loaded.
        model, cfg: the model (eval mode, on ``options.device``) and its task config.
        units: its :class:`~speechkit.text.units.MultilingualUnits`; cmvn: the ``(2, D+1)`` global stats.
        options: the :class:`DecodeOptions`; device: the torch device.

    Raises:
        FileNotFoundError: no such experiment or checkpoint, units or CMVN stats.
        ConfigError: units that do not fit the model's softmax (names the units dir); ParameterError:
            ``lid_free`` with a model without an LID head; ``cuda`` without a CUDA device.
        CheckpointError, DataError: an unreadable checkpoint or stats.
    """

    def __init__(self, model_dir: str | os.PathLike, checkpoint: str | None = None, *,
                 options: DecodeOptions | None = None, **kwargs):
        import torch

        from speechkit.tasks.rnnt import RNNTTask
        from speechkit.train.runtime import resolve_device

        options = options or DecodeOptions()
        self.options = dataclasses.replace(options, **kwargs) if kwargs else options
        self.model_dir = model_dir
        self.checkpoint = resolve_checkpoint(model_dir, checkpoint, param="model_dir")
        task = RNNTTask()
        task.load_init = False
        self.model, self.cfg = load_model(self.checkpoint, task=task)
        blank_penalty = self.options.blank_penalty
        if blank_penalty:
            # logit_blank - P before the log-softmax == the output layer's blank bias lowered by P
            m = self.model
            joints = [m.joint_net] if m.config.shared_softmax else list(m.joint_nets.values())
            with torch.no_grad():
                for j in joints:
                    j.out.bias[self.model.blank] -= blank_penalty
        if self.options.units_dir is not None:
            self.cfg.data.units_dir = self.options.units_dir
        self.units = task.units(self.cfg)
        for lang in self.model.languages:
            if lang not in self.units.inventories:
                raise ConfigError(f"{self.cfg.data.units_dir}: no units for the model's language '{lang}'")
            if not self.model.config.shared_softmax and len(self.units[lang]) != self.model.vocab_size(lang):
                raise ConfigError(f"{self.cfg.data.units_dir}/{lang}: {len(self.units[lang])} units, the model's "
                                  f"softmax has {self.model.vocab_size(lang)} (not the units it was trained with)")
        if self.model.config.shared_softmax and len(self.units.union) != self.model.vocab_size():
            raise ConfigError(f"{self.cfg.data.units_dir}/union: {len(self.units.union)} units, the model's "
                              f"softmax has {self.model.vocab_size()}")
        path = self.options.cmvn_stats or self.cfg.data.cmvn_stats or str(self.cfg.data.train_dir)
        self.cmvn_source = Path(path)  # what the stats were read from (a decode part records its content)
        self.cmvn = load_global_cmvn_stats(path)
        # union id -> languages whose inventories hold it (vanilla: language of a hypothesis)
        self._union_langs: dict[int, list[str]] = {}
        if self.model.config.shared_softmax:
            reserved = 3 if self.units.unit_type != "bpe" else 2
            for lang in self.model.languages:
                for i, u in enumerate(self.units.to_union[lang]):
                    if i >= reserved:
                        self._union_langs.setdefault(u, []).append(lang)
        self.device = resolve_device(self.options.device, "`device`")
        self.model.to(self.device)
        if self.options.mode == "lid_free" and not self.model.has_lid:
            raise ParameterError("mode", f"`mode=lid_free` needs a multisoftmax_lid model; {model_dir} is "
                                 f"{self.model.config.variant}")
        self.model.eval()

    @property
    def needs_language(self) -> bool:
        """True when every utterance needs its language (``oracle`` mode, not a vanilla model)."""
        return self.options.mode == "oracle" and self.model.config.variant != "vanilla"

    def hypothesis_language(self, union_ids: list[int]) -> str | None:
        """Vanilla models: the language whose units make up most of the hypothesis (None if no unit
        tells; ties go to the first language in model order)."""
        counts = {lang: 0 for lang in self.model.languages}
        for t in union_ids:
            for lang in self._union_langs.get(int(t), ()):
                counts[lang] += 1
        best = max(counts.values()) if counts else 0
        if best == 0:
            return None
        return next(lang for lang in self.model.languages if counts[lang] == best)

    def decode_text(self, tokens: list[int], lang: str | None) -> str:
        """The text of unit ids ``tokens`` of language ``lang``'s softmax (the union's for a shared one)."""
        if self.model.config.shared_softmax:
            return self.units.union.decode(tokens)
        return self.units[lang].decode(tokens)

    def decode_config(self, frame_shift: float = 0.01):
        """The :class:`~speechkit.decode.rnnt_search.DecodeConfig` of the options and the model's
        stacking; ``frame_shift``: seconds per feature frame (for the RTF)."""
        from speechkit.decode.rnnt_search import DecodeConfig

        o, d = self.options, self.cfg.data
        return DecodeConfig(mode=o.mode, method=o.search, beam=o.beam, length_norm=o.length_norm,
                            max_symbols_per_frame=o.max_symbols_per_frame, tau=o.switch_off_tau,
                            s_th=o.switch_off_threshold, switch_off_rule=o.switch_off_rule,
                            chunk_frames=o.chunk_frames, num_stack=d.num_stack, stack_stride=d.stack_stride,
                            frame_shift=frame_shift)

    def prepare(self, feats):
        """Raw features ``(T, D)`` (numpy) -> the CMVN-normalised float32 tensor the model decodes."""
        import torch

        m = apply_cmvn(feats, self.cmvn, norm_vars=self.cfg.data.norm_vars)
        return torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32))

    def result(self, r) -> dict[str, Any]:
        """A :class:`~speechkit.decode.rnnt_search.RecognitionResult` as ``results.jsonl`` writes it:
        ``lang`` (chosen), ``text``, ``hyps`` (every decoder's text), ``scores``, ``lid_posteriors``,
        ``decoder_frames``, ``switched_off_at``, frame counts, seconds, ``rtf``,
        ``active_decoders_per_frame``."""
        chosen = self.hypothesis_language(r.tokens) if self.model.config.shared_softmax else r.language
        return {
            "lang": chosen,
            "text": self.decode_text(r.tokens, r.language),
            "hyps": {k: self.decode_text(v, None if k == "union" else k) for k, v in r.hyps.items()},
            "scores": r.scores,
            "lid_posteriors": r.lid_posteriors,
            "decoder_frames": r.decoder_frames,
            "switched_off_at": r.switched_off_at,
            "num_frames": r.num_frames,
            "num_input_frames": r.num_input_frames,
            "audio_seconds": r.audio_seconds,
            "decode_seconds": r.decode_seconds,
            "rtf": r.rtf,
            "active_decoders_per_frame": r.active_decoders_per_frame,
        }

    def __call__(self, feats, lang: str | None = None, *, frame_shift: float = 0.01,
                 on_partial: Callable[[dict[str, list[int]]], None] | None = None) -> dict[str, Any]:
        """Decode one utterance's raw features ``(T, D)`` (numpy; normalised here).

        Args:
            lang: its language (``oracle`` mode; ignored by a vanilla model).
            frame_shift: seconds per feature frame (for the RTF).
            on_partial: called with the partial unit ids per decoder after every chunk.

        Returns:
            :meth:`result`'s dict (``text`` the hypothesis, ``lang`` the chosen language).

        Raises:
            ValueError: fewer frames than one stacked frame ('too short'), a NaN or infinite value.
        """
        from speechkit.decode.rnnt_search import recognize

        r = recognize(self.model, self.prepare(feats), self.decode_config(frame_shift), lang=lang,
                      on_partial=on_partial)
        return self.result(r)

    def batch(self, feats: Sequence, langs: Sequence | None = None, *,
              frame_shift: float = 0.01) -> list[dict[str, Any] | None]:
        """Several utterances' (prepared, :meth:`prepare`) features with one batched encoder forward:
        :meth:`result` per utterance, None for one too short to decode (same hypotheses as one at a time)."""
        from speechkit.decode.rnnt_search import recognize_batch

        results = recognize_batch(self.model, list(feats), self.decode_config(frame_shift), langs=langs)
        return [None if r is None else self.result(r) for r in results]
