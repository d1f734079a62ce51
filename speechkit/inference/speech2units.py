"""Speech to discrete units with a trained VQ-VAE: the extractor and the unit-dir writer.

:class:`UnitExtractor` (ESPnet2's inference-class habit: built from an experiment dir and a
checkpoint name, then called per utterance) turns one utterance's features ``(T, D)`` into its
codes and the continuous encoder output z; :func:`extract_units` encodes a whole data dir into the
ZeroSpeech 2019 layout that ``speechkit-extract-units`` writes (``<utt>.txt``, ``codes``,
``frame_shift``, ``units.yaml``; described below), in worker processes with ``nj > 1``
(:func:`speechkit.inference.parts.run_parts`). The text line of a code frame is
:func:`speechkit.features.codes.codebook_rows` / :func:`~speechkit.features.codes.onehot_rows`'s.

Frame rates: the features have a frame shift of ``feat_shift`` seconds (a data dir's
``frame_shift`` file; 0.01 when absent). Code ``i`` covers input frames ``[i*stride, (i+1)*stride)``,
so a code frame lasts ``stride * feat_shift`` seconds (0.04 for stride 4 on 10 ms frames); with
``phases = P`` (shift-and-stitch, :func:`speechkit.models.vqvae.encode_phases`) a z row and its code
last ``stride / P * feat_shift`` seconds.

The unit dir (``speechkit-extract-units DATA_DIR OUT_DIR``):

* ``<utt>.txt``: one line per code frame. With ``unit_format="codebook"`` (default) the codebook
  vector e_k of the frame's code k (De numbers, as ZeroSpeech 2019 VQ submissions wrote them), with
  ``"onehot"`` the one-hot code (K numbers, 0 or 1); with ``aux`` the continuous encoder output z (De
  numbers) instead: ZeroSpeech 2019 'test' and 'auxiliary_embedding' files. Both unit formats have one
  distinct line per code, so the same bitrate; their ABX differs (cosine distances between codebook
  vectors are graded, between one-hot rows they are all equal).
* ``codes``: Kaldi text table ``<utt> <code> <code> ...`` (the inverter's input); with ``phases`` the
  code of every z row. It has no ``.txt`` suffix, so the scoring tools, which read every ``*.txt``
  file, do not take it for an utterance.
* ``frame_shift``: seconds per code frame, ``model.stride * feat_shift`` (0.04 for stride 4 on 10 ms
  frames), ``/ phases`` with ``phases``.
* ``units.yaml``: what produced them (model, checkpoint, K, De, stride, kind, phases, utterances).

Features are normalised as in training: per-speaker CMVN stats of the data dir itself
(``data.cmvn=speaker``) or the training set's global stats (``data.cmvn=global``). Encoding runs over
overlapping windows of the training crop (``data.crop_frames``, rounded down to the stride; whole
utterances for a model trained without crops; ``window``, ``hop`` = half a window by default), each code
frame taken from the window it is most central in, so that extraction sees what training saw
(``window=0``: each utterance whole). Errors name the utterance: NaN/Inf in its features, fewer frames
than the total stride. The CLI checks its options (``--nj``, ``--batch-frames``, ``--window``, ``--hop``)
and its output dir before any work; OUT_DIR may not be, contain or lie inside DATA_DIR, the model's
training data dir or a file the tool reads, nor be or contain the model dir (it may lie inside it).
The measurements behind the windows and phases (ABX on unseen TIMIT speakers) are in
``egs/zerospeech2019/README.md`` and its ``results/local/NOTES.md``.

Example::

    from speechkit.inference.speech2units import UnitExtractor

    extractor = UnitExtractor.from_pretrained("exp/vqvae", "best")
    utts, feats = extractor.load_features("dump/mfcc/test")   # normalised as in training
    codes, z = extractor.encode(feats[0])                    # (ceil(T / stride),), (ceil(T / stride), De)
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import yaml
from tqdm import tqdm

from speechkit.features.cmvn import apply_cmvn
from speechkit.features.codes import codebook_rows, onehot_rows
from speechkit.features.io import FeatureReader, check_matrix, load_cmvn_stats, load_features, scp_files
from speechkit.inference.parts import run_parts, split_parts
from speechkit.tasks import load_model
from speechkit.train.checkpoint import resolve_checkpoint
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, atomic_write, read_table, write_table

# torch and models.vqvae (torch) are imported where used: splitting and merging the parts need neither.

__all__ = ["UNIT_FORMATS", "check_extraction_options", "UnitExtractor", "write_units", "extract_units"]

log = logging.getLogger(__name__)

#: How a code frame is written: its codebook vector e_k (De numbers) or its one-hot vector (K numbers).
UNIT_FORMATS = ("codebook", "onehot")

def feature_conf(data_dir: Path) -> dict | None:
    """The data dir's ``feats.yaml`` (the front-end config its features were computed with), or None."""
    f = data_dir / "feats.yaml"
    return yaml.safe_load(f.read_text(encoding="utf-8")) if f.is_file() else None


