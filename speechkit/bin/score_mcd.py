"""Objective TTS scores of predicted WORLD features against natural ones: MCD, F0 RMSE, V/UV accuracy.

REF and HYP are feature dirs holding feats.scp (plus feats.yaml and frame_shift, as written by
speechkit-compute-feats and speechkit-tts-synthesize) or feats.scp files directly; the dir of an
scp file is searched for feats.yaml / frame_shift. Matrices have the WORLD layout
[mcep (mcep_dim, c0 first) | lf0 (natural log) | vuv | bap], mcep_dim and num_bap read from
feats.yaml (default 40 and 1: conf/world.yaml at 16 kHz); REF's and HYP's layouts must agree.
The two are frame-aligned (forced durations): frame counts must be equal for every utterance.
Every utterance of REF is scored and must exist in HYP; HYP's extra utterances are ignored.

  MCD (dB)      (10 sqrt(2) / ln 10) * mean over frames of ||mcep_ref - mcep_hyp||, without c0
                (mcep[1:], the usual figure) and with c0
  F0 RMSE (Hz)  over the frames voiced (vuv > 0.5) in both, F0 = exp(lf0)
  V/UV (%)      voicing agreement over all frames

All figures are pooled over all scored frames of all utterances; the JSON also has the mean of
per-utterance MCDs. With --mask-silence, frames whose time t * frame_shift lies inside a silence
phone of the alignments are left out (not zeroed as in musa_tts, which counts them as perfect).

--convention authors scores as the SALAD authors' evaluation code (santi-pdp/musa_tts,
eval_aco_epoch) does, for numbers to set beside the paper's:
  MCD (dB)      over all mcep_dim columns, c0 included
  F0 RMSE (Hz)  over every frame of the exp(lf0) contours (the reference's is interpolated)
  silence       with --mask-silence, silent frames are zeroed: kept in every denominator as
                perfect frames (distance 0, F0 error 0, voicing agreeing)
The default, --convention speechkit, is the list above.

The last line of stdout is the result, e.g.
  MCD 5.43 dB (with c0 6.10)  F0 RMSE 14.56 Hz  V/UV 94.5 %
or, with --convention authors,
  MCD 6.10 dB  F0 RMSE 20.31 Hz  V/UV 95.2 %  (authors' convention: c0 included, F0 over all frames, silence zeroed)
--per-utt writes '<utt> <frames> <mcd_db> <mcd_with_c0_db> <f0_rmse_hz|nan> <vuv_%>' lines (mcd_db,
f0_rmse_hz and vuv_% under --convention).

Example:
  speechkit-score-mcd data/M1/test_phones exp/salad_big/synth/test \\
      --mask-silence exp/align/test/phone_alignments --json exp/salad_big/scores.json
"""
from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import numpy as np

from speechkit.features.world import read_world_layout
from speechkit.scoring.feature_dir import FeatureDir, resolve_frame_shift
from speechkit.scoring.mcd import CONVENTIONS, DEFAULT_FRAME_SHIFT, score_world
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write

PROG = "speechkit-score-mcd"
logger = logging.getLogger(PROG)


class _ScpFile:
    """An scp file given directly: the :class:`FeatureDir` interface used here (utts, load, source)."""

    def __init__(self, path: Path):
        import kaldiio

        self.path = path
        try:
            self._scp = kaldiio.load_scp(str(path))
        except Exception as e:  # kaldiio raises bare ValueError/IndexError on bad lines
            raise DataError(f"{path}: cannot parse ({e})") from None
        self.utts = sorted(self._scp.keys(), key=lambda k: k.encode("utf-8"))

    def source(self, utt: str) -> str:
        return f"{self.path}[{utt}]"

    def load(self, utt: str) -> np.ndarray:
        try:
            mat = np.asarray(self._scp[utt], dtype=np.float64)
        except Exception as e:
            raise DataError(f"{self.source(utt)}: cannot read matrix ({e})") from None
        if mat.ndim != 2 or mat.shape[0] == 0:
            raise DataError(f"{self.source(utt)}: expected a non-empty (frames, dim) matrix, got shape {mat.shape}")
        return mat  # NaN/Inf are reported by score_utterance, naming the utterance


class _Lazy(dict):
    """``utt -> matrix`` read on access (keys known up front), so one utterance is in memory at a time."""

    def __init__(self, reader):
        super().__init__((u, None) for u in reader.utts)
        self._reader = reader

    def __getitem__(self, utt):
        if utt not in self:
            raise KeyError(utt)
        return self._reader.load(utt)


def open_features(path: str) -> tuple[object, Path]:
    """A reader for a feature dir (with feats.scp) or an scp file, and the dir holding its metadata."""
    p = Path(path)
    if p.is_dir():
        if not (p / "feats.scp").is_file():
            raise DataError(f"{p}: no feats.scp (expected a WORLD feature dir or an scp file)")
        return FeatureDir(p), p
    if p.is_file():
        return _ScpFile(p), p.parent
    raise FileNotFoundError(f"no such feature dir or scp file: {p}")


