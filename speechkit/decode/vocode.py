"""Vocoding acoustic features to wav files: WORLD synthesis, Griffin-Lim from log-mel, a whole feature dir.

* :func:`world_vocode`: one utterance's WORLD features ``(T, 43)`` ``[mcep 40 | lf0 | vuv | bap]``
  -> :func:`speechkit.features.world.world_synthesize` -> ``<utt>.wav``;
* :func:`griffin_lim_vocode`: one utterance's natural-log mel ``(T, n_mels)`` ->
  :func:`speechkit.decode.griffin_lim.mel_to_waveform` -> ``<utt>.wav``;
* :func:`speechkit.utils.jobs.map_jobs` runs either of them over many utterances, in spawned processes
  when asked;
* :func:`vocode_feature_dir`: copy synthesis of a feature dir into a data dir of the waveforms
  (speechkit-vocode).

Each wav is written by :func:`speechkit.decode.audio_out.write_synthesized` (peak at most 0.99,
16-bit PCM, the spectrogram PNG when asked for). The per-utterance vocoders are module-level
functions of picklable arguments, so that a process pool can run them.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from speechkit.data.datadir import c_sorted
from speechkit.decode.audio_out import warn_unplotted, write_synthesized
from speechkit.features.frontends import build_frontend, load_frontend_conf
from speechkit.features.io import ScpReader, scp_files
from speechkit.utils.cli import ConfigError
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, id_file, read_table, write_table
from speechkit.utils.jobs import map_jobs
from speechkit.utils.outputs import check_output_dir, replace_dir

# features.world (pyworld) and decode.griffin_lim (torch) are imported where used: each vocoder needs only its own.

__all__ = ["world_vocode", "griffin_lim_vocode", "vocode_feature_dir", "is_logmel"]

log = logging.getLogger(__name__)

_COPIED = ("utt2spk", "text", "utt2lang")


def _read_feats_yaml(path: Path) -> dict:
    """``feats.yaml`` as a checked front-end config.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: not YAML (names line and column), not a mapping, or a key or value that its
            front end refuses (names the file and the key); ``sample_rate`` not a positive integer.
    """
    conf = load_frontend_conf(path)
    if "type" in conf:
        build_frontend(conf, source=str(path))  # the key and value checks of compute-feats' own configs
    sr = conf.get("sample_rate", 16000)
    if isinstance(sr, bool) or not isinstance(sr, int) or sr <= 0:
        raise ConfigError(f"{path}: key 'sample_rate': expected a positive integer (Hz), got {sr!r}")
    return conf


def is_logmel(conf: dict) -> bool:
    """True for a ``logmel`` front-end config (Griffin-Lim), False for anything else (WORLD)."""
    return conf.get("type") == "logmel"



def world_vocode(utt: str, feats: np.ndarray, conf: dict, wav_dir: str, title: str, plot: bool = True
                 ) -> tuple[str, str, float, bool]:
    """WORLD-synthesize one utterance to ``wav_dir/<utt>.wav`` (+ its spectrogram ``.png`` if ``plot``
    and the wav is at least one 25 ms window long).

    Args:
        utt: the utterance id (the file name, and named in errors).
        feats: ``(T, mcep_dim + 2 + num_bap)`` WORLD features (float32 or float64).
        conf: the WORLD config (``feats.yaml``); its ``sample_rate`` (default 16000 Hz) is the wav's.
        wav_dir: an existing directory.
        title: the spectrogram's title.
        plot: draw the spectrogram.

    Returns:
        ``(utt, path, seconds, plotted)``: the wav's absolute path and duration, whether the PNG was drawn.

    Raises:
        DataError: world_synthesize rejects the features (names the utterance).
    """
    from speechkit.features.world import world_synthesize

    sr = int(conf.get("sample_rate", 16000))
    try:
        wav = world_synthesize(feats, sr, conf)
    except ValueError as e:
        raise DataError(f"utterance '{utt}': {e}") from None
    path = id_file(wav_dir, utt, ".wav")
    seconds, plotted = write_synthesized(path, wav, sr, title if plot else None)
    return utt, str(path.resolve()), seconds, plotted


def griffin_lim_vocode(utt: str, log_mel, conf: dict, wav_dir: str, title: str, plot: bool = False,
                       n_iter: int = 60) -> tuple[str, str, float, bool]:
    """Griffin-Lim one ``(T, n_mels)`` natural-log mel utterance to ``wav_dir/<utt>.wav`` (+ its
    spectrogram ``.png`` if ``plot`` and the wav is at least one 25 ms window long).

    Args:
        utt: the utterance id (the file name, and named in errors).
        log_mel: ``(T, n_mels)`` natural-log mel energies of the ``logmel`` front end ``conf``.
        conf: the ``logmel`` front-end config (``feats.yaml``); its ``sample_rate`` (default 16000 Hz).
        wav_dir: an existing directory.
        title: the spectrogram's title.
        plot: draw the spectrogram.
        n_iter: Griffin-Lim iterations (seed 0); the wav has ``hop_length * (T - 1)`` samples.

    Returns:
        ``(utt, path, seconds, plotted)``: the wav's absolute path and duration, whether the PNG was drawn.

    Raises:
        DataError: features of the wrong shape or not finite (names the utterance).
    """
    from speechkit.decode.griffin_lim import mel_to_waveform

    sr = int(conf.get("sample_rate", 16000))
    if not np.isfinite(log_mel).all():
        raise DataError(f"utterance '{utt}': NaN or infinite log-mel values")
    try:
        wav = mel_to_waveform(log_mel, conf, n_iter=n_iter).astype(np.float64)
    except ValueError as e:
        raise DataError(f"utterance '{utt}': {e}") from None
    path = id_file(wav_dir, utt, ".wav")
    seconds, plotted = write_synthesized(path, wav, sr, title if plot else None)
    return utt, str(path.resolve()), seconds, plotted


def _vocode_part(feats_scp: str, utts: list[str], conf: dict, wav_dir: str, spectrograms: list[str],
                 n_iter: int = 60) -> list[tuple[str, str, float, bool]]:
    """Vocode ``utts`` of ``feats_scp`` (one job of :func:`vocode_feature_dir`)."""
    feats_of = ScpReader(feats_scp, what="features")
    out = []
    for utt in utts:
        feats = np.asarray(feats_of.read(utt), dtype=np.float64)  # as stored: the vocoder checks the shape
        if is_logmel(conf):
            out.append(griffin_lim_vocode(utt, feats, conf, wav_dir, f"{utt}: Griffin-Lim copy synthesis",
                                          plot=utt in spectrograms, n_iter=n_iter))
        else:
            out.append(world_vocode(utt, feats, conf, wav_dir, f"{utt}: WORLD copy synthesis",
                                    plot=utt in spectrograms))
    return out


def vocode_feature_dir(feats_dir: str | os.PathLike, out_dir: str | os.PathLike, *, nj: int = 1,
                       spectrograms: int = 0, griffin_lim_iters: int = 60, logger: logging.Logger = log) -> int:
    """Copy-synthesize every utterance of ``feats_dir`` into the data dir ``out_dir`` (speechkit-vocode).

    WORLD synthesis for WORLD features (``feats.yaml`` type ``world``, or one with ``mcep_dim``),
    Griffin-Lim (``griffin_lim_iters`` iterations, seed 0) for log-mel ones (type ``logmel``).
    ``out_dir`` gets ``wav/<utt>.wav`` (16-bit PCM at the config's sample rate, peak at most 0.99),
    ``wav/<utt>.png`` for the first ``spectrograms`` utterances (C order; none for a wav shorter than
    25 ms, with a warning naming it), ``wav.scp`` naming the wavs where they are once written, and
    ``utt2spk`` / ``spk2utt`` / ``text`` / ``utt2lang`` / ``spk2gender`` from ``feats_dir`` where
    present. It is replaced as a whole, without a backup when an earlier run of this function wrote it,
    else keeping the directory found there in ``out_dir/.backup/N`` (:func:`speechkit.utils.outputs.replace_dir`).

    Args:
        feats_dir: dir with ``feats.scp`` and ``feats.yaml``.
        out_dir: the data dir to write.
        nj: worker processes (each vocodes every ``nj``-th utterance).
        spectrograms: PNGs of the first N utterances.
        griffin_lim_iters: Griffin-Lim iterations for log-mel features.
        logger: where the warning and the summary line go (a CLI passes its own).

    Returns:
        The number of utterances written.

    Raises:
        ParameterError: ``nj`` < 1, negative ``spectrograms``, ``griffin_lim_iters`` < 1 (naming it).
        OutputOverlapError: ``out_dir`` is, contains or lies inside ``feats_dir`` or a feature ark.
        FileNotFoundError: no feats.scp or feats.yaml in ``feats_dir``.
        DataError: features of another type, features the vocoder cannot synthesize, or
            unreadable ones (names the utterance).
        ConfigError: a ``feats.yaml`` that is not a front-end config (names the file, and the key at fault).
    """
    if nj < 1:
        raise ParameterError("nj", f"`nj` must be >= 1, got {nj}")
    if spectrograms < 0:
        raise ParameterError("spectrograms", f"`spectrograms` must be >= 0, got {spectrograms}")
    if griffin_lim_iters < 1:
        raise ParameterError("griffin_lim_iters", f"`griffin_lim_iters` must be >= 1, got {griffin_lim_iters}")
    src, out = Path(feats_dir), Path(out_dir)
    check_output_dir(out, inputs={"FEATS_DIR": src}, option="OUT_DIR")
    for f in ("feats.scp", "feats.yaml"):
        if not (src / f).is_file():
            raise FileNotFoundError(f"{src / f}: no such file (a WORLD or log-mel feature dir is needed)")
    check_output_dir(out, option="OUT_DIR",
                     inputs=[(f"a feature file of {src / 'feats.scp'}", f) for f in scp_files(src / "feats.scp")])
    conf = _read_feats_yaml(src / "feats.yaml")
    if not is_logmel(conf) and conf.get("type", "world") != "world" and "mcep_dim" not in conf:
        raise DataError(f"{src / 'feats.yaml'}: neither WORLD nor log-mel features (type {conf.get('type')!r})")
    utts = c_sorted(read_table(src / "feats.scp"))
    if not utts:
        raise DataError(f"{src / 'feats.scp'}: empty")
    plot = set(utts[:spectrograms])
    nj = max(1, min(nj, len(utts)))
    parts = [utts[i::nj] for i in range(nj)]
    t0 = time.time()
    final_wav_dir = Path(os.path.abspath(out)) / "wav"  # where the wavs will be once the temporary dir is swapped in
    with replace_dir(out, backup=False, owner="speechkit-vocode") as tmp:
        wav_dir = tmp / "wav"  # every job writes here
        wav_dir.mkdir()
        jobs = [(str(src / "feats.scp"), part, conf, str(wav_dir), sorted(plot), griffin_lim_iters) for part in parts]
        results = [r for part in map_jobs(_vocode_part, jobs, nj) for r in part]
        warn_unplotted(results, plot, logger)
        for f in _COPIED:
            if (src / f).is_file():
                table = read_table(src / f)
                write_table(tmp / f, {u: table[u] for u in utts if u in table})
        if (tmp / "utt2spk").is_file():
            spk2utt: dict[str, list[str]] = {}
            for u, s in read_table(tmp / "utt2spk").items():
                spk2utt.setdefault(s, []).append(u)
            write_table(tmp / "spk2utt", {s: " ".join(us) for s, us in spk2utt.items()})
        if (src / "spk2gender").is_file():
            shutil.copyfile(src / "spk2gender", tmp / "spk2gender")
        write_table(tmp / "wav.scp", {u: str(final_wav_dir / Path(p).name) for u, p, _, _ in results})
    logger.info("%s: vocoded %d utterances (%.1f s of audio) in %.1f s -> %s",
                "Griffin-Lim" if is_logmel(conf) else "WORLD", len(results),
                sum(sec for _, _, sec, _ in results), time.time() - t0, out)
    return len(results)