def check_extraction_options(*, window: int | None = None, hop: int | None = None, phases: int | str = 1,
                             nj: int = 1, batch_frames: int = 1) -> int | None:
    """Check the options that need no model (range checks), before any work.

    Args:
        window, hop, phases: as :class:`UnitExtractor`'s; nj, batch_frames: as :func:`extract_units`'s.

    Returns:
        ``phases`` as a number, ``None`` for ``'all'`` (the model's stride, known once it is loaded).

    Raises:
        ParameterError: an option out of range, naming it (a CLI spells it as its flag).
    """
    if nj < 1:
        raise ParameterError("nj", f"`nj` must be >= 1, got {nj}")
    if batch_frames < 1:
        raise ParameterError("batch_frames", f"`batch_frames` must be >= 1, got {batch_frames}")
    if window is not None and window < 0:
        raise ParameterError("window", f"`window` must be >= 0 (0 = whole utterances), got {window}")
    if hop is not None and hop < 1:
        raise ParameterError("hop", f"`hop` must be >= 1 input frame, got {hop} (leave it out for half a window)")
    if hop is not None and window == 0:
        raise ParameterError("hop", f"`hop` {hop}: only with windows (`window=0` encodes whole utterances)")
    if phases == "all":
        return None
    try:
        n = int(phases)
    except ValueError:
        raise ParameterError("phases", f"`phases`: expected a number or 'all', got {phases!r}") from None
    if n < 1:
        raise ParameterError("phases", f"`phases` must be >= 1 (or 'all'), got {n}")
    return n


