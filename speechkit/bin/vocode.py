"""Copy synthesis of a feature dir (WORLD, or Griffin-Lim from log-mel): a data dir of the vocoded waveforms.

  speechkit-vocode [--nj N] [--spectrograms N] [--griffin-lim-iters N] FEATS_DIR OUT_DIR

Every utterance of FEATS_DIR/feats.scp goes to OUT_DIR/wav/<utt>.wav (16-bit PCM at the config's
sample rate, scaled down only if it would clip), by the vocoder FEATS_DIR/feats.yaml calls for:
  - WORLD features (type world, or a config with mcep_dim; speechkit-compute-feats with a WORLD
    config, or speechkit-tts-synthesize: (T, 43) [mcep 40 | lf0 | vuv | bap]): WORLD synthesis
    (pyworld; speechkit.features.world);
  - log-mel features (type logmel; conf/logmel.yaml, the targets of the tacotron2 task):
    mel-filterbank inversion + Griffin-Lim (speechkit.decode.griffin_lim.mel_to_waveform, the
    vocoder of the tacotron2 syntheses; --griffin-lim-iters iterations, seed 0), giving
    hop_length * (T - 1) samples.
OUT_DIR is then a Kaldi data dir of those waveforms -- wav.scp, and utt2spk / spk2utt / text /
utt2lang copied from FEATS_DIR where present -- ready for speechkit-embed-speakers.

Used by egs/vctk_continual for the speaker verifier of Hemati & Borth (2024), section 2.3: the
ground-truth utterances pass through the same vocoder as the synthesized ones (WORLD for salad,
Griffin-Lim for tacotron2), so that the verifier does not learn the vocoder's traces as a
speaker cue.

--spectrograms N also writes wav/<utt>.png for the first N utterances (C order; none for a wav
shorter than the 25 ms analysis window, with a warning naming it). An utterance that cannot be
synthesized is an error naming it.

OUT_DIR is written as a whole: every file (the --nj jobs' wavs included) goes to a temporary
directory that replaces OUT_DIR only when all are done, so a failed or killed run leaves the
previous OUT_DIR complete and untouched, and a re-run leaves no wav of an earlier one behind. The
previous OUT_DIR is deleted, not backed up: copy synthesis is derived data that a re-run of the same
inputs gives again (the vctk recipe re-runs it at every stage 5), and backups of it would pile up. OUT_DIR may not be, contain or lie inside FEATS_DIR
or the feature arks it reads; an existing file as OUT_DIR is an error. Both, and the options, are
checked before any work.

Example:
  speechkit-vocode --nj 2 data/train data/train_world
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import yaml

from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-vocode"
log = logging.getLogger(PROG)

_COPIED = ("utt2spk", "text", "utt2lang")


def _is_logmel(conf: dict) -> bool:
    return conf.get("type") == "logmel"


def griffin_lim_vocode(utt: str, log_mel, conf: dict, wav_dir: str, title: str, plot: bool = False,
                       n_iter: int = 60) -> tuple[str, str, float, bool]:
    """Griffin-Lim one ``(T, n_mels)`` natural-log mel utterance to ``wav_dir/<utt>.wav`` (+ its
    spectrogram ``.png`` if ``plot`` and the wav is at least one 25 ms window long); returns
    ``(utt, path, seconds, plotted)``.

    Raises:
        DataError: features of the wrong shape or not finite (names the utterance).
    """
    import numpy as np

    from speechkit.bin.tts_synthesize import plot_spectrogram
    from speechkit.data.audio import write_wav
    from speechkit.decode.griffin_lim import mel_to_waveform

    sr = int(conf.get("sample_rate", 16000))
    if not np.isfinite(log_mel).all():
        raise DataError(f"utterance '{utt}': NaN or infinite log-mel values")
    try:
        wav = mel_to_waveform(log_mel, conf, n_iter=n_iter).astype(np.float64)
    except ValueError as e:
        raise DataError(f"utterance '{utt}': {e}") from None
    peak = float(np.abs(wav).max()) if wav.size else 0.0
    if peak > 0.99:
        wav = wav * (0.99 / peak)
    path = Path(wav_dir) / f"{utt}.wav"
    write_wav(path, wav, sr)
    plotted = plot_spectrogram(path.with_suffix(".png"), wav, sr, title) if plot else False
    return utt, str(path.resolve()), len(wav) / sr, plotted


def _vocode_part(feats_scp: str, utts: list[str], conf: dict, wav_dir: str, spectrograms: list[str],
                 n_iter: int = 60) -> list[tuple[str, str, float, bool]]:
    import kaldiio
    import numpy as np

    from speechkit.bin.tts_synthesize import vocode

    loader = kaldiio.load_scp(feats_scp)
    out = []
    for utt in utts:
        try:
            feats = np.asarray(loader[utt], dtype=np.float64)
        except Exception as e:  # kaldiio raises several types for a bad ark
            raise DataError(f"{feats_scp}: '{utt}': cannot read its features: {e}") from None
        if _is_logmel(conf):
            out.append(griffin_lim_vocode(utt, feats, conf, wav_dir, f"{utt}: Griffin-Lim copy synthesis",
                                          plot=utt in spectrograms, n_iter=n_iter))
        else:
            out.append(vocode(utt, feats, conf, wav_dir, f"{utt}: WORLD copy synthesis",
                              plot=utt in spectrograms))
    return out


def vocode_feature_dir(feats_dir: str | os.PathLike, out_dir: str | os.PathLike, *, nj: int = 1,
                       spectrograms: int = 0, griffin_lim_iters: int = 60) -> int:
    """Copy-synthesize every utterance of ``feats_dir`` into the data dir ``out_dir``: WORLD
    synthesis for WORLD features, Griffin-Lim (``griffin_lim_iters`` iterations) for log-mel ones
    (``feats.yaml`` type ``logmel``); see the module docstring.

    Returns:
        The number of utterances written.

    Raises:
        ValueError: ``nj`` < 1, negative ``spectrograms``, ``griffin_lim_iters`` < 1.
        OutputOverlapError: ``out_dir`` is, contains or lies inside ``feats_dir`` or a feature ark.
        FileNotFoundError: no feats.scp or feats.yaml in ``feats_dir``.
        DataError: features of another type, features the vocoder cannot synthesize, or
            unreadable ones (names the utterance).
    """
    from speechkit.bin.tts_synthesize import warn_unplotted
    from speechkit.data.datadir import c_sorted
    from speechkit.features.io import scp_files
    from speechkit.utils.fileio import read_table

    if nj < 1:
        raise ValueError(f"--nj must be >= 1, got {nj}")
    if spectrograms < 0:
        raise ValueError(f"--spectrograms must be >= 0, got {spectrograms}")
    if griffin_lim_iters < 1:
        raise ValueError(f"--griffin-lim-iters must be >= 1, got {griffin_lim_iters}")
    src, out = Path(feats_dir), Path(out_dir)
    check_output_dir(out, inputs={"FEATS_DIR": src}, option="OUT_DIR")
    for f in ("feats.scp", "feats.yaml"):
        if not (src / f).is_file():
            raise FileNotFoundError(f"{src / f}: no such file (a WORLD or log-mel feature dir is needed)")
    check_output_dir(out, option="OUT_DIR",
                     inputs=[(f"a feature file of {src / 'feats.scp'}", f) for f in scp_files(src / "feats.scp")])
    conf = yaml.safe_load((src / "feats.yaml").read_text(encoding="utf-8")) or {}
    if not _is_logmel(conf) and conf.get("type", "world") != "world" and "mcep_dim" not in conf:
        raise DataError(f"{src / 'feats.yaml'}: neither WORLD nor log-mel features (type {conf.get('type')!r})")
    utts = c_sorted(read_table(src / "feats.scp"))
    if not utts:
        raise DataError(f"{src / 'feats.scp'}: empty")
    plot = set(utts[:spectrograms])
    nj = max(1, min(nj, len(utts)))
    parts = [utts[i::nj] for i in range(nj)]
    t0 = time.time()
    final_wav_dir = Path(os.path.abspath(out)) / "wav"  # where the wavs will be once the temporary dir is swapped in
    with replace_dir(out, backup=False) as tmp:
        wav_dir = tmp / "wav"  # every job writes here
        wav_dir.mkdir()
        if nj > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(nj, mp_context=multiprocessing.get_context("spawn")) as ex:
                results = [r for part in ex.map(_vocode_part, [str(src / "feats.scp")] * nj, parts, [conf] * nj,
                                                [str(wav_dir)] * nj, [sorted(plot)] * nj, [griffin_lim_iters] * nj)
                           for r in part]
        else:
            results = _vocode_part(str(src / "feats.scp"), utts, conf, str(wav_dir), sorted(plot), griffin_lim_iters)
        warn_unplotted(results, plot, log)
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
    log.info("%s: vocoded %d utterances (%.1f s of audio) in %.1f s -> %s",
             "Griffin-Lim" if _is_logmel(conf) else "WORLD", len(results),
             sum(sec for _, _, sec, _ in results), time.time() - t0, out)
    return len(results)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("feats_dir", metavar="FEATS_DIR", help="dir with feats.scp and feats.yaml (WORLD or logmel)")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="data dir to write (wav.scp + wav/); replaced as a whole (derived data: no backup)")
    parser.add_argument("--nj", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--spectrograms", type=int, default=0, metavar="N",
                        help="spectrogram PNGs of the first N utterances, N >= 0 (default: 0)")
    parser.add_argument("--griffin-lim-iters", "--griffin_lim_iters", dest="griffin_lim_iters", type=int, default=60,
                        metavar="N", help="Griffin-Lim iterations for log-mel features (default: 60)")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file)
        vocode_feature_dir(args.feats_dir, args.out_dir, nj=args.nj, spectrograms=args.spectrograms,
                           griffin_lim_iters=args.griffin_lim_iters)
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    raise SystemExit(main())
