"""Synthesize WORLD features (and waveforms) from label vectors with a trained acoustic model.

  speechkit-tts-synthesize --model-dir EXP [--checkpoint best|latest|avgN|NAME|PATH] [--num-wavs N] [--nj N]
                           [--speaker-embeddings SCP] [--speaker SPK] DATA_DIR OUT_DIR

Runs every utterance of DATA_DIR/labels.scp (float32 (T, D) label vectors, speechkit-make-labels)
through the acoustic model trained in EXP (speechkit-train salad | musa_rnn): the whole utterance
at once, the MUSA-RNN from zero state and SALAD from position 0 (Pascual et al. 2018). The
prediction is denormalised with the model's min-max statistics and the V/UV column is thresholded
to 0/1 at 0.5. OUT_DIR gets:

  feats.scp, feats.ark   predicted WORLD features (T, 43) [mcep 40 | lf0 | vuv | bap], one frame per label frame
  utt2num_frames         frames per utterance
  frame_shift            seconds per frame (frame_period of feats.yaml / 1000)
  feats.yaml             the WORLD config of the training data (EXP/feats.yaml, else data.train_dir/feats.yaml)
  wav/<utt>.wav          with --num-wavs N: the first N utterances (C order) through world_synthesize
                         (16-bit PCM, scaled down only if it would clip), wav/wav.scp listing them
  wav/<utt>.png          the spectrogram of each wav (none for a wav shorter than its 25 ms analysis
                         window: a warning names those utterances)

A speaker-conditioned model (trained with data.speaker_embeddings; Hemati & Borth 2024, sec. 2.1)
gets each label frame's speaker vector appended, from --speaker-embeddings (default: the scp the
model was trained with): with --speaker SPK every utterance in SPK's voice, else each utterance
in its own speaker's voice (DATA_DIR/utt2spk). A speaker the model was never trained on
(not in EXP/speakers) or without a vector in the scp is an error naming it; nothing is written.

OUT_DIR is a feature dir for speechkit-score-mcd REF OUT_DIR. It is written as a whole: every file
(the --nj vocoding jobs' wavs included) goes to a temporary directory that replaces OUT_DIR only when
all are done, so a failed or killed run leaves the previous OUT_DIR complete and untouched, and a
re-run leaves no file of an earlier one behind; the previous OUT_DIR is kept as OUT_DIR/.backup/N.
OUT_DIR may not be, contain or lie inside DATA_DIR, the label arks, the checkpoint or the speaker
vectors, nor be or contain EXP (EXP/synth/test is fine); an existing file as OUT_DIR is an error.
Options and OUT_DIR are checked before any work. An utterance whose labels have the wrong dimension
or hold NaN/Inf is an error naming it.

Example:
  speechkit-tts-synthesize --model-dir exp/S/salad_small --num-wavs 3 data/S/test_labels exp/S/salad_small/synth_test
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from speechkit.decode.vocode import world_vocode as vocode
from speechkit.utils.cli import add_model_args, make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, read_table, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-tts-synthesize"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="dir with labels.scp")
    p.add_argument("out_dir", metavar="OUT_DIR", help="output feature dir")
    add_model_args(p, help="experiment dir of speechkit-train salad | musa_rnn", default="best")
    p.add_argument("--num-wavs", "--num_wavs", dest="num_wavs", type=int, default=0, metavar="N",
                   help="also vocode the first N utterances to OUT_DIR/wav/<utt>.wav (default: 0)")
    p.add_argument("--speaker-embeddings", "--speaker_embeddings", dest="speaker_embeddings", default=None,
                   metavar="SCP", help="speaker -> vector scp for a speaker-conditioned model "
                                       "(default: data.speaker_embeddings of its training config)")
    p.add_argument("--speaker", default=None, metavar="SPK",
                   help="synthesize every utterance in this trained speaker's voice (default: each "
                        "utterance's own speaker from DATA_DIR/utt2spk)")
    p.add_argument("--nj", type=int, default=1, metavar="N", help="parallel processes for vocoding (default: 1)")
    p.add_argument("--log-file", default=None, help="also append the log here")
    return p


def _run(args) -> int:
    import kaldiio

    from speechkit.decode.audio_out import warn_unplotted
    from speechkit.utils.jobs import map_jobs
    from speechkit.features.io import ark_scp_writer, scp_files
    from speechkit.tasks.synthesize import Synthesizer

    setup_logging(args.log_file)
    if args.num_wavs < 0:
        raise ValueError(f"--num-wavs must be >= 0, got {args.num_wavs}")
    if args.nj < 1:
        raise ValueError(f"--nj must be >= 1, got {args.nj}")
    model_dir, data_dir, out_dir = Path(args.model_dir), Path(args.data_dir), Path(args.out_dir)
    check_output_dir(out_dir, inputs={"DATA_DIR": data_dir}, experiment_dirs={"--model-dir": model_dir},
                     option="OUT_DIR")
    synth = Synthesizer(model_dir, args.checkpoint, option="--model-dir", speaker_embeddings=args.speaker_embeddings,
                        input="labels")
    cfg, conf = synth.cfg, synth.conf
    if conf is None:
        if args.num_wavs:
            raise FileNotFoundError(f"no WORLD config in {model_dir}/feats.yaml or {cfg.data.train_dir}/feats.yaml: "
                                    f"needed to vocode (--num-wavs)")
        log.warning("no WORLD config (feats.yaml) found for %s; OUT_DIR gets none", model_dir)
    frame_shift = float(conf.get("frame_period", 5.0)) / 1000.0 if conf else 0.005

    scp = data_dir / "labels.scp"
    if not scp.is_file():
        raise FileNotFoundError(f"{scp}: no label vectors (run speechkit-make-labels)")
    table = read_table(scp)
    utts = sorted(table, key=lambda u: u.encode("utf-8"))
    if not utts:
        raise DataError(f"{scp}: empty")
    loader = kaldiio.load_scp(str(scp))
    if not synth.conditioned and (args.speaker or args.speaker_embeddings):
        raise ValueError(f"{model_dir}: the model is not speaker-conditioned (trained without "
                         f"data.speaker_embeddings); drop --speaker / --speaker-embeddings")
    spk_vectors = synth.speaker_vectors(utts, data_dir, args.speaker)
    dim = cfg.model.input_dim - (len(spk_vectors[0]) if spk_vectors is not None else 0)
    inputs = [("the checkpoint", synth.checkpoint)] + [(f"a label file of {scp}", f) for f in scp_files(scp)]
    if spk_vectors is not None:
        inputs.append(("the speaker vectors", synth.speaker_embeddings))
    check_output_dir(out_dir, inputs=inputs, option="OUT_DIR")

    final = Path(os.path.abspath(out_dir))  # where the files will be once the temporary dir is swapped in
    num_frames: dict[str, int] = {}
    to_vocode: list[tuple[str, np.ndarray]] = []
    t0 = time.time()
    with replace_dir(out_dir) as tmp:
        with ark_scp_writer(tmp / "feats.ark", tmp / "feats.scp", scp_ark=final / "feats.ark") as write:
            for i, utt in enumerate(utts):
                try:
                    x = np.array(loader[utt], dtype=np.float32)
                except Exception as e:  # kaldiio raises several types for a bad ark
                    raise DataError(f"{scp}: '{utt}': cannot read {table[utt]}: {e}") from None
                if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != dim:
                    minus = " minus the speaker vector" if spk_vectors is not None else ""
                    raise DataError(f"{scp}: '{utt}': expected a (frames, {dim}) label matrix (the model's input_dim"
                                    f"{minus}), got shape {x.shape}")
                if not np.isfinite(x).all():
                    raise DataError(f"{scp}: '{utt}': NaN or infinite label values")
                y = synth.features(x, spk_vectors[i] if spk_vectors is not None else None)
                write(utt, y)
                num_frames[utt] = len(y)
                if len(to_vocode) < args.num_wavs:
                    to_vocode.append((utt, y))
        write_table(tmp / "utt2num_frames", num_frames)
        with atomic_write(tmp / "frame_shift") as f:
            f.write(f"{frame_shift:g}\n")
        if conf is not None:
            with atomic_write(tmp / "feats.yaml") as f:
                f.write(Path(synth.conf_src).read_text(encoding="utf-8"))
        log.info("predicted %d utterances (%d frames) with %s in %.1f s", len(utts), sum(num_frames.values()),
                 synth.checkpoint, time.time() - t0)

        if to_vocode:
            # every job writes into the temporary dir; wav.scp names where the wavs will be
            wav_dir = tmp / "wav"
            wav_dir.mkdir(parents=True, exist_ok=True)
            name = cfg.__class__.__name__.replace("TaskConfig", "")
            jobs = [(u, y, conf, str(wav_dir), f"{u}: {name} ({model_dir.name})") for u, y in to_vocode]
            results = map_jobs(vocode, jobs, args.nj)
            warn_unplotted(results, {u for u, _ in to_vocode}, log)
            write_table(wav_dir / "wav.scp", {u: str(final / "wav" / Path(p).name) for u, p, _, _ in results})
            log.info("vocoded %d wavs (%.1f s of audio) with their spectrograms", len(results),
                     sum(sec for _, _, sec, _ in results))
    log.info("wrote %s (feats.scp%s)", out_dir, ", wav/" if to_vocode else "")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(PROG, lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