class UnitExtractor:
    """A trained VQ-VAE encoding utterances as in training (over windows of the training crop).

    Each code frame is taken from the overlapping window it is most central in
    (:func:`speechkit.models.vqvae.encode_windowed`), or the utterance is encoded whole (``window``
    0, or a model trained without crops).

    Args:
        model: the :class:`~speechkit.models.vqvae.VQVAE` (eval mode).
        cfg: the config it was trained with (``cfg.model.stride``, ``cfg.data.crop_frames``,
            ``cfg.data.cmvn`` ...).
        window: input frames per window, a multiple of the stride; 0 = whole utterances; ``None``
            = the training crop (``data.crop_frames`` rounded down to the stride).
        hop: input frames between window starts, ``1 <= hop <= window``, a multiple of the stride;
            ``None`` = half a window (:func:`~speechkit.models.vqvae.default_hop`).
        phases: with ``aux``: z every ``stride / phases`` input frames (a divisor of the stride,
            or ``'all'`` = the stride: z every input frame); 1 = z at the code rate.
        aux: the unit files hold the continuous z instead of the codes.
        unit_format: with codes, how a frame is written: one of :data:`UNIT_FORMATS`.
        checkpoint: the checkpoint file the model came from (recorded in ``units.yaml``; read by
            the workers of :func:`extract_units` with ``nj > 1``).
        model_dir: the experiment dir as given (recorded in ``units.yaml``); default ``checkpoint``.

    Attributes:
        stride, window, hop, phases: resolved (numbers); ``rows``: the text line of each code
        (``None`` with ``aux``).

    Raises:
        ParameterError: options out of range or not fitting the model's stride, ``phases > 1`` without
            ``aux`` (each naming the parameter); ValueError: an unknown ``unit_format``.
    """

    def __init__(self, model, cfg, *, window: int | None = None, hop: int | None = None,
                 phases: int | str = 1, aux: bool = False, unit_format: str = "codebook",
                 checkpoint: str | os.PathLike | None = None, model_dir: str | os.PathLike | None = None) -> None:
        from speechkit.models.vqvae import default_hop, phase_offsets

        n_phases = check_extraction_options(window=window, hop=hop, phases=phases)
        if unit_format not in UNIT_FORMATS:
            raise ValueError(f"unknown unit format {unit_format!r}, expected one of {', '.join(UNIT_FORMATS)}")
        self.model, self.cfg, self.aux, self.unit_format = model, cfg, aux, unit_format
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self.model_dir = model_dir if model_dir is not None else checkpoint
        # the windows: given, or the training crop; the hop: given, or half a window (both in whole strides)
        stride = self.stride = cfg.model.stride
        if window is None:
            window = int(getattr(cfg.data, "crop_frames", 0) or 0) // stride * stride
            if window:
                log.info("windows of %d input frames (the training crop; window 0 encodes whole utterances)",
                         window)
        if hop is None:
            hop = default_hop(window, stride) if window else 0
        elif not window:
            raise ParameterError("hop", f"`hop` {hop}: only with windows (the model was trained without crops, so "
                                 "`window` defaults to whole utterances; give `window=N`)")
        if hop > window:
            raise ParameterError("hop", f"`window` / `hop`: need 0 < hop <= window (or window 0, no hop), got "
                                 f"{window} / {hop}")
        if window % stride or hop % stride:
            raise ParameterError("window", f"`window` {window} / `hop` {hop}: must be multiples of the model's "
                                 f"stride {stride}")
        if n_phases is None:
            n_phases = stride
        if n_phases != 1 and not aux:
            raise ParameterError("phases", f"`phases` {phases}: only with `aux` (the continuous z); codes stay at "
                                 f"the model's stride (their bitrate would grow {n_phases}-fold)")
        try:
            phase_offsets(stride, n_phases)  # a divisor of the stride
        except ValueError as e:
            raise ParameterError("phases", f"`phases` {phases}: {e}") from None
        self.window, self.hop, self.phases = window, hop, n_phases
        if aux:
            self.rows = None
        elif unit_format == "codebook":
            self.rows = codebook_rows(model.quantizer.codebook)
        else:
            self.rows = onehot_rows(cfg.model.codebook_size)

    @classmethod
    def from_pretrained(cls, model_dir: str | os.PathLike, checkpoint: str | None = None,
                        **kwargs) -> "UnitExtractor":
        """Load the model of an experiment dir (or a checkpoint file) and build the extractor.

        Args:
            model_dir: ``exp/<tag>``, its ``checkpoints/`` dir, or a checkpoint file.
            checkpoint: which checkpoint (``None`` = best, else latest; ``best``, ``latest``,
                ``avgN``, a file name or path): :func:`speechkit.train.checkpoint.resolve_checkpoint`.
            **kwargs: the constructor's (``window``, ``hop``, ``phases``, ``aux``, ``unit_format``).

        Raises:
            FileNotFoundError: no such checkpoint; ValueError: not a VQ-VAE checkpoint, or the
            constructor's errors. With the codebook unit format, identical codebook vectors are
            logged as a warning (the bitrate counts each distinct vector once).
        """
        from speechkit.models.vqvae import VQVAE

        path = resolve_checkpoint(model_dir, checkpoint, param="model_dir")
        model, cfg = load_model(path)
        if not isinstance(model, VQVAE):
            raise ValueError(f"{path}: not a VQ-VAE checkpoint (task {type(model).__name__})")
        self = cls(model, cfg, checkpoint=path, model_dir=model_dir, **kwargs)
        if self.rows is not None and self.unit_format == "codebook" and len(set(self.rows)) < len(self.rows):
            n = len(self.rows) - len(set(self.rows))
            log.warning("%s: %d of %d codebook vectors are identical to another; the bitrate counts each "
                        "distinct vector once (use --unit-format onehot to keep every code apart)",
                        path, n, len(self.rows))
        return self

    def read_paths(self, data_dir: str | os.PathLike) -> list[tuple[str, Path]]:
        """What extracting ``data_dir`` reads besides the data dir itself, as ``(label, path)`` pairs
        (for :func:`speechkit.utils.outputs.check_output_dir`): the checkpoint, the model's training
        data dir, every feature file of ``feats.scp``.

        Raises:
            FileNotFoundError: ``data_dir`` has no feats.scp.
        """
        data_dir = Path(data_dir)
        if not (data_dir / "feats.scp").is_file():
            raise FileNotFoundError(f"{data_dir}/feats.scp: no features (run utils/make_feats.sh first)")
        inputs = [("the checkpoint", self.checkpoint)]
        if self.cfg.data.train_dir and Path(self.cfg.data.train_dir).is_dir():
            inputs.append(("the model's training data dir (data.train_dir)", Path(self.cfg.data.train_dir)))
        inputs += [(f"a feature file of {data_dir}/feats.scp", f) for f in scp_files(data_dir / "feats.scp")]
        return inputs

    def load_features(self, data_dir: str | os.PathLike, utts: list[str] | None = None) -> tuple[list[str], list]:
        """Features of ``data_dir`` normalised as in training (``cfg.data.cmvn``), each checked.

        Args:
            data_dir: data dir with feats.scp (and cmvn.scp when the model was trained with CMVN:
                per-speaker stats of ``data_dir`` itself for ``speaker``, the training set's global
                stats for ``global``, else ``data_dir``'s with a warning).
            utts: which utterances (default: those of utt2spk, else of feats.scp).

        Returns:
            ``(utts, feats)``: utterance ids in C order and their ``(T, D)`` float32 tensors.

        Raises:
            DataError: features of another kind than the training set's (feats.yaml), NaN/Inf,
                fewer frames than the stride (naming the utterance); FileNotFoundError: no
                feats.scp / cmvn.scp.
        """
        import torch

        cfg, data_dir = self.cfg, Path(data_dir)
        train_dir = Path(cfg.data.train_dir)
        mine, theirs = feature_conf(data_dir), feature_conf(train_dir) if train_dir.is_dir() else None
        if mine is not None and theirs is not None and mine != theirs:
            diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            raise DataError(f"{data_dir}/feats.yaml: features differ from the training set's "
                            f"({train_dir}/feats.yaml) in {', '.join(diff)}; compute them with the same "
                            f"front-end config")
        stride = cfg.model.stride
        if cfg.data.cmvn != "global":
            return load_features(data_dir, cfg.data.cmvn, cfg.data.norm_vars, utts, min_frames=stride,
                                 min_frames_key="model.stride")
        # global CMVN: the training set's stats, as the model saw them
        stats_scp = train_dir / "cmvn.scp"
        if not stats_scp.is_file():
            log.warning("%s not found: using the global stats of %s/cmvn.scp instead", stats_scp, data_dir)
            stats_scp = data_dir / "cmvn.scp"
        stats = load_cmvn_stats(stats_scp)
        stats = stats["global"] if "global" in stats else sum(stats.values())
        reader = FeatureReader(data_dir)
        if utts is None:
            utts = list(read_table(data_dir / "utt2spk")) if (data_dir / "utt2spk").is_file() else reader.keys()
        utts = sorted(utts, key=lambda u: u.encode("utf-8"))
        feats = []
        for utt in utts:
            m = reader.raw(utt)
            check_matrix(m, utt, f"{data_dir}/feats.scp", stride, "model.stride")
            feats.append(torch.from_numpy(apply_cmvn(m, stats, norm_vars=cfg.data.norm_vars)))
        return utts, feats

    def encode(self, feats) -> tuple[Any, Any]:
        """Encode one utterance.

        Args:
            feats: ``(T, D)`` normalised features (tensor or array; :meth:`load_features`),
                ``T >= stride``.

        Returns:
            ``(codes, z)``: ``codes`` ``(N,)`` int64 and ``z`` ``(N, De)`` float32 tensors, ``N =
            ceil(T / stride)`` (one row per ``stride * feat_shift`` seconds); with ``phases = P``,
            ``N = ceil(T / (stride / P))`` rows of z every ``stride / P`` input frames, each with
            its code.
        """
        import torch

        from speechkit.models.vqvae import encode_phases, encode_windowed

        feats = torch.as_tensor(feats)
        with torch.no_grad():
            if self.phases > 1:
                z = encode_phases(self.model, feats, self.phases, self.window, self.hop)
                return self.model.quantizer.quantize(z[None])[0], z
            if self.window > 0:
                return encode_windowed(self.model, feats, self.window, self.hop)
            codes, z, _, n = self.model.encode(feats[None], torch.tensor([len(feats)]))
            return codes[0, : int(n[0])], z[0, : int(n[0])]

    __call__ = encode

    def encode_batches(self, feats: list, batch_frames: int = 20000) -> Iterator[list[tuple[int, Any, Any]]]:
        """Encode many utterances, longest first; whole utterances (no windows, one phase) in padded
        batches of at most ``batch_frames`` input frames, else one at a time.

        Yields:
            per batch, ``[(i, codes, z), ...]``: the index into ``feats`` and :meth:`encode`'s output.
        """
        import torch

        order = sorted(range(len(feats)), key=lambda i: -len(feats[i]))
        i = 0
        while i < len(order):
            batch = [order[i]]
            longest = len(feats[order[i]])
            i += 1
            while self.window <= 0 and self.phases == 1 and i < len(order) \
                    and longest * (len(batch) + 1) <= batch_frames:
                batch.append(order[i])
                i += 1
            if len(batch) == 1:
                yield [(batch[0], *self.encode(feats[batch[0]]))]
                continue
            x = torch.nn.utils.rnn.pad_sequence([feats[j] for j in batch], batch_first=True)
            with torch.no_grad():
                codes, z, _, lengths = self.model.encode(x, torch.tensor([len(feats[j]) for j in batch]))
            yield [(j, codes[b, : int(lengths[b])], z[b, : int(lengths[b])]) for b, j in enumerate(batch)]

    def write_utterance(self, path: str | os.PathLike, codes, z) -> None:
        """Write one utterance's unit file: a line per row, z (``aux``, ``%.6g``) or the code's row.

        Args:
            codes: ``(N,)`` codes (tensor, array or list); z: ``(N, De)`` (read only with ``aux``).
        """
        with open(path, "w", encoding="utf-8") as f:
            if self.aux:
                np.savetxt(f, np.asarray(z), fmt="%.6g")
            else:
                f.write("\n".join(self.rows[k] for k in (codes.tolist() if hasattr(codes, "tolist") else codes)))
                f.write("\n")


