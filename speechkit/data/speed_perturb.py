"""Speed perturbation of a Kaldi data directory (Ko et al., "Audio Augmentation for Speech Recognition",
Interspeech 2015), with the semantics of Kaldi's ``utils/data/perturb_data_dir_speed.sh`` and
``utils/data/perturb_data_dir_speed_3way.sh``.

The audio itself is not written: every ``wav.scp`` entry becomes a sox pipe that plays it ``factor``
times faster (``sox ... speed F``: tempo and pitch change together, the sample rate stays), so the
perturbed utterance lasts ``duration / factor`` seconds::

    rec  /path/a.wav               ->  sp0.9-rec sox /path/a.wav -t wav - speed 0.9 |
    rec  flac -dc a.flac |         ->  sp0.9-rec flac -dc a.flac | sox -t wav - -t wav - speed 0.9 |

Ids: utterances, speakers and (with ``segments``) recordings get the prefix ``sp<factor>-``
(``sp0.9-``, ``sp1.1-``), so speaker ids stay prefixes of utterance ids. Times are divided by the
factor: ``segments`` start/end, ``utt2dur``, ``reco2dur`` and speechkit's ``phone_alignments``.
Carried over with the new ids: ``text``, ``utt2lang``, ``spk2gender``; ``utt2uniq`` maps each new
utterance to its source (or to the source's own ``utt2uniq`` entry), as Kaldi writes it, so that
train/dev splits can keep the perturbed copies of one utterance together. Features (``feats.scp``,
``utt2num_frames``, ``cmvn.scp``, ``cmvn_global.ark``, ``frame_shift``, ``feats.yaml``) describe the
unperturbed audio and are not carried: compute them on the perturbed dir (those a DEST holds from
an earlier run are removed, as they would describe other utterances).

``utt2dur`` is required as in Kaldi; when the source has none it is computed from the audio
headers (segments: their spans) first.

The result passes :func:`~speechkit.data.validate.validate` (``speechkit-validate-data-dir
--no-feats``): a source whose speaker ids are not prefixes of its utterance ids (which the
prefixed copies could not fix) is refused up front, naming ``utt2spk``'s line, and the result is
validated before anything is written. The destination may not be, contain or lie inside the source
(:func:`~speechkit.utils.outputs.check_output_dir`).
"""
from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path

from speechkit.data.audio import is_command, probe_audio
from speechkit.data.combine_data import combine
from speechkit.data.datadir import DataDir, Segment, _render_table, extras_of, fmt_seconds
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError, read_table
from speechkit.utils.outputs import check_output_dir

__all__ = ["speed_prefix", "perturb_speed", "perturb_data_dir_speed", "perturb_data_dir_speed_3way",
           "compute_utt2dur"]

logger = logging.getLogger(__name__)


def speed_prefix(factor: float) -> str:
    """Kaldi's id prefix for a speed factor: ``0.9 -> "sp0.9-"``, ``1.1 -> "sp1.1-"``, ``1 -> "sp1.0-"``."""
    _check_factor(factor)
    return f"sp{factor!r}-" if factor != int(factor) else f"sp{float(factor):.1f}-"


def _check_factor(factor: float) -> None:
    if not (isinstance(factor, (int, float)) and factor > 0 and factor == factor and factor != float("inf")):
        raise ValueError(f"speed factor must be a positive number, got {factor!r}")


def _sox_pipe(spec: str, factor: float) -> str:
    """The ``wav.scp`` value that plays ``spec`` (a path or a ``... |`` command) ``factor`` times faster.

    ``sox -R``: the resampling of ``speed`` is followed by sox's automatic dither to 16 bits, which is
    random unless ``-R`` is given; with it the pipe plays the same bytes every time, so features
    computed twice from a perturbed data dir are identical (without it two trainings of one recipe
    differed in every speed-perturbed utterance).
    """
    if is_command(spec):
        return f"{spec.rstrip()[:-1].rstrip()} | sox -R -t wav - -t wav - speed {factor!r} |"
    return f"sox -R {shlex.quote(spec)} -t wav - speed {factor!r} |"


def compute_utt2dur(d: DataDir) -> dict[str, float]:
    """Durations in seconds: ``segments`` spans, else the audio headers of ``wav.scp`` (pipes are run).

    Raises:
        DataError: no ``wav.scp``, or an unreadable entry (naming it).
    """
    if d.segments is not None:
        return {u: s.end - s.start for u, s in d.segments.items() if u in d.utt2spk}
    if d.wav_scp is None:
        raise DataError(f"{d.path}: no wav.scp to compute utt2dur from")
    out = {}
    for utt in d.utts:
        if utt not in d.wav_scp:
            raise DataError(f"{d.path}/wav.scp: no entry for utterance '{utt}'")
        frames, sr = probe_audio(d.wav_scp[utt], key=utt, source=f"{d.path}/wav.scp")
        out[utt] = frames / sr
    return out