def frame_shift_of(meta_dir: Path) -> float | None:
    """``meta_dir/frame_shift`` if present, else None."""
    return resolve_frame_shift(meta_dir) if (meta_dir / "frame_shift").is_file() else None


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("ref", metavar="REF", help="natural WORLD features: dir with feats.scp, or an scp file")
    parser.add_argument("hyp", metavar="HYP", help="predicted WORLD features: dir with feats.scp, or an scp file")
    parser.add_argument("--mask-silence", metavar="ALIGNMENTS", default=None,
                        help="phone_alignments file ('<utt> <start-s> <end-s> <phone>'): leave out the frames "
                             "inside silence phones")
    parser.add_argument("--silence-phones", metavar="P,...", default="sil",
                        help="comma-separated silence labels of ALIGNMENTS (default: %(default)s)")
    parser.add_argument("--convention", choices=CONVENTIONS, default="speechkit",
                        help="speechkit: c0 left out, F0 over frames voiced in both, silence left out; "
                             "authors: as musa_tts (c0 included, F0 over every frame, silence zeroed) "
                             "(default: %(default)s)")
    parser.add_argument("--json", metavar="OUT", default=None,
                        help="write every figure, the counts and per-utterance scores as JSON")
    parser.add_argument("--per-utt", metavar="OUT", default=None, help="write a per-utterance score table")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file)
        ref, ref_meta = open_features(args.ref)
        hyp, hyp_meta = open_features(args.hyp)
        ref_lay, ref_src = read_world_layout(ref_meta)
        hyp_lay, hyp_src = read_world_layout(hyp_meta)
        if ref_lay != hyp_lay:
            raise DataError(f"feature layouts differ: REF {ref_lay.describe()} from {ref_src}, "
                            f"HYP {hyp_lay.describe()} from {hyp_src}")
        alignments, frame_shift, sil = None, DEFAULT_FRAME_SHIFT, None
        if args.mask_silence:
            from speechkit.data.corpora._common import read_phone_alignments

            sil = [p for p in args.silence_phones.split(",") if p]
            if not sil:
                raise ValueError("--silence-phones: no phone given")
            alignments = read_phone_alignments(args.mask_silence)
            fs_ref, fs_hyp = frame_shift_of(ref_meta), frame_shift_of(hyp_meta)
            if fs_ref is not None and fs_hyp is not None and not math.isclose(fs_ref, fs_hyp, rel_tol=1e-6):
                raise DataError(f"frame shifts differ: {fs_ref:g} s in {ref_meta / 'frame_shift'}, "
                                f"{fs_hyp:g} s in {hyp_meta / 'frame_shift'}")
            frame_shift = fs_ref if fs_ref is not None else fs_hyp if fs_hyp is not None else DEFAULT_FRAME_SHIFT
        res = score_world(_Lazy(ref), _Lazy(hyp), ref_lay, alignments=alignments, frame_shift=frame_shift,
                          silence_phones=sil or ("sil",), names=(str(args.ref), str(args.hyp)),
                          convention=args.convention)
        if args.json:
            out = {"ref": str(args.ref), "hyp": str(args.hyp), "layout_source": ref_src,
                   "mask_silence": args.mask_silence, **res.to_dict()}
            with atomic_write(args.json) as f:
                json.dump(out, f, indent=2, ensure_ascii=False, allow_nan=False)
                f.write("\n")
        if args.per_utt:
            with atomic_write(args.per_utt) as f:
                for u in res.utts:
                    f.write(f"{u.utt} {u.n_frames} {u.mcd_db:.4f} {u.mcd_with_c0_db:.4f} "
                            f"{u.f0_rmse_hz:.4f} {u.vuv_accuracy:.2f}\n")
        authors = args.convention == "authors"
        masked = (f", {res.n_masked} frames in silence phones {'zeroed' if authors else 'left out'}"
                  if args.mask_silence else "")
        print(f"utterances: {len(res.utts)}, frames scored: {res.n_frames}{masked} ({ref_lay.describe()})")
        if authors:
            print(f"mean of per-utterance MCD: {res.mcd_db_utt_mean:.2f} dB (c0 included); "
                  "figures below pooled over all frames")
            print(f"F0 RMSE over all {res.n_frames + res.n_masked} frames")
        else:
            print(f"mean of per-utterance MCD: {res.mcd_db_utt_mean:.2f} dB (with c0 "
                  f"{res.mcd_with_c0_db_utt_mean:.2f}); figures below pooled over all frames")
            print(f"F0 RMSE over {res.n_voiced_both} frames voiced in both "
                  f"({len(res.utts_no_voiced_both)} utterances with none)")
        print(res.summary())
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
