"""Extract discrete units with a trained VQ-VAE, in the ZeroSpeech 2019 submission layout.

  speechkit-extract-units --model-dir exp/vqvae [--checkpoint NAME] DATA_DIR OUT_DIR
                          [--unit-format codebook|onehot] [--aux [--phases N|all]] [--nj N]

DATA_DIR holds features of the kind the model was trained on (feats.scp; cmvn.scp when the model
was trained with CMVN: per-speaker stats of DATA_DIR itself for data.cmvn=speaker, the training
set's global stats for data.cmvn=global). Every utterance is encoded as in training: over
overlapping windows of the training crop (the model's data.crop_frames; --window N for another
length, --hop for the step, half a window by default), each code frame taken from the window it is
most central in (on unseen TIMIT speakers this moved 8.5 % of the codes and lowered the no-context
ABX from 28.34 to 28.16 %, egs/zerospeech2019/README.md); --window 0 encodes each utterance whole
(so does a model trained without crops). OUT_DIR gets:

  <utt>.txt    one line per code frame: with --unit-format codebook (default) the codebook vector
               e_k of the frame's code k (De numbers, as ZeroSpeech 2019 VQ submissions wrote
               them), with --unit-format onehot the one-hot code (K numbers, 0 or 1); with --aux
               the continuous encoder output z (De numbers) instead -- ZeroSpeech 2019 'test' and
               'auxiliary_embedding' files, readable by speechkit-score-abx / -score-bitrate.
               Both unit formats have one distinct line per code, so the same bitrate; their ABX
               differs (cosine distances between codebook vectors are graded, between one-hot
               rows they are all equal).
  codes        Kaldi text table '<utt> <code> <code> ...' (the inverter's input). It has no .txt
               suffix, so the scoring tools, which read every *.txt file, do not take it for an
               utterance.
  frame_shift  seconds per code frame: model.stride x the features' frame shift (0.04 for stride
               4 on 10 ms frames); code i covers input frames [i*stride, (i+1)*stride); with
               --phases N, stride / N x the features' frame shift
  units.yaml   what produced them (model, checkpoint, K, De, stride, kind, phases, utterances)

With --aux --phases N the continuous z is written every stride / N input frames instead of once per
code frame: the encoder runs on N copies of the input shifted by stride / N frames each and the
outputs are interleaved (shift-and-stitch, speechkit.models.vqvae.encode_phases; --phases all = z
every input frame). Every row is an encoder output, nothing is interpolated; the codes file then
holds the code of every such row. On unseen TIMIT speakers z every 10 ms instead of 40 ms lowered
the no-context ABX of the recipe's default model from 24.79 to 23.09 % (egs/zerospeech2019/README.md).
Codes stay at the model's stride (--phases > 1 needs --aux): their bitrate would grow N-fold.

OUT_DIR is written as a whole: the files go to a temporary directory that replaces OUT_DIR only
when every utterance is done, so a failed or killed run leaves an earlier OUT_DIR untouched; the
earlier OUT_DIR is kept as OUT_DIR/.backup/N. OUT_DIR may not be, contain or lie inside DATA_DIR,
the model's training data dir or a file the tool reads, nor be or contain --model-dir (it may lie
inside it: exp/vqvae/units/test); an existing file as OUT_DIR is an error. Both are checked before
any work, as are the options (--nj, --batch-frames, --window, --hop).

Errors naming the utterance: NaN/Inf in its features, fewer frames than the total stride.

Example:
  speechkit-extract-units --model-dir exp/zs_tr/vqvae dump/mfcc/test exp/zs_tr/units/test --nj 2
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from speechkit.utils.cli import add_model_args, make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, read_table, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-extract-units"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp (and cmvn.scp)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where the <utt>.txt files, codes, frame_shift go")
    add_model_args(p, help="VQ-VAE experiment dir", metavar="DIR")
    p.add_argument("--unit-format", "--unit_format", dest="unit_format", choices=UNIT_FORMATS, default="codebook",
                   help="how a code frame is written: codebook (its codebook vector, De numbers; the ZeroSpeech "
                        "2019 submission form) or onehot (K numbers, 0 or 1) (default: %(default)s)")
    p.add_argument("--aux", action="store_true",
                   help="write the continuous encoder output z per frame instead of the code")
    p.add_argument("--phases", default="1", metavar="N|all",
                   help="with --aux: write z every stride/N input frames by encoding N input shifts and "
                        "interleaving them (shift-and-stitch; N divides the stride, 'all' = the stride: z every "
                        "input frame). Default 1: z at the code rate")
    p.add_argument("--nj", type=int, default=1, help="parallel worker processes (default: 1)")
    p.add_argument("--window", type=int, default=None, metavar="N",
                   help="encode over overlapping windows of N input frames (a multiple of the stride), each code "
                        "frame taken from the window it is most central in; 0 = each utterance whole. Default: "
                        "the model's training crop (data.crop_frames, rounded down to the stride; whole "
                        "utterances for a model trained without crops), so that extraction sees what training saw")
    p.add_argument("--hop", type=int, default=None, metavar="N",
                   help="with --window: input frames between window starts, 1 <= N <= window, a multiple of "
                        "the stride (default: half the window)")
    p.add_argument("--batch-frames", type=int, default=20000, metavar="N",
                   help="input frames per encoder batch (default: 20000)")
    p.add_argument("--log-file", default=None, help="also append the log here")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


UNIT_FORMATS = ("codebook", "onehot")


def codebook_rows(codebook) -> list[str]:
    """Row ``k`` is the text line of codebook vector ``e_k`` (``De`` numbers, 9 significant digits:
    float32 values round-trip exactly, so distinct vectors stay distinct lines).

    Args:
        codebook: ``(K, De)`` array or tensor.
    """
    m = np.asarray(codebook, dtype=np.float32)
    return [" ".join(f"{v:.9g}" for v in row) for row in m.tolist()]


def onehot_rows(codebook_size: int) -> list[str]:
    """Row ``k`` is the text line of the one-hot vector of code ``k`` (``K`` space-separated 0/1)."""
    zeros = ["0"] * codebook_size
    rows = []
    for k in range(codebook_size):
        zeros[k] = "1"
        rows.append(" ".join(zeros))
        zeros[k] = "0"
    return rows


def feature_conf(data_dir: Path) -> dict | None:
    f = data_dir / "feats.yaml"
    return yaml.safe_load(f.read_text(encoding="utf-8")) if f.is_file() else None


def load_inputs(data_dir: Path, cfg, utts: list[str] | None = None) -> tuple[list[str], list]:
    """Features of ``data_dir`` normalised as in training (``cfg.data.cmvn``), each checked.

    Raises:
        DataError: features of another kind than the training set's, NaN/Inf, fewer frames than
            the stride (naming the utterance); FileNotFoundError: no feats.scp / cmvn.scp.
    """
    import torch

    from speechkit.features.cmvn import apply_cmvn
    from speechkit.features.io import FeatureReader, load_cmvn_stats
    from speechkit.tasks.vqvae import check_matrix, load_features

    train_dir = Path(cfg.data.train_dir)
    mine, theirs = feature_conf(data_dir), feature_conf(train_dir) if train_dir.is_dir() else None
    if mine is not None and theirs is not None and mine != theirs:
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        raise DataError(f"{data_dir}/feats.yaml: features differ from the training set's ({train_dir}/feats.yaml) "
                        f"in {', '.join(diff)}; compute them with the same front-end config")
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


def encode_part(model_path: str, data_dir: str, utts: list[str] | None, out_tmp: str, aux: bool,
                batch_frames: int, progress: bool = True, unit_format: str = "codebook", window: int = 0,
                hop: int = 0, phases: int = 1) -> dict[str, list[int]]:
    """Encode ``utts`` of ``data_dir`` (all if None) and write their ``<utt>.txt`` into ``out_tmp``
    (``unit_format``: ``codebook`` or ``onehot`` rows; ``aux``: the continuous z instead; ``window``
    > 0: over overlapping windows, :func:`speechkit.models.vqvae.encode_windowed`; ``phases`` > 1
    (``aux`` only): z every ``stride / phases`` input frames, :func:`speechkit.models.vqvae.encode_phases`).

    Returns ``{utt: codes}`` (the code of every written frame). Runs in a worker process with ``--nj > 1``.
    """
    import torch
    from tqdm import tqdm

    from speechkit.models.vqvae import encode_phases, encode_windowed
    from speechkit.tasks import load_model

    model, cfg = load_model(model_path)
    model.eval()
    utts, feats = load_inputs(Path(data_dir), cfg, utts)
    K = cfg.model.codebook_size
    if aux:
        rows = None
    elif unit_format == "codebook":
        rows = codebook_rows(model.quantizer.codebook)
    elif unit_format == "onehot":
        rows = onehot_rows(K)
    else:
        raise ValueError(f"unknown unit format {unit_format!r}, expected one of {', '.join(UNIT_FORMATS)}")
    order = sorted(range(len(utts)), key=lambda i: -len(feats[i]))
    out: dict[str, list[int]] = {}
    bar = tqdm(total=len(utts), desc="extracting units", unit="utt", disable=None if progress else True)
    i = 0
    with torch.no_grad():
        while i < len(order):
            batch = [order[i]]
            longest = len(feats[order[i]])
            i += 1
            while window <= 0 and phases == 1 and i < len(order) and longest * (len(batch) + 1) <= batch_frames:
                batch.append(order[i])
                i += 1
            if phases > 1:  # one utterance at a time, each phase (over windows) in one batch
                z1 = encode_phases(model, feats[batch[0]], phases, window, hop)
                c1 = model.quantizer.quantize(z1[None])[0]
                codes, z_e, out_lengths = c1[None], z1[None], torch.tensor([len(c1)])
            elif window > 0:  # one utterance at a time, its windows in one batch
                c1, z1 = encode_windowed(model, feats[batch[0]], window, hop)
                codes, z_e, out_lengths = c1[None], z1[None], torch.tensor([len(c1)])
            else:
                x = torch.nn.utils.rnn.pad_sequence([feats[j] for j in batch], batch_first=True)
                lengths = torch.tensor([len(feats[j]) for j in batch])
                codes, z_e, _, out_lengths = model.encode(x, lengths)
            for b, j in enumerate(batch):
                n = int(out_lengths[b])
                c = codes[b, :n].tolist()
                out[utts[j]] = c
                with open(os.path.join(out_tmp, f"{utts[j]}.txt"), "w", encoding="utf-8") as f:
                    if aux:
                        np.savetxt(f, z_e[b, :n].numpy(), fmt="%.6g")
                    else:
                        f.write("\n".join(rows[k] for k in c))
                        f.write("\n")
            bar.update(len(batch))
    bar.close()
    return out


def _worker(args: tuple) -> dict[str, list[int]]:
    import torch

    torch.set_num_threads(1)
    *head, unit_format, window, hop, phases = args
    return encode_part(*head, progress=False, unit_format=unit_format, window=window, hop=hop, phases=phases)


def _run(args) -> int:
    from speechkit.tasks import load_model
    from speechkit.train.checkpoint import resolve_checkpoint

    setup_logging(args.log_file, args.verbose)
    if args.nj < 1:
        raise ValueError(f"--nj must be >= 1, got {args.nj}")
    if args.batch_frames < 1:
        raise ValueError(f"--batch-frames must be >= 1, got {args.batch_frames}")
    if args.window is not None and args.window < 0:
        raise ValueError(f"--window must be >= 0 (0 = whole utterances), got {args.window}")
    if args.hop is not None and args.hop < 1:
        raise ValueError(f"--hop must be >= 1 input frame, got {args.hop} (leave it out for half a window)")
    if args.hop is not None and args.window == 0:
        raise ValueError(f"--hop {args.hop}: only with windows (--window 0 encodes whole utterances)")
    phases = None  # 'all': the model's stride, known once it is loaded
    if args.phases != "all":
        try:
            phases = int(args.phases)
        except ValueError:
            raise ValueError(f"--phases: expected a number or 'all', got {args.phases!r}") from None
        if phases < 1:
            raise ValueError(f"--phases must be >= 1 (or 'all'), got {phases}")
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    model_path = resolve_checkpoint(args.model_dir, args.checkpoint, option="--model-dir")
    model, cfg = load_model(model_path)
    from speechkit.models.vqvae import VQVAE, default_hop, phase_offsets

    if not isinstance(model, VQVAE):
        raise ValueError(f"{model_path}: not a VQ-VAE checkpoint (task {type(model).__name__})")
    # the windows: given, or the training crop; the hop: given, or half a window (both in whole strides)
    stride = cfg.model.stride
    if args.window is None:
        args.window = int(getattr(cfg.data, "crop_frames", 0) or 0) // stride * stride
        if args.window:
            log.info("windows of %d input frames (the training crop; --window 0 encodes whole utterances)",
                     args.window)
    if args.hop is None:
        args.hop = default_hop(args.window, stride) if args.window else 0
    elif not args.window:
        raise ValueError(f"--hop {args.hop}: only with windows (the model was trained without crops, so "
                         f"--window defaults to whole utterances; give --window N)")
    if args.hop > args.window:
        raise ValueError(f"--window / --hop: need 0 < hop <= window (or window 0, no hop), got "
                         f"{args.window} / {args.hop}")
    if args.window % stride or args.hop % stride:
        raise ValueError(f"--window {args.window} / --hop {args.hop}: must be multiples of the model's stride "
                         f"{stride}")
    if phases is None:
        phases = stride
    if phases != 1 and not args.aux:
        raise ValueError(f"--phases {args.phases}: only with --aux (the continuous z); codes stay at the model's "
                         f"stride (their bitrate would grow {phases}-fold)")
    try:
        phase_offsets(stride, phases)  # a divisor of the stride
    except ValueError as e:
        raise ValueError(f"--phases {args.phases}: {e}") from None
    if not args.aux and args.unit_format == "codebook":
        rows = codebook_rows(model.quantizer.codebook)
        if len(set(rows)) < len(rows):
            log.warning("%s: %d of %d codebook vectors are identical to another; the bitrate counts each "
                        "distinct vector once (use --unit-format onehot to keep every code apart)",
                        model_path, len(rows) - len(set(rows)), len(rows))
    del model
    if not (data_dir / "feats.scp").is_file():
        raise FileNotFoundError(f"{data_dir}/feats.scp: no features (run utils/make_feats.sh first)")
    from speechkit.features.io import scp_files

    inputs = [("DATA_DIR", data_dir), ("the checkpoint", model_path)]
    if cfg.data.train_dir and Path(cfg.data.train_dir).is_dir():
        inputs.append(("the model's training data dir (data.train_dir)", Path(cfg.data.train_dir)))
    inputs += [(f"a feature file of {data_dir}/feats.scp", f) for f in scp_files(data_dir / "feats.scp")]
    check_output_dir(out_dir, inputs=inputs, option="OUT_DIR",
                     experiment_dirs={"--model-dir": args.model_dir} if Path(args.model_dir).is_dir() else None)
    fs_file = data_dir / "frame_shift"
    feat_shift = float(fs_file.read_text().split()[0]) if fs_file.is_file() else 0.01
    utts = list(read_table(data_dir / "utt2spk")) if (data_dir / "utt2spk").is_file() else None

    t0 = time.time()
    with replace_dir(out_dir) as tmp:
        if args.nj == 1 or utts is None or len(utts) < 2:
            codes = encode_part(str(model_path), str(data_dir), utts, str(tmp), args.aux, args.batch_frames,
                                unit_format=args.unit_format, window=args.window, hop=args.hop, phases=phases)
        else:
            import multiprocessing as mp

            nj = min(args.nj, len(utts))
            parts = [utts[k::nj] for k in range(nj)]
            jobs = [(str(model_path), str(data_dir), p, str(tmp), args.aux, args.batch_frames, args.unit_format,
                     args.window, args.hop, phases)
                    for p in parts]
            codes = {}
            pool = mp.get_context("spawn").Pool(nj)
            try:
                for part in pool.map(_worker, jobs):
                    codes.update(part)
                pool.close()
            except BaseException:
                pool.terminate()
                raise
            finally:
                pool.join()
        write_table(tmp / "codes", {u: " ".join(map(str, c)) for u, c in codes.items()})
        shift = cfg.model.stride // phases * feat_shift
        with atomic_write(tmp / "frame_shift") as f:
            f.write(f"{shift:.6g}\n")
        n_frames = sum(len(c) for c in codes.values())
        used = len({k for c in codes.values() for k in c})
        info = {
            "model": str(args.model_dir), "checkpoint": str(model_path), "data_dir": str(data_dir),
            "kind": "aux" if args.aux else args.unit_format, "codebook_size": cfg.model.codebook_size,
            "codebook_dim": cfg.model.codebook_dim, "stride": cfg.model.stride, "frame_shift": float(f"{shift:.6g}"),
            "num_utts": len(codes), "num_frames": n_frames, "codes_used": used,
            "window": args.window, "hop": args.hop, "phases": phases,
        }
        with atomic_write(tmp / "units.yaml") as f:
            yaml.safe_dump(info, f, sort_keys=False)
    log.info("wrote %s: %d utterances, %d %s frames (%g s each), %d of %d codes used, in %.1f s", out_dir, len(codes),
             n_frames, "z" if args.aux else args.unit_format, shift, used, cfg.model.codebook_size, time.time() - t0)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(PROG, lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