def write_units(extractor: UnitExtractor, data_dir: str | os.PathLike, utts: list[str] | None,
                out_dir: str | os.PathLike, batch_frames: int = 20000, progress: bool = True) -> dict[str, list[int]]:
    """Encode ``utts`` of ``data_dir`` (all if None) and write their ``<utt>.txt`` into ``out_dir``.

    Returns:
        ``{utt: codes}`` (the code of every written row), in the order encoded (longest first).
    """
    utts, feats = extractor.load_features(data_dir, utts)
    out: dict[str, list[int]] = {}
    bar = tqdm(total=len(utts), desc="extracting units", unit="utt", disable=None if progress else True)
    for batch in extractor.encode_batches(feats, batch_frames):
        for j, codes, z in batch:
            out[utts[j]] = c = codes.tolist()
            extractor.write_utterance(os.path.join(out_dir, f"{utts[j]}.txt"), c, z)
        bar.update(len(batch))
    bar.close()
    return out


def _extract_part(model_path: str, data_dir: str, utts: list[str], out_dir: str, batch_frames: int,
                  options: dict) -> dict[str, list[int]]:
    """One part of :func:`extract_units` in a worker process: load the model, write the part's files."""
    model, cfg = load_model(model_path)
    extractor = UnitExtractor(model, cfg, checkpoint=model_path, **options)
    return write_units(extractor, data_dir, utts, out_dir, batch_frames, progress=False)


