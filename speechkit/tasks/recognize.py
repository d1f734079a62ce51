"""Recognition with a trained streaming RNN-T: an importable inference class (ESPnet2's ``Speech2Text``).

:class:`Recognizer` is built from an experiment dir (``speechkit-train rnnt``) and a checkpoint
choice (:func:`speechkit.train.checkpoint.resolve_checkpoint`) with its units (the model config's
``data.units_dir``) and the training set's global CMVN stats, and turns one utterance's raw
features ``(T, D)`` into hypotheses: the features are normalised with those stats, stacked as in
training and decoded (:func:`speechkit.decode.rnnt_search.recognize`) in the mode and search of
its :class:`DecodeOptions` (``oracle``: the given language's softmax; ``lid_free``: one decoder per
language, the LID head choosing; Joshi et al., Interspeech 2021, section 4.2).

The decoding of a whole data dir behind ``speechkit-asr-decode`` is here too: the utterances
(C-sorted) are split round-robin into parts, :func:`decode_part` decodes one part into
``OUT_DIR/parts`` (skipped while its fingerprint -- options, checkpoint, utterances, their
feats.scp entries and languages -- is unchanged) and :func:`merge_parts` checks every part is
current and writes ``text``, ``utt2lang``, ``lid_posteriors``, ``results.jsonl`` and
``decode_stats.json``. Errors are named as the command line spells its options.

::

    rec = Recognizer("exp/rnnt_multisoftmax", options=DecodeOptions(search="beam"))
    out = rec(feats, lang="hi")            # {"lang": "hi", "text": "...", "hyps": {...}, "scores": ...}
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from speechkit.utils.cli import ConfigError, finite_float, nonnegative_float_or_inf
from speechkit.utils.fileio import DataError, atomic_write, read_table

__all__ = ["DecodeOptions", "add_decode_options", "Recognizer", "read_utterances", "split_parts", "part_fingerprint",
           "part_paths", "part_current", "check_decode_paths", "decode_part", "merge_parts", "decode_data_dir"]

log = logging.getLogger(__name__)


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
        """Raise ConfigError for an option out of range or options that do not go together (named
        as the command line spells them: ``--beam must be >= 1, got 0``)."""
        if self.beam < 1:
            raise ConfigError(f"--beam must be >= 1, got {self.beam}")
        if self.max_symbols_per_frame < 1:
            raise ConfigError(f"--max-symbols-per-frame must be >= 1, got {self.max_symbols_per_frame}")
        if self.chunk_frames < 0:
            raise ConfigError(f"--chunk-frames must be >= 0, got {self.chunk_frames}")
        if self.num_threads < 1:
            raise ConfigError(f"--num-threads must be >= 1, got {self.num_threads}")
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.batch_size > 1 and self.show_partial:
            raise ConfigError("--show-partial needs --batch-size 1 (a batch is encoded at once, not chunk by chunk)")
        if not abs(self.blank_penalty) < float("inf"):
            raise ConfigError(f"--blank-penalty must be a finite number, got {self.blank_penalty}")
        if (self.switch_off_tau is None) != (self.switch_off_threshold is None):
            raise ConfigError("--switch-off-tau and --switch-off-threshold go together")
        if self.switch_off_tau is not None:
            if self.mode != "lid_free":
                raise ConfigError("early switch-off (--switch-off-tau/--switch-off-threshold) needs --lid-free")
            if self.switch_off_tau < 0:
                raise ConfigError(f"--switch-off-tau must be >= 0 frames, got {self.switch_off_tau}")
            if not self.switch_off_threshold >= 0:
                raise ConfigError(f"--switch-off-threshold must be >= 0 (or inf), got {self.switch_off_threshold}")

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

    @classmethod
    def from_args(cls, args) -> "DecodeOptions":
        """The options of parsed arguments (an ``argparse.Namespace`` of :func:`add_decode_options`'
        parser: ``--lid-free`` gives mode ``lid_free``, else ``oracle``; the other fields by their names)."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "mode"]  # the options' dest names
        return cls(mode="lid_free" if args.lid_free else "oracle", **{k: getattr(args, k) for k in names})

    def to_argv(self) -> list[str]:
        """The command-line options that give these options back (:func:`add_decode_options`, then
        :meth:`from_args`): every field, so that a part decoded by a child process (``--job J``)
        has the fingerprint the merge checks. ``--lid-free`` | ``--oracle-lid``, a flag per true
        bool field, ``--<field> <value>`` per other field that is not None (floats as ``str`` gives
        them: ``inf``, and exactly the same number back).

        Raises:
            ValueError: a mode other than ``oracle`` / ``lid_free``.
        """
        modes = {"oracle": "--oracle-lid", "lid_free": "--lid-free"}
        if self.mode not in modes:
            raise ValueError(f"mode must be one of {', '.join(modes)}, got {self.mode!r}")
        argv = [modes[self.mode]]
        for f in dataclasses.fields(self):
            value, option = getattr(self, f.name), "--" + f.name.replace("_", "-")
            if f.name == "mode" or value is None or value is False:
                continue
            argv += [option] if value is True else [option, str(value)]
        return argv


