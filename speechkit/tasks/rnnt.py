"""``rnnt`` task: streaming multilingual RNN-T training (Joshi et al., Interspeech 2021).

Trains any :mod:`speechkit.models.rnnt` variant (vanilla, onehot, multisoftmax, multisoftmax_lsp,
multisoftmax_lid, multisoftmax_lsp_lid) from Kaldi data directories::

    speechkit-train rnnt --config conf/train_rnnt.yaml --exp-dir exp/rnnt_multisoftmax \\
        --model.variant multisoftmax

Data (``data:`` section)
    ``train_dir`` / ``valid_dir``: data dirs with ``feats.scp`` (80-dim log-mel, 10 ms; from
    ``speechkit-compute-feats``), ``text`` and ``utt2lang``. Features are normalised with global
    CMVN stats of the training set (``cmvn_stats``, default ``<train_dir>/cmvn_global.ark``; the same
    stats are used for validation and, through the saved config, for decoding -- per-set stats
    would not be available to a streaming recogniser) and stacked ``num_stack`` frames every
    ``stack_stride`` (8 x 80 = 640 dims every 30 ms, section 5; :mod:`speechkit.features.stack`).
    Targets come from the unit inventories of ``speechkit-make-units --per-language``
    (``units_dir``): per-language ids for every variant; the vanilla/onehot models map them into
    the union inventory through the inventories' ``to_union`` tables (so their outputs are the ids
    of ``units_dir/union/units.txt``). ``languages`` restricts training to some of the units'
    languages (a monolingual baseline is ``variant: multisoftmax`` with one language; other
    languages' utterances are then left out, not counted as skips).

Skips (counted and logged, never a crash mid-epoch)
    an utterance without features; a transcript that is empty or has no in-vocabulary symbol
    (:meth:`~speechkit.text.units.UnitInventory.encode_checked`); one with more labels than
    ``max_symbols_per_frame`` x encoder frames or too short for one stacked frame
    (:func:`length_problem`); one longer than ``max_frames``. A language in
    ``utt2lang`` that the units do not know is an error naming the file and line.

Batches
    Each training mini-batch holds one language, the language drawn in proportion to its hours
    of data (section 4; :func:`language_batches`), packed to at most
    ``trainer.batch_frames`` padded *input* (10 ms) frames; optionally shortest batches first in
    the first ``data.sortagrad_epochs`` epochs. Validation batches may mix languages (the model
    splits them).

Loss
    ``total = rnnt + lid_weight * lid_ce`` (:meth:`speechkit.models.rnnt.RNNT.forward`; the paper's
    "final loss is the addition of RNN-T and CE loss", section 4.2, is ``lid_weight`` 1); the LID
    frame targets of ``multisoftmax_lid`` are the utterance's language at every encoder frame.
    ``rnnt`` is summed over each utterance (averaged over utterances); ``model.lid_ce_norm`` says
    how ``lid_ce`` is normalised: ``frame`` (default) averages it over frames, so it weighs about
    ``lid_weight / T`` per frame against the RNN-T term; ``utterance`` sums it per utterance like
    the RNN-T term. Logged stats: ``loss`` (= total), ``rnnt`` (nats per utterance) and, for the
    LID variant, ``lid_ce`` (nats per frame, or per utterance with ``lid_ce_norm: utterance``).

Auxiliary CTC and SpecAugment
    ``model.ctc_weight`` adds a CTC loss on the encoder (logged as ``ctc``, nats per utterance);
    ``model.ctc_warmup_epochs`` trains the first epochs on it alone (the prediction and joint
    networks wait), which keeps the RNN-T from settling on its prediction network's language model
    (egs/indic_multilingual/results/mini/NOTES.md, "Why the default has an auxiliary CTC loss").
    ``specaug.enabled`` masks time and frequency bands of training batches
    (:mod:`speechkit.nn.specaug`; lhotse/icefall defaults), drawn from torch's global generator,
    which the trainer seeds and checkpoints. Neither is in the paper (it trains with the RNN-T
    loss plus, for the LID model, the frame cross-entropy: section 4.2).

Fine-tuning (Table 3; ``init:`` section)
    ``init.exp_dir`` names a trained experiment; its best checkpoint initialises the model. With
    ``init.language`` the source is first reduced to that language
    (:func:`~speechkit.models.rnnt.to_monolingual`: shared encoder and prediction network, the
    language's embedding/joint/softmax; other languages' parameters and the LID head dropped; a
    vanilla/one-hot source has its union softmax cut to the language's units and, for one-hot,
    the language's one-hot input folded into the encoder bias), so the fine-tuned model is
    ``variant: multisoftmax`` (``multisoftmax_lsp`` from an LSP source) with
    ``data.languages: [<language>]``. The initial weights matter only at the start: a resumed run
    restores its own checkpoint.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from speechkit.data.fingerprint import DataInput
from speechkit.features.cmvn import apply_cmvn
from speechkit.features.io import FeatureReader, load_global_cmvn_stats
from speechkit.features.stack import num_stacked_frames, stack_frames
from speechkit.nn.specaug import SpecAugment, SpecAugmentConfig
from speechkit.models.rnnt import RNNT, RNNTConfig, parameter_counts, to_monolingual
from speechkit.models.rnnt_config import PRESETS
from speechkit.tasks import load_model
from speechkit.text.units import LANGUAGES_TXT, MultilingualUnits, encode_transcripts
from speechkit.train.task import Task, checkpoint_input
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.config import FieldError
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError, atomic_write, read_table

logger = logging.getLogger(__name__)

__all__ = ["RNNTDataConfig", "RNNTInitConfig", "RNNTTaskConfig", "RNNTDataset", "RNNTTask",
           "model_config_for_units", "sortagrad", "collate_rnnt", "language_batches",
           "length_problem"]


@dataclass
class RNNTDataConfig:
    """Data settings of the rnnt task.

    Attributes:
        train_dir: training data dir (feats.scp, text, utt2lang; utt2num_frames speeds up loading).
        valid_dir: validation data dir (same files); null = no validation (then use
            trainer.best_metric=train/loss).
        units_dir: output of speechkit-make-units --per-language (languages.txt, <lang>/units.txt,
            union/units.txt).
        languages: train on these languages of the units only (e.g. [hi] for a monolingual
            baseline); null = every language of the units.
        cmvn_stats: global CMVN stats: a Kaldi matrix file (cmvn_global.ark, as
            speechkit-compute-cmvn-stats writes), a cmvn.scp (per-speaker stats are summed; a
            legacy 'global' entry is used as is) or a data dir; null = <train_dir> (its
            cmvn_global.ark, else its cmvn.scp). Used for training, validation and decoding.
        norm_vars: also normalise variances with the CMVN stats (means always).
        num_stack: feature frames stacked per encoder frame (paper: 8 -> 640 dims).
        stack_stride: feature frames between encoder frames (paper: 3 -> 30 ms).
        max_symbols_per_frame: skip utterances with more labels than this x encoder frames
            (1: every transcript stays reachable by one-symbol-per-frame beam search); 0 = only
            skip utterances too short for one encoder frame.
        max_frames: skip utterances longer than this many feature frames (0 = no limit).
        preload: read every feature matrix into memory once (about 115 MB per hour of 80-dim
            features) instead of from the ark at each step.
        sortagrad_epochs: in the first this many epochs, each language's batches go shortest
            first (SortaGrad, Amodei et al. 2016; the language of every step stays as drawn);
            0 = random order from the start. Short utterances are easy to align and get an
            RNN-T from scratch out of its blank-only start sooner.
    """

    train_dir: str = "data/train"
    valid_dir: str | None = "data/dev"
    units_dir: str = "data/lang_char_wb"
    languages: list[str] | None = None
    cmvn_stats: str | None = None
    norm_vars: bool = True
    num_stack: int = 8
    stack_stride: int = 3
    max_symbols_per_frame: int = 1
    max_frames: int = 0
    preload: bool = True
    sortagrad_epochs: int = 0

    def __post_init__(self) -> None:
        for name in ("num_stack", "stack_stride"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")
        for name in ("max_symbols_per_frame", "max_frames", "sortagrad_epochs"):
            if getattr(self, name) < 0:
                raise FieldError(name, f"must be >= 0, got {getattr(self, name)}")
        if self.languages is not None and not self.languages:
            raise FieldError("languages", "must name at least one language (or be null for all)")
        if self.languages is not None and len(set(self.languages)) != len(self.languages):
            raise FieldError("languages", f"has duplicates: {self.languages}")


@dataclass
class RNNTInitConfig:
    """Initialisation from a trained experiment (fine-tuning, paper Table 3).

    Attributes:
        exp_dir: experiment dir of a trained rnnt model (its checkpoints/best.pt, else the latest
            checkpoint) whose weights initialise this model; null = random initialisation.
        language: reduce the source model to this language first (to_monolingual); null = load
            it as it is (same variant and languages).
    """

    exp_dir: str | None = None
    language: str | None = None

    def __post_init__(self) -> None:
        if self.language is not None and self.exp_dir is None:
            raise FieldError("language", "needs init.exp_dir")


def _rnnt_trainer_defaults() -> TrainerConfig:
    return TrainerConfig(max_epochs=20, batch_frames=20000, lr=1e-3, grad_clip=5.0, scheduler="warmup_constant",
                         warmup_steps=200, log_interval=25, keep_last=2)


def _small_model() -> RNNTConfig:
    return RNNTConfig(**PRESETS["small"])


@dataclass
class RNNTTaskConfig:
    """Configuration of the rnnt task.

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig); trainer.batch_frames
            counts padded feature (10 ms) frames per single-language batch and must be > 0.
        model: RNN-T settings (speechkit.models.rnnt.RNNTConfig); vocab_sizes and union_maps are
            filled from data.units_dir (leave them empty; if given they must agree). Default: the
            'small' preset.
        data: data directories, units, CMVN, stacking and skip rules.
        init: initialise from a trained experiment (fine-tuning).
        specaug: SpecAugment time and frequency masks on training batches
            (:class:`~speechkit.nn.specaug.SpecAugmentConfig`; off unless ``specaug.enabled``).
    """

    trainer: TrainerConfig = field(default_factory=_rnnt_trainer_defaults)
    model: RNNTConfig = field(default_factory=_small_model)
    data: RNNTDataConfig = field(default_factory=RNNTDataConfig)
    init: RNNTInitConfig = field(default_factory=RNNTInitConfig)
    specaug: SpecAugmentConfig = field(default_factory=SpecAugmentConfig)


# ---------------------------------------------------------------------------------------- helpers


def _load_units(units_dir: str | Path):
    units_dir = Path(units_dir)
    if not (units_dir / LANGUAGES_TXT).is_file():
        raise FileNotFoundError(f"{units_dir}/{LANGUAGES_TXT}: missing (data.units_dir must be the output of "
                                f"speechkit-make-units --per-language)")
    return MultilingualUnits.load(units_dir)


def _languages(cfg: RNNTTaskConfig, units) -> list[str]:
    """The model's languages, in the units' (C-sorted) order."""
    if cfg.data.languages is None:
        return list(units.languages)
    unknown = [lang for lang in cfg.data.languages if lang not in units.languages]
    if unknown:
        raise ConfigError(f"key 'data.languages': {unknown[0]!r} is not a language of {cfg.data.units_dir} "
                          f"(it has: {' '.join(units.languages)})")
    return [lang for lang in units.languages if lang in cfg.data.languages]


def model_config_for_units(cfg: RNNTTaskConfig, units) -> RNNTConfig:
    """``cfg.model`` with ``vocab_sizes`` (and ``union_maps`` for vanilla/onehot) from the units.

    Raises:
        ConfigError: ``model.vocab_sizes`` or ``model.union_maps`` given and different from the
            units; ``model.input_dim`` different from ``num_stack`` x the feature dimension is
            checked later, when the features are known.
    """
    langs = _languages(cfg, units)
    sizes = {lang: units.vocab_sizes[lang] for lang in langs}
    if cfg.model.vocab_sizes and dict(cfg.model.vocab_sizes) != sizes:
        raise ConfigError(f"key 'model.vocab_sizes': {dict(cfg.model.vocab_sizes)} differs from the units in "
                          f"{cfg.data.units_dir} ({sizes}); leave it empty to take it from the units")
    maps = {lang: list(units.to_union[lang]) for lang in langs} if cfg.model.variant in ("vanilla", "onehot") else None
    if cfg.model.union_maps is not None and cfg.model.union_maps != maps:
        raise ConfigError(f"key 'model.union_maps': differs from the to_union tables of {cfg.data.units_dir}; "
                          f"leave it empty")
    return dataclasses.replace(cfg.model, vocab_sizes=sizes, union_maps=maps)


# ---------------------------------------------------------------------------------------- dataset


class RNNTDataset(Dataset):
    """Utterances of one data dir ready for the RNN-T: stacked, CMVN-normalised features and targets.

    Item ``i`` is a dict: ``feats`` float32 ``(T', num_stack*D)``, ``targets`` int64 ``(U,)``
    (per-language unit ids, no blank), ``lang`` (language index in the model), ``utt``.

    Args:
        reader: a :class:`~speechkit.features.io.FeatureReader` (without CMVN) of the data dir.
        utts: the utterances to serve (all usable).
        targets: utterance -> unit ids.
        langs: utterance -> language index.
        num_frames: utterance -> feature frames (before stacking).
        cmvn: global CMVN stats ``(2, D+1)`` or None.
        norm_vars, num_stack, stack_stride: as :class:`RNNTDataConfig`.
        preload: read every matrix now.
        lang_names: language names by index (for :meth:`utt2lang`).
    """

    def __init__(self, reader, utts: list[str], targets: dict[str, list[int]], langs: dict[str, int],
                 num_frames: dict[str, int], cmvn: np.ndarray | None, norm_vars: bool, num_stack: int,
                 stack_stride: int, preload: bool, lang_names: list[str]) -> None:
        self.reader, self.utts = reader, list(utts)
        self.targets = [torch.tensor(targets[u], dtype=torch.long) for u in self.utts]
        self.langs = [langs[u] for u in self.utts]
        self.num_frames = [int(num_frames[u]) for u in self.utts]
        self.cmvn, self.norm_vars = cmvn, norm_vars
        self.num_stack, self.stack_stride = num_stack, stack_stride
        self.lang_names = list(lang_names)
        self._cache: list[torch.Tensor] | None = None
        if preload:  # normalised but not stacked: stacking would multiply the memory by num_stack/stride
            self._cache = [self._load(u) for u in self.utts]

    def _load(self, utt: str) -> torch.Tensor:
        """CMVN-normalised features ``(T, D)`` of ``utt``."""
        m = self.reader.raw(utt)
        if self.cmvn is not None:
            m = apply_cmvn(m, self.cmvn, norm_vars=self.norm_vars)
        return torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.utts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        x = self._cache[i] if self._cache is not None else self._load(self.utts[i])
        feats, _ = stack_frames(x, None, self.num_stack, self.stack_stride)
        return {"feats": feats, "targets": self.targets[i], "lang": self.langs[i], "utt": self.utts[i]}

    def lengths(self) -> list[int]:
        """Feature (10 ms) frames per item, before stacking."""
        return list(self.num_frames)

    def utt2lang(self) -> dict[str, str]:
        """Utterance -> language name."""
        return {u: self.lang_names[k] for u, k in zip(self.utts, self.langs)}

    def hours(self) -> dict[str, float]:
        """Hours of speech per language (from frame counts at 10 ms)."""
        out: dict[str, float] = {}
        for n, k in zip(self.num_frames, self.langs):
            out[self.lang_names[k]] = out.get(self.lang_names[k], 0.0) + n / 360000.0
        return out


def collate_rnnt(items: list[dict]) -> dict[str, Any]:
    """Pad a list of :class:`RNNTDataset` items.

    Returns:
        ``feats (B, T'_max, F)``, ``feat_lengths (B,)``, ``targets (B, U_max)`` (0-padded),
        ``target_lengths (B,)``, ``lang (B,)`` language indices, ``utts`` (list).
    """
    feats = [it["feats"] for it in items]
    tgts = [it["targets"] for it in items]
    return {
        "feats": nn.utils.rnn.pad_sequence(feats, batch_first=True),
        "feat_lengths": torch.tensor([f.size(0) for f in feats], dtype=torch.long),
        "targets": nn.utils.rnn.pad_sequence(tgts, batch_first=True, padding_value=0),
        "target_lengths": torch.tensor([t.numel() for t in tgts], dtype=torch.long),
        "lang": torch.tensor([it["lang"] for it in items], dtype=torch.long),
        "utts": [it["utt"] for it in items],
    }


# ---------------------------------------------------------------------------------------- task


class RNNTTask(Task):
    """Multilingual streaming RNN-T (see the module docstring).

    Attributes:
        load_init: apply ``init.exp_dir`` in :meth:`build_model` (set False to rebuild a trained
            model for inference without touching the experiment it was fine-tuned from).
        skipped: after :meth:`build_datasets`: ``{"train"|"valid": {utt: reason}}``.
    """

    name = "rnnt"
    Config = RNNTTaskConfig

    def __init__(self) -> None:
        self.load_init = True
        self.epoch = 1
        self.ctc_warmup_epochs = 0
        self.specaug: SpecAugment | None = None
        self.skipped: dict[str, dict[str, str]] = {}
        self._units = None

    # -- model -----------------------------------------------------------------------------
    def units(self, cfg: RNNTTaskConfig):
        """The :class:`~speechkit.text.units.MultilingualUnits` of ``cfg.data.units_dir`` (cached)."""
        if self._units is None or self._units[0] != cfg.data.units_dir:
            self._units = (cfg.data.units_dir, _load_units(cfg.data.units_dir))
        return self._units[1]

    def build_model(self, cfg: RNNTTaskConfig) -> RNNT:
        """An :class:`RNNT` sized from the units; with ``init.exp_dir`` (and ``load_init``) its weights.

        Raises:
            ConfigError: units disagree with ``model.vocab_sizes``; unknown ``data.languages``;
                an ``init`` model that does not fit (names what differs).
        """
        mcfg = model_config_for_units(cfg, self.units(cfg))
        model = RNNT(mcfg)
        # distributed training: the other languages' layers get no gradient in a one-language
        # batch, nor the prediction/joint networks during the CTC warm-up
        self.find_unused_parameters = (not mcfg.shared_softmax and len(mcfg.languages) > 1) or mcfg.ctc_warmup_epochs > 0
        self.ctc_warmup_epochs = mcfg.ctc_warmup_epochs
        d = cfg.data
        self.specaug = (SpecAugment(cfg.specaug, mcfg.input_dim // d.num_stack, d.num_stack, d.stack_stride)
                        if cfg.specaug.enabled else None)
        if cfg.init.exp_dir is not None and self.load_init:
            self._init_from(model, cfg)
        counts = parameter_counts(model)
        logger.info("rnnt %s model, languages %s: %s parameters (encoder %s, prediction %s, joint %s, lid %s)",
                    mcfg.variant, " ".join(mcfg.languages), f"{counts['total']:,}", f"{counts['encoder']:,}",
                    f"{counts['prediction']:,}", f"{counts['joint']:,}", f"{counts['lid']:,}")
        return model

    def _init_from(self, model: RNNT, cfg: RNNTTaskConfig) -> None:
        src_task = RNNTTask()
        src_task.load_init = False
        src, _ = load_model(cfg.init.exp_dir, task=src_task)
        what = f"{cfg.init.exp_dir} ({src.config.variant}, {' '.join(src.languages)})"
        if cfg.init.language is not None:
            if cfg.init.language not in src.languages:
                raise ConfigError(f"key 'init.language': {cfg.init.language!r} is not a language of {what}")
            try:
                src = to_monolingual(src, cfg.init.language)
            except ValueError as e:
                raise ConfigError(f"key 'init.language': cannot reduce {what} to one language: {e}") from None
        if src.config.variant != model.config.variant or src.languages != model.languages:
            raise ConfigError(f"key 'init.exp_dir': {what} gives a {src.config.variant} model of "
                              f"{' '.join(src.languages)}, this config a {model.config.variant} model of "
                              f"{' '.join(model.languages)} (set model.variant / data.languages / init.language)")
        try:
            model.load_state_dict(src.state_dict(), strict=True)
        except RuntimeError as e:
            first = str(e).strip().splitlines()
            raise ConfigError(f"key 'init.exp_dir': the weights of {what} do not fit this model's sizes "
                              f"(model section must match): {' '.join(first[:3])[:400]}") from None
        logger.info("initialised from %s%s", cfg.init.exp_dir,
                    f" reduced to {cfg.init.language}" if cfg.init.language else "")

    # -- data ------------------------------------------------------------------------------
    def data_inputs(self, cfg: RNNTTaskConfig) -> dict[str, DataInput]:
        """``data.train_dir`` / ``data.valid_dir`` (feats.scp, feats.yaml, text, utt2lang; the train
        dir's CMVN stats unless ``data.cmvn_stats`` names them), ``data.units_dir`` (every file),
        ``data.cmvn_stats`` and the checkpoint of ``init.exp_dir``."""
        d = cfg.data
        tables = ("feats.scp", "feats.yaml", "text", "utt2lang")
        cmvn = ("cmvn_global.ark", "cmvn.scp")
        out = {"data.train_dir": DataInput(d.train_dir, tables + (() if d.cmvn_stats else cmvn))}
        if d.valid_dir:
            out["data.valid_dir"] = DataInput(d.valid_dir, tables)
        out["data.units_dir"] = DataInput(d.units_dir, tree=True)
        if d.cmvn_stats:
            out["data.cmvn_stats"] = DataInput(d.cmvn_stats, cmvn if Path(d.cmvn_stats).is_dir() else None)
        if cfg.init.exp_dir is not None:
            out["init.exp_dir"] = checkpoint_input(cfg.init.exp_dir)
        return out

    def build_datasets(self, cfg: RNNTTaskConfig) -> tuple[RNNTDataset, RNNTDataset | None]:
        """Training and validation :class:`RNNTDataset` (skips counted in :attr:`skipped` and logged).

        Raises:
            FileNotFoundError: a missing data dir file, CMVN stats or units.
            DataError: an unknown language in utt2lang (file:line), feature dimension that does
                not fit ``model.input_dim``.
            ValueError: nothing usable in the training set.
        """
        d = cfg.data
        cmvn_path = Path(d.cmvn_stats) if d.cmvn_stats else Path(d.train_dir)
        cmvn = load_global_cmvn_stats(cmvn_path)
        train = self.make_dataset(cfg, d.train_dir, cmvn, "train")
        if len(train) == 0:
            raise ValueError(f"{d.train_dir}: no usable training utterance (see the skip report above)")
        hours = train.hours()
        logger.info("train: %s", ", ".join(f"{k} {v:.2f} h" for k, v in sorted(hours.items())))
        missing = [lang for lang in train.lang_names if lang not in hours]
        if missing:
            logger.warning("train: no usable utterance of language(s) %s: their parameters will not be trained",
                           " ".join(missing))
        valid = self.make_dataset(cfg, d.valid_dir, cmvn, "valid") if d.valid_dir else None
        if valid is not None and len(valid) == 0:
            logger.warning("valid: no usable utterance in %s; validation disabled", d.valid_dir)
            valid = None
        return train, valid

    def make_dataset(self, cfg: RNNTTaskConfig, data_dir: str, cmvn: np.ndarray | None, name: str) -> RNNTDataset:
        """One :class:`RNNTDataset` of ``data_dir`` (see :meth:`build_datasets`)."""
        d = cfg.data
        data_dir = Path(data_dir)
        units = self.units(cfg)
        langs = _languages(cfg, units)
        lang_index = {lang: i for i, lang in enumerate(langs)}
        for f in ("text", "utt2lang"):
            if not (data_dir / f).is_file():
                raise FileNotFoundError(f"{data_dir}/{f}: missing (the rnnt task needs text, utt2lang and feats.scp)")
        text = read_table(data_dir / "text", allow_empty_value=True)
        utt2lang = read_table(data_dir / "utt2lang")
        for lineno, (utt, lang) in enumerate(utt2lang.items(), 1):
            if lang not in units.languages:
                raise DataError(f"{data_dir}/utt2lang:{lineno}: unknown language '{lang}' for utterance '{utt}' "
                                f"(the units in {d.units_dir} have: {' '.join(units.languages)})")
        reader = FeatureReader(data_dir, cmvn="none")
        feat_dim = reader.dim
        if cmvn is not None and cmvn.shape[1] - 1 != feat_dim:
            raise DataError(f"CMVN stats have dimension {cmvn.shape[1] - 1}, the features of {data_dir} {feat_dim}")
        if d.num_stack * feat_dim != cfg.model.input_dim:
            raise ConfigError(f"key 'model.input_dim': {cfg.model.input_dim} != data.num_stack ({d.num_stack}) x "
                              f"feature dimension of {data_dir} ({feat_dim})")

        skipped: dict[str, str] = {}
        other_lang = 0
        chosen: dict[str, str] = {}
        for utt, t in text.items():
            lang = utt2lang.get(utt)
            if lang is None:
                skipped[utt] = "no language in utt2lang"
            elif lang not in lang_index:
                other_lang += 1
            elif utt not in reader:
                skipped[utt] = "no features in feats.scp"
            else:
                chosen[utt] = t
        for inv in units.inventories.values():
            inv.reset_stats()
        ids, bad = encode_transcripts(chosen, units, utt2lang, target="lang")
        skipped.update(bad)
        for lang in langs:
            st = units.inventories[lang].reset_stats()
            if st.num_oov:
                logger.warning("%s: %s", name, st.summary(lang))
        num_frames: dict[str, int] = {}
        for utt in list(ids):
            n = reader.num_frames(utt)
            why = length_problem(n, len(ids[utt]), d.num_stack, d.stack_stride, d.max_symbols_per_frame or None)
            if why is None and d.max_frames and n > d.max_frames:
                why = f"{n} frames > data.max_frames={d.max_frames}"
            if why is not None:
                skipped[utt] = why
                del ids[utt]
            else:
                num_frames[utt] = n
        utts = sorted(ids, key=lambda u: u.encode("utf-8"))
        self.skipped[name] = skipped
        msg = f"{name}: {data_dir}: {len(utts)} of {len(text)} utterances used"
        if other_lang:
            msg += f", {other_lang} of other languages left out"
        if skipped:
            kinds = Counter(_reason_kind(r) for r in skipped.values())
            msg += f", {len(skipped)} skipped (" + ", ".join(f"{n} {k}" for k, n in kinds.most_common()) + ")"
            shown = "; ".join(f"{u}: {r}" for u, r in list(skipped.items())[:5])
            logger.warning("%s; e.g. %s", msg, shown)
        else:
            logger.info("%s", msg)
        return RNNTDataset(reader, utts, ids, {u: lang_index[utt2lang[u]] for u in utts}, num_frames, cmvn,
                           d.norm_vars, d.num_stack, d.stack_stride, d.preload, langs)

    def collate(self, items: list[dict]) -> dict[str, Any]:
        return collate_rnnt(items)

    def make_batches(self, dataset: RNNTDataset, cfg: RNNTTaskConfig, epoch: int, seed: int) -> list[list[int]]:
        """Single-language batches, languages drawn in proportion to their hours (section 4)."""
        if cfg.trainer.batch_frames < 1:
            raise ConfigError("key 'trainer.batch_frames': the rnnt task packs batches by frames; set it > 0 "
                              "(padded 10 ms feature frames per batch)")
        self.epoch = epoch  # forward_loss: CTC warm-up in epochs <= model.ctc_warmup_epochs
        index = {u: i for i, u in enumerate(dataset.utts)}
        frames = dict(zip(dataset.utts, dataset.num_frames))
        schedule = language_batches(dataset.utt2lang(), frames, cfg.trainer.batch_frames, seed=seed, epoch=epoch)
        if epoch <= cfg.data.sortagrad_epochs:
            schedule = sortagrad(schedule, frames)
        return [[index[u] for u in utts] for _, utts in schedule]

    # -- loss ------------------------------------------------------------------------------
    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """``total`` RNN-T (+ LID cross-entropy, + CTC) loss; stats ``rnnt`` and, with an LID head,
        ``lid_ce``, with a CTC head ``ctc``. In training epochs ``<= model.ctc_warmup_epochs`` the
        encoder losses only (``rnnt`` is then logged as 0); validation always uses the full loss."""
        warmup = model.training and self.epoch <= self.ctc_warmup_epochs
        feats = batch["feats"]
        if model.training and self.specaug is not None:
            feats = self.specaug(feats, batch["feat_lengths"])
        out = model(feats, batch["feat_lengths"], batch["targets"], batch["target_lengths"], batch["lang"],
                    ctc_only=warmup)
        stats = {"rnnt": float(out["rnnt"].detach())}
        base = model.module if hasattr(model, "module") else model
        if base.has_lid:
            stats["lid_ce"] = float(out["lid_ce"].detach())
        if base.has_ctc:
            stats["ctc"] = float(out["ctc"].detach())
        return out["total"], stats

    def on_train_end(self, model: nn.Module, cfg: RNNTTaskConfig, exp_dir: Path) -> None:
        """Write ``exp_dir/model_info.json``: parameter counts and the languages' training hours."""
        model = getattr(model, "module", model)  # (Distributed)DataParallel
        info = {"variant": model.config.variant, "languages": model.languages,
                "parameters": parameter_counts(model),
                "skipped": {k: len(v) for k, v in self.skipped.items()}}
        with atomic_write(Path(exp_dir) / "model_info.json") as f:
            json.dump(info, f, indent=2)
            f.write("\n")


# ---------------------------------------------------------------------------------------- batching


def length_problem(
    num_input_frames: int,
    num_labels: int,
    num_stack: int = 8,
    stride: int = 3,
    max_symbols_per_frame: int | None = 1,
) -> str | None:
    """Why an utterance cannot be used for training/decoding, or ``None`` if it can.

    The data side counts and reports these skips (never a crash mid-epoch):

    * fewer raw frames than ``num_stack``: no encoder frame at all (the RNN-T loss is undefined);
    * more labels than ``max_symbols_per_frame`` x encoder frames: the RNN-T loss allows it, but
      no decoder emitting at most that many symbols per frame can produce the transcript (modified
      beam search emits one per frame; ``None`` disables this check).

    Args:
        num_input_frames: raw feature frames (10 ms); num_labels: output units in the transcript.
    """
    t = num_stacked_frames(num_input_frames, num_stack, stride)
    if t == 0:
        return f"no encoder frames: {num_input_frames} input frames < num_stack={num_stack}"
    if max_symbols_per_frame is not None and num_labels > max_symbols_per_frame * t:
        return (f"{num_labels} labels > {max_symbols_per_frame} per frame x {t} encoder frames "
                f"({num_input_frames} input frames)")
    return None


def language_batches(
    utt2lang: Mapping[str, str],
    utt2num_frames: Mapping[str, int],
    batch_frames: int,
    seed: int = 0,
    epoch: int = 0,
) -> list[tuple[str, list[str]]]:
    """One epoch of single-language mini-batches, each batch's language drawn in proportion to
    that language's hours of data (Joshi et al. 2021, section 4).

    Per language, utterances are sorted by length and packed into batches whose padded size
    (``longest x count``) stays within ``batch_frames`` (an utterance longer than that is a batch
    of its own); the batches are shuffled.  The epoch has as many steps as there are batches in
    total; at each step a language is drawn with probability ``frames_l / sum_l' frames_l'`` and
    its next batch is taken (its batches are reshuffled and reused if it runs out).  Deterministic
    in ``(seed, epoch)``.

    Args:
        utt2lang: utterance -> language; utt2num_frames: utterance -> feature frames.
        batch_frames: padded frames per batch (> 0).

    Returns:
        ``[(lang, [utt, ...]), ...]`` in training order.

    Raises:
        ValueError: ``batch_frames`` < 1, or an utterance of utt2lang missing from utt2num_frames
        (named).
    """
    if batch_frames < 1:
        raise ValueError(f"batch_frames must be >= 1, got {batch_frames}")
    rng = random.Random(f"{seed}:{epoch}")
    by_lang: dict[str, list[str]] = {}
    for utt, lang in utt2lang.items():
        if utt not in utt2num_frames:
            raise ValueError(f"utterance {utt!r} has a language but no num_frames")
        by_lang.setdefault(lang, []).append(utt)
    batches: dict[str, list[list[str]]] = {}
    frames: dict[str, int] = {}
    for lang in sorted(by_lang):
        utts = sorted(by_lang[lang], key=lambda u: (utt2num_frames[u], u))
        frames[lang] = sum(int(utt2num_frames[u]) for u in utts)
        cur: list[str] = []
        out: list[list[str]] = []
        for u in utts:  # ascending lengths: the newest utterance is the longest
            if cur and int(utt2num_frames[u]) * (len(cur) + 1) > batch_frames:
                out.append(cur)
                cur = []
            cur.append(u)
        if cur:
            out.append(cur)
        rng.shuffle(out)
        batches[lang] = out
    langs = sorted(batches)
    total = sum(frames.values())
    weights = [frames[k] / total if total else 1.0 for k in langs]
    pos = {k: 0 for k in langs}
    schedule = []
    for _ in range(sum(len(b) for b in batches.values())):
        lang = rng.choices(langs, weights)[0]
        if pos[lang] == len(batches[lang]):
            rng.shuffle(batches[lang])
            pos[lang] = 0
        schedule.append((lang, batches[lang][pos[lang]]))
        pos[lang] += 1
    return schedule


def sortagrad(schedule: list[tuple[str, list[str]]], num_frames: dict[str, int]) -> list[tuple[str, list[str]]]:
    """Shortest batches first, keeping the language of every step (Amodei et al. 2016, "SortaGrad").

    Each language's batches are put in ascending order of their longest utterance and dealt back
    into that language's steps, so the language sequence (drawn in proportion to the hours) is
    unchanged; only which of its batches a step gets changes.
    """
    by_lang: dict[str, list[list[str]]] = {}
    for lang, utts in schedule:
        by_lang.setdefault(lang, []).append(utts)
    for batches in by_lang.values():
        batches.sort(key=lambda b: (max(num_frames[u] for u in b), b))
    pos = {lang: 0 for lang in by_lang}
    out = []
    for lang, _ in schedule:
        out.append((lang, by_lang[lang][pos[lang]]))
        pos[lang] += 1
    return out


def _reason_kind(reason: str) -> str:
    if reason.startswith("no in-vocabulary"):
        return "no in-vocabulary symbol"
    if reason.startswith("empty"):
        return "empty transcript"
    if "labels >" in reason:
        return "more labels than frames allow"
    if reason.startswith("no encoder frames"):
        return "too short to stack"
    if "max_frames" in reason:
        return "longer than max_frames"
    return reason