def extract_units(extractor: UnitExtractor, data_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                  nj: int = 1, batch_frames: int = 20000) -> dict[str, Any]:
    """Write the unit dir of ``data_dir`` into ``out_dir`` (an existing, empty directory: the
    temporary one of :func:`speechkit.utils.outputs.replace_dir`): ``<utt>.txt`` per utterance,
    ``codes``, ``frame_shift`` (seconds per row, ``stride / phases`` x the features' frame shift)
    and ``units.yaml``.

    Args:
        extractor: the model and its options; built with a ``checkpoint`` when ``nj > 1``.
        data_dir: data dir with feats.scp (utterances: utt2spk, else feats.scp), frame_shift (0.01 s
            when absent).
        nj: worker processes (spawned, one thread each; each loads the checkpoint and encodes a
            part: every nj-th utterance of utt2spk, C-sorted).
        batch_frames: input frames per encoder batch.

    Returns:
        What ``units.yaml`` holds (``num_utts``, ``num_frames``, ``codes_used``, ``frame_shift`` ...).

    Raises:
        :meth:`UnitExtractor.load_features`' errors, naming the utterance; ValueError: ``nj > 1``
        with an extractor built without a checkpoint file.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    fs_file = data_dir / "frame_shift"
    feat_shift = float(fs_file.read_text().split()[0]) if fs_file.is_file() else 0.01
    utts = list(read_table(data_dir / "utt2spk")) if (data_dir / "utt2spk").is_file() else None
    if nj == 1 or utts is None or len(utts) < 2:
        codes = write_units(extractor, data_dir, utts, out_dir, batch_frames)
    else:
        if extractor.checkpoint is None:
            raise ValueError("nj > 1 needs an extractor built with checkpoint= (the workers load the model from it)")
        options = {"aux": extractor.aux, "unit_format": extractor.unit_format, "window": extractor.window,
                   "hop": extractor.hop if extractor.window else None, "phases": extractor.phases}
        parts = split_parts(utts, min(nj, len(utts)))
        jobs = [(j, (str(extractor.checkpoint), str(data_dir), part, str(out_dir), batch_frames, options), {})
                for j, part in enumerate(parts, 1)]
        codes = {}
        for part in run_parts(_extract_part, jobs, workers=len(parts), threads=1):
            codes.update(part)
    write_table(out_dir / "codes", {u: " ".join(map(str, c)) for u, c in codes.items()})
    cfg = extractor.cfg
    shift = cfg.model.stride // extractor.phases * feat_shift
    with atomic_write(out_dir / "frame_shift") as f:
        f.write(f"{shift:.6g}\n")
    info = {
        "model": str(extractor.model_dir), "checkpoint": str(extractor.checkpoint), "data_dir": str(data_dir),
        "kind": "aux" if extractor.aux else extractor.unit_format, "codebook_size": cfg.model.codebook_size,
        "codebook_dim": cfg.model.codebook_dim, "stride": cfg.model.stride, "frame_shift": float(f"{shift:.6g}"),
        "num_utts": len(codes), "num_frames": sum(len(c) for c in codes.values()),
        "codes_used": len({k for c in codes.values() for k in c}),
        "window": extractor.window, "hop": extractor.hop, "phases": extractor.phases,
    }
    with atomic_write(out_dir / "units.yaml") as f:
        yaml.safe_dump(info, f, sort_keys=False)
    return info