def perturb_speed(d: DataDir, factor: float, utt2uniq: dict[str, str] | None = None
                  ) -> tuple[DataDir, dict[str, str]]:
    """The speed-perturbed copy of ``d`` in memory (see the module docstring).

    Args:
        d: source data dir (needs ``wav.scp``; ``utt2dur`` is computed when absent).
        factor: speed factor (> 0), e.g. 0.9 or 1.1.
        utt2uniq: the source's ``utt2uniq`` if any.

    Returns:
        ``(perturbed, utt2uniq)``: the new data dir and its ``utt2uniq`` (new utt -> source id).

    Raises:
        ValueError: a bad factor; DataError: no ``wav.scp``, an utterance without audio.
    """
    _check_factor(factor)
    if d.wav_scp is None:
        raise DataError(f"{d.path}: no wav.scp (speed perturbation needs the audio)")
    p = speed_prefix(factor)
    utt2dur = d.utt2dur if d.utt2dur is not None else compute_utt2dur(d)
    missing = [u for u in d.utts if u not in utt2dur]
    if missing:
        raise DataError(f"{d.path}/utt2dur: no duration for {len(missing)} utterance(s), e.g. '{missing[0]}'")
    out = DataDir()
    out.utt2spk = {p + u: p + s for u, s in d.utt2spk.items()}
    for attr in ("text", "utt2lang"):
        table = getattr(d, attr)
        if table is not None:
            setattr(out, attr, {p + k: v for k, v in table.items() if k in d.utt2spk})
    if d.spk2gender is not None:
        out.spk2gender = {p + k: v for k, v in d.spk2gender.items()}
    out.utt2dur = {p + u: utt2dur[u] / factor for u in d.utt2spk}
    if d.segments is not None:
        out.segments = {p + u: Segment(p + s.recording, s.start / factor, s.end / factor)
                        for u, s in d.segments.items() if u in d.utt2spk}
        recs = {s.recording for u, s in d.segments.items() if u in d.utt2spk}
        out.wav_scp = {p + r: _sox_pipe(v, factor) for r, v in d.wav_scp.items() if r in recs}
    else:
        out.wav_scp = {p + u: _sox_pipe(v, factor) for u, v in d.wav_scp.items() if u in d.utt2spk}
    if d.phone_alignments is not None:
        out.phone_alignments = {}
        for u, lines in d.phone_alignments.items():
            if u not in d.utt2spk:
                continue
            new = []
            for line in lines:
                start, end, *rest = line.split()
                new.append(" ".join([fmt_seconds(float(start) / factor), fmt_seconds(float(end) / factor), *rest]))
            out.phone_alignments[p + u] = new
    uniq = {p + u: (utt2uniq or {}).get(u, u) for u in d.utt2spk}
    return out, uniq


def _load(src: str | os.PathLike) -> tuple[DataDir, dict[str, str] | None, dict[str, str] | None]:
    src = Path(src)
    d = DataDir.load(src)
    for lineno, (utt, spk) in enumerate(d.utt2spk.items(), 1):
        if not utt.startswith(spk):
            raise DataError(f"{src}/utt2spk:{lineno}: speaker id '{spk}' is not a prefix of utterance id '{utt}', "
                            "so the perturbed dir would not validate (Kaldi sorts utt2spk by utterance and by "
                            "speaker alike); give the utterances their speaker as a prefix first (e.g. "
                            "utils/copy_data_dir.sh --utt-prefix), or run utils/fix_data_dir.sh on SRC")
    utt2uniq = read_table(src / "utt2uniq") if (src / "utt2uniq").is_file() else None
    reco2dur = read_table(src / "reco2dur") if (src / "reco2dur").is_file() else None
    return d, utt2uniq, reco2dur


def _write(out: DataDir, dest: str | os.PathLike, utt2uniq: dict[str, str],
           reco2dur: dict[str, float] | None) -> None:
    dest = Path(dest)
    out.path = dest  # for the messages
    problems = validate(out, no_feats=True, no_text=out.text is None)
    if problems:
        raise DataError(f"{dest}: the perturbed dir would not validate ({len(problems)} problem(s), first: "
                        f"{problems[0]}); nothing written (check SRC with speechkit-validate-data-dir --no-feats)")
    # a stale feats.scp / utt2num_frames / cmvn.scp (``out`` has none) and the other feature files of
    # an earlier run in DEST (frame_shift, feats.yaml, cmvn_global.ark) describe features the perturbed
    # utterances do not have: removed (backed up) unless DEST holds these very utterances and audio
    side = {"utt2uniq": _render_table(utt2uniq),
            "reco2dur": None if reco2dur is None else _render_table({k: fmt_seconds(v) for k, v in reco2dur.items()})}
    out.write(dest, extras={**extras_of(None), **side}, why="features are not carried by speed perturbation")