def add_decode_options(parser, *, parts: bool = True) -> None:
    """Add the options that fill :class:`DecodeOptions` (``--units-dir`` ... ``--num-threads``, read
    back with :meth:`DecodeOptions.from_args`) to ``parser`` (an ``argparse.ArgumentParser``), as
    ``speechkit-asr-decode`` has them.

    Args:
        parts: also the options of :func:`decode_data_dir`'s parts, in their places in the help:
            ``--nj``, ``--job`` | ``--merge-only``, ``--max-jobs`` and ``--force``.
    """
    p = parser
    p.add_argument("--units-dir", default=None, help="units (speechkit-make-units --per-language) (default: the "
                   "model config's data.units_dir)")
    p.add_argument("--cmvn-stats", default=None, help="global CMVN stats: cmvn_global.ark, a cmvn.scp or a data "
                   "dir (default: the model config's data.cmvn_stats, else <data.train_dir>/cmvn_global.ark, "
                   "else <data.train_dir>/cmvn.scp)")
    p.add_argument("--search", choices=("greedy", "beam"), default="greedy",
                   help="greedy search, or modified beam search (one symbol per frame) (default: greedy)")
    p.add_argument("--beam", type=int, default=4, help="beam width for --search beam (default: 4)")
    p.add_argument("--length-norm", action="store_true",
                   help="--search beam: final hypothesis by log-probability / (1 + symbols) (icefall's "
                        "default) instead of log-probability (default: off)")
    p.add_argument("--max-symbols-per-frame", type=int, default=3,
                   help="greedy search: most symbols emitted per encoder frame (default: 3)")
    p.add_argument("--blank-penalty", type=finite_float, default=0.0, metavar="P",
                   help="subtract P from the blank logit of every joint network before the softmax "
                        "(icefall's decoding option against deletions; tune it on dev) (default: 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lid-free", action="store_true",
                   help="multisoftmax_lid: decode every language, pick by the LID head")
    g.add_argument("--oracle-lid", action="store_true",
                   help="decode with the utterance's known language from DATA_DIR/utt2lang (the default)")
    p.add_argument("--switch-off-tau", type=int, default=None, metavar="T",
                   help="--lid-free early switch-off: every decoder runs the first T encoder frames "
                        "(30 ms each with the paper's stacking; the paper's minimum wait time tau, "
                        "section 6.3, counted in frames)")
    p.add_argument("--switch-off-threshold", type=nonnegative_float_or_inf, default=None, metavar="S",
                   help="--lid-free early switch-off: stop decoder l when its cumulative LID log-posterior "
                        "(eq. 1) is more than S nats below the best running language's ('inf' = never; "
                        "the paper's s_th); with --switch-off-rule posterior: when its running average "
                        "LID posterior is below S")
    p.add_argument("--switch-off-rule", choices=("gap", "posterior"), default="gap",
                   help="early switch-off rule: gap (the paper's, section 6.3, eq. 1: cumulative "
                        "log-posterior gap in nats; the default) | posterior (the recipe's own variant, "
                        "not in the paper: running average posterior below S)")
    p.add_argument("--chunk-frames", type=int, default=0, metavar="N",
                   help="feature frames fed per streaming chunk; 0 = whole utterance (default: 0)")
    p.add_argument("--show-partial", action="store_true", help="log the partial hypotheses after every chunk")
    if parts:
        p.add_argument("--nj", type=int, default=1, help="number of parts decoded in parallel processes (default: 1)")
        j = p.add_mutually_exclusive_group()
        j.add_argument("--job", type=int, metavar="J", help="decode part J (1..N) only (for run.pl / slurm.pl)")
        j.add_argument("--merge-only", action="store_true", help="only merge the N finished parts into OUT_DIR")
        p.add_argument("--max-jobs", type=int, default=None, metavar="M",
                       help="without --job: run at most M parts at once (default: --nj)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="where the model runs: cpu (default), cuda, or auto (cuda when there is one)")
    p.add_argument("--batch-size", type=int, default=1, metavar="B",
                   help="utterances per batched encoder forward (default: 1 = stream each utterance through "
                        "its chunks). The hypotheses are the same (the encoder is causal); on a GPU a batch "
                        "saves most of the encoder's time. Not with --show-partial")
    p.add_argument("--num-threads", type=int, default=1, metavar="T",
                   help="torch threads per job (default: 1, so the RTF is that of one core)")
    if parts:
        p.add_argument("--force", action="store_true", help="decode parts again even if they are current")


class Recognizer:
    """A trained RNN-T with its units and CMVN stats, ready to decode utterances.

    Args:
        model_dir: the experiment dir ``exp/<tag>`` (or a checkpoint file; see ``resolve_checkpoint``).
        checkpoint: ``None`` (best.pt, else the latest), ``"best"``, ``"latest"``, ``"avgN"``, a
            checkpoint name or path.
        option: the command-line option ``model_dir`` came from (named in the errors), or None.
        options: the :class:`DecodeOptions` (default: the defaults, with ``**kwargs`` replaced).
        **kwargs: :class:`DecodeOptions` fields (``blank_penalty=2.5``, ``mode="lid_free"`` ...).

    Attributes:
        model_dir, checkpoint: the experiment dir as given and the checkpoint file loaded.
        model, cfg: the model (eval mode, on ``options.device``) and its task config.
        units: its :class:`~speechkit.text.units.MultilingualUnits`; cmvn: the ``(2, D+1)`` global stats.
        options: the :class:`DecodeOptions`; device: the torch device.

    Raises:
        FileNotFoundError: no such experiment or checkpoint, units or CMVN stats.
        ConfigError: units that do not fit the model's softmax (names the units dir); ``lid_free``
            with a model without an LID head; ``cuda`` without a CUDA device.
        CheckpointError, DataError: an unreadable checkpoint or stats.
    """

    def __init__(self, model_dir: str | os.PathLike, checkpoint: str | None = None, *, option: str | None = None,
                 options: DecodeOptions | None = None, **kwargs):
        import torch

        from speechkit.tasks import load_model
        from speechkit.tasks.rnnt import RNNTTask, load_global_cmvn
        from speechkit.train.checkpoint import resolve_checkpoint
        from speechkit.train.trainer import resolve_device

        options = options or DecodeOptions()
        self.options = dataclasses.replace(options, **kwargs) if kwargs else options
        self.model_dir = model_dir
        self.checkpoint = resolve_checkpoint(model_dir, checkpoint, option=option)
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
        self.cmvn = load_global_cmvn(path)
        # union id -> languages whose inventories hold it (vanilla: language of a hypothesis)
        self._union_langs: dict[int, list[str]] = {}
        if self.model.config.shared_softmax:
            reserved = 3 if self.units.unit_type != "bpe" else 2
            for lang in self.model.languages:
                for i, u in enumerate(self.units.to_union[lang]):
                    if i >= reserved:
                        self._union_langs.setdefault(u, []).append(lang)
        self.device = resolve_device(self.options.device, "--device")
        self.model.to(self.device)
        if self.options.mode == "lid_free" and not self.model.has_lid:
            raise ConfigError(f"--lid-free needs a multisoftmax_lid model; {model_dir} is "
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
        import numpy as np
        import torch

        from speechkit.features.cmvn import apply_cmvn

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


# ----------------------------------------------------------------------------------------------- parts


def read_utterances(data_dir: str | os.PathLike) -> tuple[list[str], dict[str, str]]:
    """The C-sorted utterance ids of ``data_dir/feats.scp`` and its table.

    Raises:
        FileNotFoundError: no feats.scp; DataError: an empty one.
    """
    scp = Path(data_dir) / "feats.scp"
    if not scp.is_file():
        raise FileNotFoundError(f"{scp}: no features (run utils/make_feats.sh / speechkit-compute-feats)")
    table = read_table(scp)
    if not table:
        raise DataError(f"{scp}: no utterances")
    return sorted(table, key=lambda u: u.encode("utf-8")), table


def split_parts(utts: list[str], nj: int) -> list[list[str]]:
    """Round-robin parts of the C-sorted utterances (similar lengths in every part)."""
    return [utts[j::nj] for j in range(nj)]


def part_fingerprint(options: DecodeOptions, ckpt: Path, data_dir: str | os.PathLike, utts: list[str],
                     feats: dict[str, str]) -> str:
    """sha256 of what a part's result depends on: the options, the checkpoint (path, size, mtime),
    each utterance's feats.scp entry and language (``data_dir/utt2lang``), and the size and
    modification time of every feature file those entries read (an ark rewritten in place).

    The CMVN stats and the units dir the decode read (options or the model's config) are checked
    by content separately (:func:`input_hashes`, recorded in the part's ``done.J.json``).
    """
    from speechkit.features.io import scp_entry_file

    st = ckpt.resolve().stat()
    h = hashlib.sha256()
    h.update(json.dumps({"options": options.fingerprint_dict(), "checkpoint": str(ckpt.resolve()),
                         "size": st.st_size, "mtime_ns": st.st_mtime_ns}, sort_keys=True).encode())
    lang_file = Path(data_dir) / "utt2lang"
    langs = read_table(lang_file) if lang_file.is_file() else {}
    arks: dict[str, None] = {}
    for u in utts:
        h.update(f"{u} {feats[u]} {langs.get(u, '')}\n".encode())
        arks[scp_entry_file(feats[u])] = None
    for a in arks:
        try:
            st = os.stat(a)
            h.update(f"{a} {st.st_size} {st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{a} missing\n".encode())
    return h.hexdigest()


def input_hashes(cmvn_source: str | os.PathLike, units_dir: str | os.PathLike | None) -> dict[str, str]:
    """SHA-256 of the content of the CMVN stats a decode read (a stats file; or a data dir's
    ``cmvn_global.ark`` and ``cmvn.scp``; a ``.scp`` with the arks it reads) and of every file of its
    units dir, keyed by path: a part is
    current only while these are unchanged (:func:`part_current`)."""
    from speechkit.features.io import scp_files

    out: dict[str, str] = {}
    src = Path(cmvn_source)
    files = [src] if src.is_file() else [p for p in (src / "cmvn_global.ark", src / "cmvn.scp") if p.is_file()]
    files += [a for p in files if p.suffix == ".scp" for a in scp_files(p)]  # the arks a cmvn.scp reads
    if units_dir is not None and Path(units_dir).is_dir():
        files += sorted(p for p in Path(units_dir).rglob("*") if p.is_file())
    for p in files:
        out[str(p.resolve())] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def part_paths(out_dir: str | os.PathLike, job: int) -> tuple[Path, Path]:
    """``OUT_DIR/parts/results.J.jsonl`` and ``OUT_DIR/parts/done.J.json``."""
    out_dir = Path(out_dir)
    return out_dir / "parts" / f"results.{job}.jsonl", out_dir / "parts" / f"done.{job}.json"


def part_current(out_dir: str | os.PathLike, job: int, fp: str) -> bool:
    """True if part ``job`` is complete, was decoded with fingerprint ``fp``, and the CMVN stats and
    units it read (``inputs`` of its ``done.J.json``: path -> SHA-256) still hold the same content."""
    res, done = part_paths(out_dir, job)
    if not (res.is_file() and done.is_file()):
        return False
    try:
        rec = json.loads(done.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if rec.get("fingerprint") != fp or "inputs" not in rec:
        return False
    for path, digest in rec["inputs"].items():
        try:
            if hashlib.sha256(Path(path).read_bytes()).hexdigest() != digest:
                return False
        except OSError:
            return False
    return True


def _check_finite(m, utt: str, data_dir: Path, entry: str) -> None:
    """Raise DataError naming the utterance and its feats.scp entry if ``m`` holds a NaN or infinity
    (decoded, it would give an empty hypothesis counted as decoded)."""
    import numpy as np

    finite = np.isfinite(m)
    if not finite.all():
        t, k = np.argwhere(~finite)[0]
        raise DataError(f"{data_dir}/feats.scp: '{utt}' ({entry}): frame {t} (of {m.shape[0]}) has a non-finite "
                        f"value ({m[t, k]} in dimension {k}); fix or remove the utterance (nothing merged)")


def _finite_record(rec: dict, ckpt: Path) -> dict:
    """``rec`` if its scores and LID posteriors are finite; else DataError naming the utterance."""
    values = {f"score of {k}": v for k, v in rec["scores"].items()}
    values.update({f"LID posterior of {k}": v for k, v in (rec["lid_posteriors"] or {}).items()})
    for what, v in values.items():
        if not math.isfinite(v):
            raise DataError(f"{ckpt}: utterance '{rec['utt']}': {what} is {v} from finite features (are the "
                            "model's weights finite?); nothing merged")
    return rec


def _dumps(obj) -> str:
    """JSON without NaN/Infinity (not JSON; strict readers such as jq refuse them)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


#: files of a data dir or a units dir: an OUT_DIR holding one is refused (a decode writes text and utt2lang there)
_NOT_A_DECODE_DIR = ("utt2spk", "wav.scp", "feats.scp", "segments", "languages.txt")
#: what a merge writes into OUT_DIR besides decode_stats.json: found without a decode's own files, refused
_DECODE_TABLES = ("text", "utt2lang", "lid_posteriors", "results.jsonl")


def _decode_output(out_dir: Path) -> bool:
    """``out_dir`` holds a decode's own files: a merge's ``decode_stats.json`` or a part's ``parts/done.J.json``."""
    return (out_dir / "decode_stats.json").is_file() or any((out_dir / "parts").glob("done.*.json"))


def check_decode_paths(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                       out_dir: str | os.PathLike, options: DecodeOptions, *, option: str | None = None) -> None:
    """OUT_DIR must not be, contain or lie inside DATA_DIR, the checkpoint (or EXP/checkpoints),
    --units-dir or --cmvn-stats, nor be or contain the experiment dir EXP (EXP/decode_test is
    ESPnet's layout, and fine), nor hold a data dir's or units dir's files (``utt2spk``, ``wav.scp``,
    ``feats.scp``, ``segments``, ``languages.txt``: a decode would replace its ``text`` -- e.g. the
    model's own training dir), nor hold ``text``, ``utt2lang``, ``lid_posteriors`` or ``results.jsonl``
    without a decode's own ``decode_stats.json`` or ``parts/done.J.json`` (a reference kept on its own:
    refused, not backed up, as a data dir is); a --device that cannot run is refused before any work.

    Raises:
        FileNotFoundError: no such experiment or checkpoint. OutputOverlapError (a ValueError):
        names OUT_DIR and the input; ConfigError: --device.
    """
    from speechkit.train.checkpoint import resolve_checkpoint
    from speechkit.utils.outputs import OutputOverlapError, check_output_dir

    md = Path(model_dir)
    exp = md if md.is_dir() else None
    check_output_dir(out_dir, option="OUT_DIR",
                     inputs={"DATA_DIR": data_dir,
                             "the checkpoint dir": exp / "checkpoints" if exp is not None else None,
                             "the checkpoint": resolve_checkpoint(model_dir, checkpoint, option=option),
                             "--units-dir": options.units_dir, "--cmvn-stats": options.cmvn_stats},
                     experiment_dirs={"--model-dir": exp})
    held = [n for n in _NOT_A_DECODE_DIR if (Path(out_dir) / n).exists()]
    if held:
        raise OutputOverlapError(
            f"OUT_DIR {out_dir} holds {held[0]}: it is a data dir or a units dir, whose tables (text, utt2lang) "
            "a decode would replace; choose another output dir (ESPnet's layout: EXP/decode_<set>)")
    tables = [n for n in _DECODE_TABLES if (Path(out_dir) / n).exists()]
    if tables and not _decode_output(Path(out_dir)):  # a reference text/utt2lang kept on their own (case 5)
        raise OutputOverlapError(
            f"OUT_DIR {out_dir} holds {', '.join(tables)} that no decode wrote (no decode_stats.json nor "
            "parts/done.J.json): a decode would replace them; choose another output dir (ESPnet's layout: "
            "EXP/decode_<set>)")
    if options.device != "cpu":  # the CPU always runs (and needs no torch import: a merge step stays light)
        from speechkit.train.trainer import resolve_device

        resolve_device(options.device, "--device")


def decode_part(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                out_dir: str | os.PathLike, options: DecodeOptions, job: int, nj: int, *, option: str | None = None,
                force: bool = False, logger: logging.Logger = log, log_file: str | os.PathLike | None = None) -> None:
    """Decode part ``job`` of ``nj`` of ``data_dir`` into ``out_dir/parts`` (skipped when current,
    unless ``force``).

    Args:
        model_dir, checkpoint, option: as :class:`Recognizer`'s.
        logger: where the part's log lines go; log_file: also write them there (truncated first).

    Raises:
        DataError: a feature matrix with a NaN or infinite value (names the utterance, its
            feats.scp entry and the frame), a non-finite score (names the utterance), features of
            another dimension than the model's input; FileNotFoundError: no utt2lang where the
            mode needs it; :class:`Recognizer`'s errors.
    """
    if log_file is None:
        return _decode_part(model_dir, checkpoint, data_dir, out_dir, options, job, nj, option, force, logger)
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    try:
        _decode_part(model_dir, checkpoint, data_dir, out_dir, options, job, nj, option, force, logger)
    finally:
        logger.removeHandler(handler)
        handler.close()


def _decode_part(model_dir, checkpoint, data_dir, out_dir, options: DecodeOptions, job: int, nj: int,
                 option: str | None, force: bool, logger: logging.Logger) -> None:
    import torch
    from tqdm import tqdm

    from speechkit.decode.rnnt_search import recognize
    from speechkit.features.io import FeatureReader
    from speechkit.train.checkpoint import resolve_checkpoint

    torch.set_num_threads(options.num_threads)
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    ckpt = resolve_checkpoint(model_dir, checkpoint, option=option)
    utts_all, feats_table = read_utterances(data_dir)
    utts = split_parts(utts_all, nj)[job - 1]
    fp = part_fingerprint(options, ckpt, data_dir, utts, feats_table)
    if not force and part_current(out_dir, job, fp):
        logger.info("part %d of %d is complete and current; nothing to do", job, nj)
        return
    # the checkpoint fingerprinted (an absolute path is never read as 'best' / 'latest' / 'avgN')
    recognizer = Recognizer(model_dir, str(ckpt.resolve()), option=option, options=options)
    model, cfg = recognizer.model, recognizer.cfg
    need_lang = recognizer.needs_language
    utt2lang = {}
    lang_file = data_dir / "utt2lang"
    if lang_file.is_file():
        utt2lang = read_table(lang_file)
    elif need_lang:
        raise FileNotFoundError(f"{lang_file}: missing; --oracle-lid decoding of a {model.config.variant} model "
                                f"needs every utterance's language (or use --lid-free with a multisoftmax_lid model)")
    reader = FeatureReader(data_dir, cmvn="none")
    if reader.dim * cfg.data.num_stack != model.config.input_dim:
        raise DataError(f"{data_dir}/feats.scp: {reader.dim}-dim features x num_stack {cfg.data.num_stack} != "
                        f"the model's input_dim {model.config.input_dim} (another frontend?)")
    frame_shift = reader.frame_shift or 0.01
    o = options
    logger.info("part %d/%d: %d utterances; model %s (%s, %s) from %s; mode %s, %s search%s%s, %d thread(s), "
                "%s, encoder batch %d",
                job, nj, len(utts), model_dir, model.config.variant, " ".join(model.languages), ckpt.name, o.mode,
                o.search, f" beam {o.beam}" if o.search == "beam" else "",
                f", switch-off tau={o.switch_off_tau} s_th={o.switch_off_threshold}"
                if o.switch_off_tau is not None else "", o.num_threads, recognizer.device, o.batch_size)
    records = []
    dec_s = audio_s = 0.0

    def too_short(rec: dict, x) -> dict:
        return {**rec, "skipped": f"too short: {x.size(0)} frames < num_stack {cfg.data.num_stack}"}

    def add(rec: dict, res: dict) -> None:
        nonlocal dec_s, audio_s
        records.append(_finite_record({**rec, **res}, ckpt))
        dec_s += res["decode_seconds"]
        audio_s += res["audio_seconds"]

    pending: list[tuple[dict, str | None, Any]] = []  # the batch being gathered

    def flush() -> None:
        if not pending:
            return
        results = recognizer.batch([x for _, _, x in pending], [lang for _, lang, _ in pending],
                                   frame_shift=frame_shift)
        for (rec, _, x), res in zip(pending, results):
            if res is None:
                records.append(too_short(rec, x))
            else:
                add(rec, res)
        pending.clear()

    dcfg = recognizer.decode_config(frame_shift)
    bar = tqdm(utts, desc=f"decode {job}/{nj}", unit="utt", file=sys.stderr, disable=None, leave=False)
    for utt in bar:
        rec = {"utt": utt, "ref_lang": utt2lang.get(utt)}
        lang = None
        if need_lang:
            lang = utt2lang.get(utt)
            if lang is None:
                records.append({**rec, "skipped": "no language in utt2lang"})
                continue
            if lang not in model.languages:
                records.append({**rec, "skipped": f"language '{lang}' not in the model"})
                continue
        m = reader.raw(utt)
        _check_finite(m, utt, data_dir, feats_table[utt])
        x = recognizer.prepare(m)
        if o.batch_size > 1:
            pending.append((rec, lang, x))
            if len(pending) == o.batch_size:
                flush()
            continue
        on_partial = None
        if o.show_partial:
            def on_partial(p, utt=utt):
                logger.info("%s partial: %s", utt, " | ".join(
                    f"{k}: {recognizer.decode_text(v, k if k != 'union' else None)}" for k, v in p.items()))
        try:
            r = recognize(model, x, dcfg, lang=lang, on_partial=on_partial)
        except ValueError as e:
            if "too short" not in str(e):
                raise
            records.append(too_short(rec, x))
            continue
        add(rec, recognizer.result(r))
    flush()
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    bar.close()
    n_ok = sum(1 for r in records if "skipped" not in r)
    logger.info("part %d/%d: decoded %d of %d utterances, %.1f s of audio in %.1f s: RTF %.4f on %d thread(s)",
                job, nj, n_ok, len(utts), audio_s, dec_s, dec_s / audio_s if audio_s else float("nan"),
                o.num_threads)
    res_path, done_path = part_paths(out_dir, job)
    res_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(res_path) as f:
        for r in records:
            f.write(_dumps(r) + "\n")
    with atomic_write(done_path) as f:
        f.write(_dumps({"fingerprint": fp, "job": job, "nj": nj, "checkpoint": str(ckpt), "utterances": len(utts),
                        "decoded": n_ok, "decode_seconds": dec_s, "audio_seconds": audio_s,
                        "inputs": input_hashes(recognizer.cmvn_source, cfg.data.units_dir)}) + "\n")


def merge_parts(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                out_dir: str | os.PathLike, options: DecodeOptions, nj: int, *, option: str | None = None,
                logger: logging.Logger = log) -> tuple[dict, str]:
    """Check every part is current, then write text, utt2lang, lid_posteriors, results.jsonl and
    decode_stats.json (warnings for skipped utterances and hypotheses without language go to ``logger``).

    Returns:
        The stats (``decode_stats.json``) and a one-line summary (``OUT_DIR: decoded N of M ...``).

    Raises:
        DataError: a part is missing or stale (names it); a part holding a non-finite score (names
            it and the utterance); no utterance decoded.
    """
    from speechkit.train.checkpoint import resolve_checkpoint

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    ckpt = resolve_checkpoint(model_dir, checkpoint, option=option)
    utts_all, feats_table = read_utterances(data_dir)
    parts = split_parts(utts_all, nj)
    records = []
    for job, utts in enumerate(parts, 1):
        fp = part_fingerprint(options, ckpt, data_dir, utts, feats_table)
        if not part_current(out_dir, job, fp):
            raise DataError(f"{out_dir}/parts: part {job} of {nj} is missing or was decoded with other inputs "
                            f"(see {out_dir}/log/decode.{job}.log); nothing merged")
        with open(part_paths(out_dir, job)[0], encoding="utf-8") as f:
            part = [json.loads(line) for line in f if line.strip()]
        for r in part:
            if "skipped" not in r:
                try:
                    _finite_record(r, ckpt)
                except DataError:
                    raise DataError(f"{part_paths(out_dir, job)[0]}: utterance '{r['utt']}' has a non-finite score "
                                    "(decoded by an older speechkit from features with a NaN?); decode it again "
                                    "with --force") from None
        records.extend(part)
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    done = [r for r in records if "skipped" not in r]
    if not done:
        reasons = sorted({r["skipped"] for r in records})
        raise DataError(f"{data_dir}: no utterance could be decoded ({'; '.join(reasons[:3])})")
    skipped: dict[str, int] = {}
    for r in records:
        if "skipped" in r:
            kind = r["skipped"].split(":")[0]
            skipped[kind] = skipped.get(kind, 0) + 1
    with open(part_paths(out_dir, 1)[1], encoding="utf-8") as f:
        ckpt_used = json.load(f)["checkpoint"]
    languages = None
    with atomic_write(out_dir / "text") as f:
        for r in done:
            f.write(f"{r['utt']} {r['text']}\n" if r["text"] else f"{r['utt']}\n")
    no_lang = [r["utt"] for r in done if r["lang"] is None]
    with atomic_write(out_dir / "utt2lang") as f:
        for r in done:
            if r["lang"] is not None:
                f.write(f"{r['utt']} {r['lang']}\n")
    have_lid = done[0]["lid_posteriors"] is not None
    if have_lid:
        languages = list(done[0]["lid_posteriors"])
        with atomic_write(out_dir / "lid_posteriors") as f:
            for r in done:
                f.write(f"{r['utt']} [ " + " ".join(f"{r['lid_posteriors'][k]:.6g}" for k in languages) + " ]\n")
    elif (out_dir / "lid_posteriors").exists():
        (out_dir / "lid_posteriors").unlink()
    with atomic_write(out_dir / "results.jsonl") as f:
        for r in records:
            f.write(_dumps(r) + "\n")
    dec_s = sum(r["decode_seconds"] for r in done)
    audio_s = sum(r["audio_seconds"] for r in done)
    t_avg = sum(r["active_decoders_per_frame"] for r in done) / len(done)
    lid_correct = [r["lang"] == r["ref_lang"] for r in done if r["ref_lang"] is not None]
    stats = {
        "data_dir": str(data_dir), "model_dir": str(model_dir), "checkpoint": ckpt_used,
        **options.fingerprint_dict(), "nj": nj,
        # JSON has no infinity: an infinite threshold (no switch-off) is written as the option was, "inf"
        **({"switch_off_threshold": "inf"} if options.switch_off_threshold == float("inf") else {}),
        "languages": languages,
        "num_utterances": len(records), "num_decoded": len(done), "num_skipped": len(records) - len(done),
        "skipped": skipped, "num_without_language": len(no_lang),
        "t_avg": t_avg, "audio_seconds": audio_s, "decode_seconds": dec_s,
        "rtf": dec_s / audio_s if audio_s > 0 else None,
        "chosen_language_accuracy": (100.0 * sum(lid_correct) / len(lid_correct)) if lid_correct else None,
    }
    with atomic_write(out_dir / "decode_stats.json") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    if skipped:
        logger.warning("skipped %d of %d utterances: %s", stats["num_skipped"], len(records),
                       ", ".join(f"{n} {k}" for k, n in skipped.items()))
    if no_lang:
        logger.warning("%d hypotheses tell no language (left out of %s/utt2lang): %s%s", len(no_lang), out_dir,
                       " ".join(no_lang[:5]), " ..." if len(no_lang) > 5 else "")
    acc = stats["chosen_language_accuracy"]
    chooses = options.mode == "lid_free" or "union" in done[0]["hyps"]  # LID-free, or a vanilla model
    summary = (f"{out_dir}: decoded {len(done)} of {len(records)} utterances ({audio_s:.1f} s of audio); "
               f"T_avg {t_avg:.3f}; RTF {stats['rtf']:.4f} ({options.num_threads} thread(s) per job)"
               + (f"; chosen language correct for {acc:.2f} %" if acc is not None and chooses else ""))
    return stats, summary


def decode_data_dir(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                    out_dir: str | os.PathLike, options: DecodeOptions, *, nj: int = 1, job: int | None = None,
                    merge_only: bool = False, force: bool = False, max_jobs: int | None = None,
                    job_argv: Callable[[int], list[str]] | None = None, option: str | None = None,
                    logger: logging.Logger = log) -> tuple[dict, str] | None:
    """Decode ``data_dir`` into ``out_dir`` in ``nj`` parts, as ``speechkit-asr-decode`` does.

    The options and paths are checked first (:meth:`DecodeOptions.check`, :func:`check_decode_paths`).
    With ``job``, only that part is decoded (its log lines go to ``logger``) and None is returned.
    Otherwise the parts are decoded -- one part: here, logged to ``OUT_DIR/log/decode.1.log`` too;
    several: ``job_argv(J)`` (the command decoding part J, e.g. ``speechkit-asr-decode ... --job J``)
    run as local processes, at most ``max_jobs`` (default ``nj``) at once, each logging to
    ``OUT_DIR/log/decode.J.log``, or without ``job_argv`` here one after the other -- unless
    ``merge_only``, and then merged (:func:`merge_parts`).

    Returns:
        :func:`merge_parts`' stats and summary line; None with ``job``.

    Raises:
        DataError: some of the local processes failed (names each and the last line of its log;
            nothing merged); :func:`decode_part` and :func:`merge_parts`' errors.
    """
    from speechkit.utils.jobs import describe_failures, run_local_jobs

    options.check()
    where = dict(model_dir=model_dir, checkpoint=checkpoint, data_dir=data_dir, out_dir=out_dir, options=options,
                 option=option)
    check_decode_paths(**where)
    if job is not None:
        decode_part(**where, job=job, nj=nj, force=force, logger=logger)
        return None
    log_dir = Path(out_dir) / "log"
    if not merge_only and (nj == 1 or job_argv is None):
        for j in range(1, nj + 1):
            decode_part(**where, job=j, nj=nj, force=force, logger=logger, log_file=log_dir / f"decode.{j}.log")
    elif not merge_only:
        failed = run_local_jobs(range(1, nj + 1), job_argv, lambda j: log_dir / f"decode.{j}.log", max_jobs or nj,
                                options.num_threads)
        if failed:
            raise DataError(f"{len(failed)} of {nj} jobs failed; nothing merged.\n  "
                            + "\n  ".join(describe_failures(failed)))
    return merge_parts(**where, nj=nj, logger=logger)
