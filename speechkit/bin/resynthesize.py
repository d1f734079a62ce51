"""Resynthesize speech from discrete units: codebook inverter -> linear magnitude -> Griffin-Lim -> wav.

  speechkit-resynthesize --inverter-dir exp/inverter [--checkpoint NAME] --codes codes --out-dir DIR [--speaker S]
                         [--reference-dir DATA_DIR] [--utt-list F | --max-utts N] [--n-iter 60]

For each utterance of --codes (a '<utt> <code> <code> ...' table, speechkit-extract-units
OUT_DIR/codes) the trained inverter (speechkit-train inverter) predicts a linear magnitude
spectrogram (Tjandra et al. 2020, sec. 4) and fast Griffin-Lim (speechkit.decode.griffin_lim)
recovers a phase; the STFT parameters and sample rate are those of the spectrogram front end the
inverter was trained on (INVERTER_DIR/frontend.yaml, else the feats.yaml of its data.feats_dir, else
--stft-config). DIR gets:

  <utt>.wav    16-bit PCM at the front end's sample rate (16 kHz for conf/spectrogram.yaml),
               scaled down only if it would clip
  <utt>.png    log-magnitude spectrogram of the resynthesis, above that of the input utterance
               when --reference-dir has its (linear) spectrogram (skip with --no-png)
  wav.scp      '<utt> <path of the wav>' for every utterance written (Kaldi table)

With --reference-dir the output has exactly the reference's number of frames (and so its
duration); otherwise T' x upsample_ratio frames. --speaker picks the target voice of an inverter
trained on several voices (a name from INVERTER_DIR/speakers); a one-voice inverter needs none.

DIR is written as a whole: the files go to a temporary directory that replaces DIR only when every
utterance is done, so a failed or killed run leaves the previous DIR complete and untouched, and a
re-run leaves no wav of an earlier one behind; the previous DIR is kept as DIR/.backup/N. DIR may
not be, contain or lie inside --codes, --reference-dir (or its spectrogram arks), --utt-list or
--stft-config, nor be or contain --inverter-dir (inside it is fine); an existing file as DIR is an
error. Both are checked before any work.

Example:
  speechkit-resynthesize --inverter-dir exp/zs/inverter --codes exp/zs/units/test/codes \\
      --out-dir exp/zs/resynth/test --reference-dir dump/spectrogram/test --max-utts 10
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import yaml

from speechkit.scoring.plots import plot_spectrograms
from speechkit.utils.cli import ConfigError, add_model_args, make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, read_lines, read_table, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-resynthesize"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    add_model_args(p, option="--inverter-dir", help="inverter experiment dir", metavar="DIR")
    p.add_argument("--codes", required=True, metavar="FILE", help="'<utt> <code> ...' table")
    p.add_argument("--out-dir", "--out_dir", dest="out_dir", required=True, metavar="DIR",
                   help="output directory (replaced as a whole; the previous one kept as DIR/.backup/N)")
    p.add_argument("--speaker", default=None, metavar="S", help="target voice (a name in INVERTER_DIR/speakers)")
    p.add_argument("--reference-dir", "--reference_dir", dest="reference_dir", default=None, metavar="DATA_DIR",
                   help="data dir with the linear spectrograms of the same utterances (for the plots and the length)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--utt-list", "--utt_list", dest="utt_list", default=None, metavar="F",
                   help="resynthesize only these utterances (first field of each line)")
    g.add_argument("--max-utts", "--max_utts", dest="max_utts", type=int, default=0, metavar="N",
                   help="resynthesize only the first N utterances in C order (0 = all)")
    p.add_argument("--n-iter", "--n_iter", dest="n_iter", type=int, default=60, help="Griffin-Lim iterations (default: 60)")
    p.add_argument("--momentum", type=float, default=0.99, help="fast Griffin-Lim momentum (default: 0.99)")
    p.add_argument("--seed", type=int, default=0, help="seed of Griffin-Lim's random initial phases (default: 0)")
    p.add_argument("--stft-config", "--stft_config", dest="stft_config", default=None, metavar="YAML",
                   help="spectrogram front-end config, if the inverter dir does not record one")
    p.add_argument("--no-png", "--no_png", dest="png", action="store_false", help="do not plot spectrograms")
    p.add_argument("--log-file", default=None, help="also append the log here")
    return p


def frontend_conf(inverter_dir: Path, cfg, stft_config: str | None) -> tuple[dict, str]:
    """The spectrogram front-end config the inverter's targets were computed with, and where it came from."""
    from speechkit.features.frontends import load_frontend_conf

    if stft_config:
        return load_frontend_conf(stft_config), stft_config
    candidates = []
    if inverter_dir.is_dir():
        candidates.append(inverter_dir / "frontend.yaml")
    if cfg.data.feats_dir:
        candidates.append(Path(cfg.data.feats_dir) / "feats.yaml")
    for c in candidates:
        if c.is_file():
            return yaml.safe_load(c.read_text(encoding="utf-8")), str(c)
    raise FileNotFoundError(f"no spectrogram front-end config in {' or '.join(map(str, candidates)) or inverter_dir}; "
                            f"pass --stft-config conf/spectrogram.yaml")


