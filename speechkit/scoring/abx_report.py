"""ABX error of a feature dir on an item file, with its bootstrap intervals, JSON and report lines.

What ``speechkit-score-abx`` computes and prints, as a library call: :func:`score_abx_dir` reads the
item file and the features (:func:`speechkit.scoring.feature_dir.load_item_features`), scores them
with :func:`speechkit.scoring.abx.abx_error` and, when asked, adds the speaker-bootstrap interval
(:func:`~speechkit.scoring.abx.bootstrap_interval`) and the paired difference to a reference dir
scored on the same items (:func:`~speechkit.scoring.abx.paired_bootstrap_difference`).
:class:`AbxReport` holds the pieces, its JSON (:meth:`AbxReport.to_dict`) and the report
(:meth:`AbxReport.lines`, the last line being the figure, e.g.
``ABX error (across speakers): 21.34 %``). :func:`check_device` checks a ``--device`` name.

Example::

    from speechkit.scoring.abx_report import score_abx_dir
    rep = score_abx_dir("exp/vqvae/units/test", "data/test/abx.item", bootstrap=1000)
    print("\\n".join(rep.lines())); rep.result.error
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from speechkit.scoring.abx import (
    DEFAULT_TOLERANCE,
    AbxResult,
    BootstrapInterval,
    PairedDifference,
    TooFewResamplesError,
    abx_error,
    bootstrap_interval,
    paired_bootstrap_difference,
)
from speechkit.scoring.abx_items import read_item_file
from speechkit.scoring.feature_dir import load_item_features_and_shift
from speechkit.utils.errors import ParameterError, parameter_template
from speechkit.utils.perf import gc_paused

__all__ = ["AbxReport", "check_device", "score_abx_dir"]


def check_device(name: str, param: str = "device") -> str:
    """``name`` if torch can run on it here (``cpu``, ``cuda``, ``cuda:N``).

    Args:
        name: the device asked for.
        param: the parameter ``name`` came from, named in the errors (a CLI spells it as its flag).

    Raises:
        ParameterError: not a device name, a device type other than cpu/cuda, CUDA asked for without a
            CUDA device (a CPU-only torch, or no GPU), or ``cuda:N`` past the last GPU; names ``param``.
    """
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise ParameterError(param, f"`{param}` {name}: not a torch device (cpu, cuda or cuda:N)") from None
    if dev.type not in ("cpu", "cuda"):
        raise ParameterError(param, f"`{param}` {name}: the DTW runs on cpu or cuda[:N], not {dev.type}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "this torch is built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise ParameterError(param, f"`{param}` {name}: no CUDA device is available ({why}); use `{param}=cpu`")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ParameterError(param, f"`{param}` {name}: there are {torch.cuda.device_count()} CUDA device(s) "
                                 f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
    return name


@dataclass
class AbxReport:
    """The scores of one ``speechkit-score-abx`` run.

    Attributes:
        feature_dir, item_file: what was scored (as given).
        result: the :class:`~speechkit.scoring.abx.AbxResult` of ``feature_dir``.
        bootstrap: its speaker-bootstrap interval, or None (no resampling asked for).
        reference_dir, reference: the paired reference dir and its result, or None.
        paired: the paired difference ``feature_dir - reference_dir``, or None.
    """

    feature_dir: str
    item_file: str
    result: AbxResult
    bootstrap: BootstrapInterval | None = None
    reference_dir: str | None = None
    reference: AbxResult | None = None
    paired: PairedDifference | None = None

    def to_dict(self) -> dict:
        """The JSON of ``--json``: the result's fields, ``bootstrap`` and ``paired`` when computed,
        then ``feature_dir`` and ``item_file``."""
        out = self.result.to_dict()
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap.to_dict()
        if self.paired is not None:
            out["paired"] = {"reference_dir": str(self.reference_dir), "reference_error": self.reference.error,
                             **self.paired.to_dict()}
        out.update(feature_dir=str(self.feature_dir), item_file=str(self.item_file))
        return out

    def lines(self) -> list[str]:
        """The report: distance and convention, items, triplets, the intervals; last, the figure."""
        res = self.result
        lines = [f"distance: {res.distance}{'' if res.normalize else ' (not normalised)'}; "
                 f"frame shift {res.frame_shift} s; convention {res.convention}",
                 f"items: {res.n_items} used ({res.n_items_overlap} with no frame centre inside took their "
                 f"overlapping frame(s)), {res.n_items_dropped} dropped (no frame)",
                 f"triplets: {res.n_triplets} in {res.n_cells} cells over {res.n_phone_pairs} phone pairs "
                 f"({res.n_dtw_pairs} DTW pairs)"]
        if self.bootstrap is not None:
            lines.append(self.bootstrap.summary())
        if self.paired is not None:
            lines.append(f"reference {self.reference_dir}: {self.reference.summary()}")
            lines.append(f"{self.paired.summary()}; "
                         f"{'beyond' if self.paired.significant else 'within'} speaker-sampling noise")
        lines.append(res.summary())
        return lines


@gc_paused
def score_abx_dir(feature_dir: str | os.PathLike, item_file: str | os.PathLike, *, mode: str = "across",
                  distance: str = "cosine", frame_shift: float | None = None, normalize: bool = True,
                  tolerance: float = DEFAULT_TOLERANCE, empty_items: str = "overlap", bootstrap: int = 0,
                  bootstrap_seed: int = 0, paired_with: str | os.PathLike | None = None, device: str = "cpu",
                  convention: str = "zr2019", num_threads: int | None = None, progress: bool = False,
                  timestamps: str = "auto") -> AbxReport:
    """Score ``feature_dir`` (feats.scp or ``<utt>.txt`` files) on ``item_file``, as ``speechkit-score-abx``.

    Args:
        frame_shift: seconds between frames (None: the dir's ``frame_shift`` file, else the step of a
            timestamp column, else 0.01); for ``paired_with`` its own file is read the same way.
        timestamps: ``auto``, ``yes``, ``no``: whether each frame's first number is its time, left out of
            the features (:class:`speechkit.scoring.feature_dir.FeatureDir`; ZeroSpeech 2017's layout).
        bootstrap: speaker resamples for the 95 % interval (0: none).
        paired_with: a reference feature dir scored on the same items; needs ``bootstrap``.
        progress: show progress bars.
        mode, distance, normalize, tolerance, empty_items, device, convention, num_threads: as
            :func:`speechkit.scoring.abx.abx_error` takes them.

    Returns:
        :class:`AbxReport`.

    Raises:
        ParameterError: a negative tolerance or bootstrap count, ``num_threads < 1``, ``paired_with``
            without ``bootstrap``, a device that cannot run here (:func:`check_device`), too few
            usable resamples (names ``bootstrap``), a paired comparison that cannot be made
            (names ``paired_with``); each names the parameter (a CLI spells it as its flag).
        DataError, FileNotFoundError: the errors of the item-file and feature readers.
    """
    if tolerance < 0:
        raise ParameterError("tolerance", f"`tolerance` must be >= 0, got {tolerance}")
    if bootstrap < 0:
        raise ParameterError("bootstrap", f"`bootstrap` must be >= 0, got {bootstrap}")
    if num_threads is not None and num_threads < 1:
        raise ParameterError("num_threads", f"`num_threads` must be >= 1, got {num_threads}")
    if paired_with and not bootstrap:
        raise ParameterError("paired_with", "`paired_with` needs `bootstrap` N (N > 0 resamples)")
    check_device(device)
    items = read_item_file(item_file)

    def score(d) -> AbxResult:
        features, shift = load_item_features_and_shift(d, items, item_file, timestamps=timestamps,
                                                       frame_shift=frame_shift)  # logs what it loads
        return abx_error(features, items, mode=mode, distance=distance, frame_shift=shift,
                         normalize=normalize, tolerance=tolerance, source=str(item_file), progress=progress,
                         device=device, empty_items=empty_items, convention=convention, num_threads=num_threads)

    rep = AbxReport(feature_dir, item_file, score(feature_dir))
    try:
        if paired_with:
            rep.reference_dir, rep.reference = paired_with, score(paired_with)
            try:
                rep.paired = paired_bootstrap_difference(rep.result, rep.reference, bootstrap, bootstrap_seed)
            except TooFewResamplesError:
                raise
            except ValueError as e:
                raise ParameterError("paired_with", f"`paired_with` {paired_with}: {parameter_template(e) or e}") \
                    from None
        if bootstrap:
            rep.bootstrap = bootstrap_interval(rep.result, bootstrap, bootstrap_seed)
    except TooFewResamplesError as e:
        raise ParameterError("bootstrap", f"`bootstrap` {bootstrap}: {e}") from None
    return rep