def _check_dest(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    check_output_dir(dest, inputs={"SRC": src}, option="DEST")


def _scaled_reco2dur(reco2dur: dict[str, str] | None, factor: float, prefix: str, src: Path) -> dict[str, float]:
    out = {}
    for i, (k, v) in enumerate((reco2dur or {}).items(), 1):
        try:
            out[prefix + k] = float(v) / factor
        except ValueError:
            raise DataError(f"{src}/reco2dur:{i}: duration of '{k}' is not a number: {v!r}") from None
    return out


def perturb_data_dir_speed(factor: float, src: str | os.PathLike, dest: str | os.PathLike) -> DataDir:
    """Kaldi's ``utils/data/perturb_data_dir_speed.sh FACTOR SRC DEST``: write the perturbed dir.

    Raises:
        ValueError: bad factor; OutputOverlapError (a ValueError): ``dest`` is, contains or lies
            inside ``src``; DataError: as :func:`perturb_speed`, a source speaker id that is not a
            prefix of its utterance ids (names ``utt2spk``'s line), a result that would not validate
            (nothing written).
    """
    _check_dest(src, dest)
    d, utt2uniq, reco2dur = _load(src)
    out, uniq = perturb_speed(d, factor, utt2uniq)
    r2d = _scaled_reco2dur(reco2dur, factor, speed_prefix(factor), Path(src)) if reco2dur is not None else None
    if r2d is not None and d.segments is None:  # recordings are the utterances: keep the two in step
        r2d = {k: v for k, v in r2d.items() if k in out.utt2spk}
    _write(out, dest, uniq, r2d)
    logger.info("%s: %d utterances at speed %g (%.1f s of audio from %.1f s)", dest, len(out), factor,
                sum(out.utt2dur.values()), sum(out.utt2dur.values()) * factor)
    return out


def perturb_data_dir_speed_3way(src: str | os.PathLike, dest: str | os.PathLike,
                                always_include_prefix: bool = False,
                                factors: tuple[float, float] = (0.9, 1.1)) -> DataDir:
    """Kaldi's ``utils/data/perturb_data_dir_speed_3way.sh SRC DEST``: the source plus its 0.9 and 1.1
    speed copies, combined (3x the data). The source keeps its ids, or gets ``sp1.0-`` with
    ``always_include_prefix`` (Kaldi's ``--always-include-prefix true``: every id then has a prefix
    of the same length, which keeps the sort orders of utterances and speakers compatible).

    Features of the source are not carried (they would cover only a third of the dir).

    Raises:
        OutputOverlapError (a ValueError): ``dest`` is, contains or lies inside ``src``; DataError:
            as :func:`perturb_data_dir_speed`.
    """
    _check_dest(src, dest)
    d, utt2uniq, reco2dur = _load(src)
    if d.utt2dur is None:
        d.utt2dur = compute_utt2dur(d)
    base_factor = 1.0
    if always_include_prefix:
        base, base_uniq = perturb_speed(d, base_factor, utt2uniq)
        # factor 1: the audio needs no sox pipe
        if d.segments is not None:
            base.wav_scp = {speed_prefix(1.0) + r: v for r, v in d.wav_scp.items()
                            if speed_prefix(1.0) + r in {s.recording for s in base.segments.values()}}
        else:
            base.wav_scp = {speed_prefix(1.0) + u: v for u, v in d.wav_scp.items() if u in d.utt2spk}
    else:
        base = DataDir(wav_scp=d.wav_scp, utt2spk=dict(d.utt2spk), text=d.text, segments=d.segments,
                       utt2lang=d.utt2lang, utt2dur=d.utt2dur, spk2gender=d.spk2gender,
                       phone_alignments=d.phone_alignments, path=d.path)
        base_uniq = {u: (utt2uniq or {}).get(u, u) for u in d.utt2spk}
    parts, uniq = [base], dict(base_uniq)
    r2d: dict[str, float] | None = None
    if reco2dur is not None:
        r2d = _scaled_reco2dur(reco2dur, 1.0, speed_prefix(1.0) if always_include_prefix else "", Path(src))
    for f in factors:
        out, u = perturb_speed(d, f, utt2uniq)
        parts.append(out)
        uniq.update(u)
        if r2d is not None:
            r2d.update(_scaled_reco2dur(reco2dur, f, speed_prefix(f), Path(src)))
    combined = combine(parts)
    if r2d is not None and combined.segments is None:
        r2d = {k: v for k, v in r2d.items() if k in combined.utt2spk}
    _write(combined, dest, uniq, r2d)
    logger.info("%s: %d utterances (the source and speeds %s)", dest, len(combined),
                ", ".join(f"{f:g}" for f in factors))
    return combined