def _run(args) -> int:
    import torch
    from tqdm import tqdm

    from speechkit.decode.audio_out import write_synthesized
    from speechkit.decode.griffin_lim import griffin_lim
    from speechkit.features.frontends import build_frontend
    from speechkit.tasks import get_task
    from speechkit.tasks.inverter import read_codes
    from speechkit.tasks import load_model
    from speechkit.train.checkpoint import resolve_checkpoint

    setup_logging(args.log_file)
    if args.n_iter < 0:
        raise ValueError(f"--n-iter must be >= 0, got {args.n_iter}")
    if args.max_utts < 0:
        raise ValueError(f"--max-utts must be >= 0, got {args.max_utts}")
    inverter_dir = Path(args.inverter_dir)
    out_dir = Path(args.out_dir)
    inputs = {"--codes": args.codes, "--reference-dir": args.reference_dir, "--utt-list": args.utt_list,
              "--stft-config": args.stft_config}
    if inverter_dir.is_dir():
        check_output_dir(out_dir, inputs=inputs, experiment_dirs={"--inverter-dir": inverter_dir}, option="--out-dir")
    else:
        check_output_dir(out_dir, inputs={**inputs, "--inverter-dir": inverter_dir}, option="--out-dir")
    task = get_task("inverter")
    task.init_from_vqvae = False  # the trained weights hold the codebook already
    model, cfg = load_model(resolve_checkpoint(inverter_dir, args.checkpoint, option="--inverter-dir"), task)
    conf, conf_src = frontend_conf(inverter_dir, cfg, args.stft_config)
    frontend = build_frontend(conf, conf_src)
    resolved = frontend.to_dict()  # the values as checked (a YAML 'log: no' is False here)
    if resolved["type"] != "spectrogram" or resolved.get("log", False):
        raise DataError(f"{conf_src}: expected a linear magnitude spectrogram front end (type: spectrogram, log: false)")
    stft = frontend.stft_params()
    sr = frontend.sample_rate
    r = cfg.model.upsample_ratio

    speaker = None
    if cfg.model.num_speakers > 0:
        table_file = inverter_dir / "speakers"
        if not table_file.is_file():
            raise FileNotFoundError(f"{table_file}: the inverter has {cfg.model.num_speakers} voices but no speaker table")
        table = {k: int(v) for k, v in read_table(table_file).items()}
        if args.speaker is None:
            raise ConfigError(f"--speaker is required: the inverter has several voices ({', '.join(table)})")
        if args.speaker not in table:
            raise ConfigError(f"--speaker {args.speaker!r}: not a voice of the inverter ({', '.join(table)})")
        speaker = torch.tensor([table[args.speaker]])
    elif args.speaker is not None:
        log.info("the inverter has one voice (that of its training data); --speaker %s only labels the output",
                 args.speaker)

    codes = read_codes(args.codes, cfg.model.codebook_size)
    utts = sorted(codes, key=lambda u: u.encode("utf-8"))
    if args.utt_list:
        wanted = [ln.split()[0] for ln in read_lines(args.utt_list) if ln.strip()]
        missing = [u for u in wanted if u not in codes]
        if missing:
            raise DataError(f"{args.utt_list}: '{missing[0]}' has no codes in {args.codes}")
        utts = wanted
    elif args.max_utts:
        utts = utts[: args.max_utts]
    if not utts:
        raise DataError(f"{args.codes}: no utterances to resynthesize")

    ref = None
    if args.reference_dir:
        from speechkit.features.io import FeatureReader

        from speechkit.features.io import scp_files

        ref = FeatureReader(args.reference_dir)
        ref_conf = ref.conf
        if ref_conf is not None and (ref_conf.get("type") != "spectrogram" or ref_conf.get("log", False)):
            raise DataError(f"{args.reference_dir}/feats.yaml: --reference-dir needs linear magnitude spectrograms")
        ref_scp = Path(args.reference_dir) / "feats.scp"
        check_output_dir(out_dir, inputs=[(f"a spectrogram file of {ref_scp}", f) for f in scp_files(ref_scp)],
                         option="--out-dir")

    final = Path(os.path.abspath(out_dir))  # where the wavs will be once the temporary dir is swapped in
    wavs = {}
    t0 = time.time()
    seconds = 0.0
    with torch.no_grad(), replace_dir(out_dir) as tmp:
        for utt in tqdm(utts, desc="resynthesizing", unit="utt", disable=None):
            c = torch.from_numpy(codes[utt])[None]
            lengths = torch.tensor([c.shape[1]])
            target = None
            ref_mag = None
            if ref is not None and utt in ref:
                ref_mag = ref[utt]
                target = torch.tensor([len(ref_mag)])
                if not (c.shape[1] - 1) * r <= len(ref_mag) <= (c.shape[1] + 1) * r:
                    raise DataError(f"{args.reference_dir}/feats.scp: '{utt}': {len(ref_mag)} frames do not match its "
                                    f"{c.shape[1]} codes x upsample_ratio {r}")
            elif ref is not None:
                log.warning("%s: no reference spectrogram for '%s'", args.reference_dir, utt)
            mag, _ = model(c, lengths, speaker, target_lengths=target)
            mag = mag[0].float()  # (S, F)
            wav = griffin_lim(mag.T.contiguous(), n_iter=args.n_iter, momentum=args.momentum, seed=args.seed,
                              **stft).numpy()
            seconds += write_synthesized(tmp / f"{utt}.wav", wav, sr)[0]  # peak-limited; its PNG is drawn below
            wavs[utt] = str(final / f"{utt}.wav")
            if args.png:
                panels = []
                if ref_mag is not None:
                    panels.append((f"{utt}: input", ref_mag))
                voice = f" ({args.speaker})" if args.speaker else ""
                panels.append((f"{utt}: resynthesized from {c.shape[1]} codes{voice}", mag.numpy()))
                plot_spectrograms(tmp / f"{utt}.png", panels, sr, stft["hop_length"])
        write_table(tmp / "wav.scp", wavs)
    log.info("wrote %d wavs (%.1f s of audio) to %s in %.1f s", len(wavs), seconds, out_dir, time.time() - t0)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(PROG, lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
