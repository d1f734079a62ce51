"""Decode a data directory with a trained streaming RNN-T (speechkit-train rnnt).

  speechkit-asr-decode --model-dir EXP DATA_DIR OUT_DIR [--search greedy|beam] [--beam N] [--length-norm]
                       [--lid-free | --oracle-lid] [--switch-off-tau T --switch-off-threshold S]
                       [--blank-penalty P] [--chunk-frames N] [--nj N [--job J | --merge-only]]

DATA_DIR needs feats.scp (the same frontend as the training data); utt2lang is needed for
--oracle-lid (the default) unless the model is 'vanilla'. Features are normalised with the
training set's global CMVN stats and stacked as in training (both from the model's saved config),
then decoded chunk by chunk (--chunk-frames feature frames at a time, 0 = the whole utterance
in one chunk; the result is the same for any chunking, only the timing differs).

Modes (Joshi et al., Interspeech 2021, section 4.2):
  --oracle-lid  decode with the known language's softmax (utt2lang); the default. Utterances of a
                language the model does not have are skipped and counted (e.g. a monolingual model
                on a multilingual test set). A vanilla model ignores the language; its 'chosen'
                language is the one whose units make up most of the hypothesis (the script).
  --lid-free    multisoftmax_lid models: one decoder per language on the shared encoder, the
                language with the highest average LID posterior wins. With --switch-off-tau T and
                --switch-off-threshold S (section 6.3), decoder l stops once t > T encoder frames
                and sum_t' log P_t'(l) < max_l' sum_t' log P_t'(l') - S (nats); with
                --switch-off-rule posterior (the paper's Table 7 grid) once t > T and
                (1/t) sum_t' P_t'(l) < S, the best running decoder never stopping.

OUT_DIR receives (each written atomically once every part is done):
  text               hypotheses, Kaldi text (an empty hypothesis is the id alone)
  utt2lang           the chosen language per utterance
  lid_posteriors     models with an LID head: '<utt> [ P(l0) P(l1) ... ]' (Kaldi text vectors,
                     utterance-averaged frame posteriors, languages in decode_stats.json order)
  results.jsonl      per utterance: every decoder's hypothesis and score, decoder frames, switch-off
                     frame, LID posteriors, RTF
  decode_stats.json  options, counts (decoded, skipped by reason), T_avg (average active decoders
                     per encoder frame, 1..L), RTF = decode seconds / audio seconds (--num-threads
                     threads per job, 1 = one core), the checkpoint used
  log/decode.J.log   per-job logs (RTF of each job); parts/ the per-job results
A part whose inputs (utterances, features, checkpoint, options) are unchanged is not decoded
again (--force to redo), so re-running is cheap and an interrupted run continues.

Errors (exit 1, nothing merged): a feature matrix with a NaN or infinite value (names the
utterance, its feats.scp entry and the frame; decoded, it would be an empty hypothesis); OUT_DIR
that is, contains or lies inside DATA_DIR, the checkpoint or EXP/checkpoints, or is or contains
EXP (EXP/decode_test is fine); --device cuda without a CUDA device. The JSON files hold no
NaN/Infinity (an infinite --switch-off-threshold is written "inf").

Examples:
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax data/test exp/rnnt_multisoftmax/decode_test
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax_lid --lid-free --switch-off-tau 30 \\
      --switch-off-threshold 20 --nj 2 data/test exp/rnnt_multisoftmax_lid/decode_test_lidfree_t30_s20
"""
from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path

from speechkit.utils.cli import ConfigError, add_model_args, make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.jobs import describe_failures, run_local_jobs

PROG = "speechkit-asr-decode"
logger = logging.getLogger(PROG)

NO_LANGUAGE = "<none>"


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp (and utt2lang for --oracle-lid)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where text, utt2lang, decode_stats.json, ... go")
    add_model_args(p, help="experiment dir of speechkit-train rnnt")
    p.add_argument("--units-dir", default=None, help="units (speechkit-make-units --per-language) (default: the "
                   "model config's data.units_dir)")
    p.add_argument("--cmvn-stats", default=None, help="global CMVN stats: cmvn_global.ark, a cmvn.scp or a data "
                   "dir (default: the model config's data.cmvn_stats, else <data.train_dir>/cmvn_global.ark, "
                   "else <data.train_dir>/cmvn.scp)")
    p.add_argument("--search", choices=("greedy", "beam"), default="greedy",
                   help="greedy search, or modified beam search (one symbol per frame) (default: greedy)")
    p.add_argument("--beam", type=int, default=4, help="beam width for --search beam (default: 4)")
    p.add_argument("--length-norm", action="store_true",
                   help="--search beam: final hypothesis by log-probability / (1 + symbols) (icefall's "
                        "default) instead of log-probability (default: off)")
    p.add_argument("--max-symbols-per-frame", type=int, default=3,
                   help="greedy search: most symbols emitted per encoder frame (default: 3)")
    p.add_argument("--blank-penalty", type=float, default=0.0, metavar="P",
                   help="subtract P from the blank logit of every joint network before the softmax "
                        "(icefall's decoding option against deletions; tune it on dev) (default: 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lid-free", action="store_true",
                   help="multisoftmax_lid: decode every language, pick by the LID head")
    g.add_argument("--oracle-lid", action="store_true",
                   help="decode with the utterance's known language from DATA_DIR/utt2lang (the default)")
    p.add_argument("--switch-off-tau", type=int, default=None, metavar="T",
                   help="--lid-free early switch-off: no decoder stops before T encoder frames")
    p.add_argument("--switch-off-threshold", type=float, default=None, metavar="S",
                   help="--lid-free early switch-off: stop decoder l when its cumulative LID log-posterior "
                        "is more than S nats below the best language's ('inf' = never); with "
                        "--switch-off-rule posterior: when its running average LID posterior is below S")
    p.add_argument("--switch-off-rule", choices=("gap", "posterior"), default="gap",
                   help="early switch-off rule: gap (cumulative log-posterior gap in nats, the default) | "
                        "posterior (running average posterior below S, the paper's Table 7 grid)")
    p.add_argument("--chunk-frames", type=int, default=0, metavar="N",
                   help="feature frames fed per streaming chunk; 0 = whole utterance (default: 0)")
    p.add_argument("--show-partial", action="store_true", help="log the partial hypotheses after every chunk")
    p.add_argument("--nj", type=int, default=1, help="number of parts decoded in parallel processes (default: 1)")
    j = p.add_mutually_exclusive_group()
    j.add_argument("--job", type=int, metavar="J", help="decode part J (1..N) only (for run.pl / slurm.pl)")
    j.add_argument("--merge-only", action="store_true", help="only merge the N finished parts into OUT_DIR")
    p.add_argument("--max-jobs", type=int, default=None, metavar="M",
                   help="without --job: run at most M parts at once (default: --nj)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="where the model runs: cpu (default), cuda, or auto (cuda when there is one)")
    p.add_argument("--batch-size", type=int, default=1, metavar="B",
                   help="utterances per batched encoder forward (default: 1 = stream each utterance through "
                        "its chunks). The hypotheses are the same (the encoder is causal); on a GPU a batch "
                        "saves most of the encoder's time. Not with --show-partial")
    p.add_argument("--num-threads", type=int, default=1, metavar="T",
                   help="torch threads per job (default: 1, so the RTF is that of one core)")
    p.add_argument("--force", action="store_true", help="decode parts again even if they are current")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


# ----------------------------------------------------------------------------------------------- setup


def _check_args(args) -> None:
    if args.nj < 1:
        raise ConfigError(f"--nj must be >= 1, got {args.nj}")
    if args.job is not None and not 1 <= args.job <= args.nj:
        raise ConfigError(f"--job must be in 1..{args.nj}, got {args.job}")
    if args.beam < 1:
        raise ConfigError(f"--beam must be >= 1, got {args.beam}")
    if args.max_symbols_per_frame < 1:
        raise ConfigError(f"--max-symbols-per-frame must be >= 1, got {args.max_symbols_per_frame}")
    if args.chunk_frames < 0:
        raise ConfigError(f"--chunk-frames must be >= 0, got {args.chunk_frames}")
    if args.num_threads < 1:
        raise ConfigError(f"--num-threads must be >= 1, got {args.num_threads}")
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.batch_size > 1 and args.show_partial:
        raise ConfigError("--show-partial needs --batch-size 1 (a batch is encoded at once, not chunk by chunk)")
    if not abs(args.blank_penalty) < float("inf"):
        raise ConfigError(f"--blank-penalty must be a finite number, got {args.blank_penalty}")
    if (args.switch_off_tau is None) != (args.switch_off_threshold is None):
        raise ConfigError("--switch-off-tau and --switch-off-threshold go together")
    if args.switch_off_tau is not None:
        if not args.lid_free:
            raise ConfigError("early switch-off (--switch-off-tau/--switch-off-threshold) needs --lid-free")
        if args.switch_off_tau < 0:
            raise ConfigError(f"--switch-off-tau must be >= 0 frames, got {args.switch_off_tau}")
        if not args.switch_off_threshold >= 0:
            raise ConfigError(f"--switch-off-threshold must be >= 0 (or inf), got {args.switch_off_threshold}")


def _checkpoint_path(args) -> Path:
    from speechkit.train.checkpoint import resolve_checkpoint

    return resolve_checkpoint(args.model_dir, args.checkpoint, option="--model-dir")


def _mode(args) -> str:
    return "lid_free" if args.lid_free else "oracle"


def _options(args) -> dict:
    """The options that change the decoding result or its timing (part fingerprints)."""
    return {"mode": _mode(args), "search": args.search, "beam": args.beam if args.search == "beam" else None,
            "max_symbols_per_frame": args.max_symbols_per_frame if args.search == "greedy" else None,
            "switch_off_tau": args.switch_off_tau, "switch_off_threshold": args.switch_off_threshold,
            "blank_penalty": args.blank_penalty, "chunk_frames": args.chunk_frames, "num_threads": args.num_threads,
            "units_dir": args.units_dir, "cmvn_stats": args.cmvn_stats,
            # only when set, so that the parts decoded before the option existed stay valid
            **({"length_norm": True} if args.length_norm and args.search == "beam" else {}),
            **({"switch_off_rule": args.switch_off_rule} if args.switch_off_rule != "gap" else {}),
            **({"device": args.device} if args.device != "cpu" else {}),
            **({"batch_size": args.batch_size} if args.batch_size > 1 else {})}


def _split(utts: list[str], nj: int) -> list[list[str]]:
    """Round-robin parts of the C-sorted utterances (similar lengths in every part)."""
    return [utts[j::nj] for j in range(nj)]


def _utts(data_dir: Path) -> tuple[list[str], dict[str, str]]:
    scp = data_dir / "feats.scp"
    if not scp.is_file():
        raise FileNotFoundError(f"{scp}: no features (run utils/make_feats.sh / speechkit-compute-feats)")
    table = read_table(scp)
    if not table:
        raise DataError(f"{scp}: no utterances")
    return sorted(table, key=lambda u: u.encode("utf-8")), table


def _fingerprint(args, ckpt: Path, utts: list[str], feats: dict[str, str]) -> str:
    st = ckpt.resolve().stat()
    h = hashlib.sha256()
    h.update(json.dumps({"options": _options(args), "checkpoint": str(ckpt.resolve()), "size": st.st_size,
                         "mtime_ns": st.st_mtime_ns}, sort_keys=True).encode())
    lang_file = Path(args.data_dir) / "utt2lang"
    langs = read_table(lang_file) if lang_file.is_file() else {}
    for u in utts:
        h.update(f"{u} {feats[u]} {langs.get(u, '')}\n".encode())
    return h.hexdigest()


def _part_paths(out_dir: Path, job: int) -> tuple[Path, Path]:
    return out_dir / "parts" / f"results.{job}.jsonl", out_dir / "parts" / f"done.{job}.json"


def _part_current(out_dir: Path, job: int, fp: str) -> bool:
    res, done = _part_paths(out_dir, job)
    if not (res.is_file() and done.is_file()):
        return False
    try:
        return json.loads(done.read_text(encoding="utf-8")).get("fingerprint") == fp
    except (OSError, ValueError):
        return False


# ----------------------------------------------------------------------------------------------- decoding


class Decoder:
    """A loaded model with its units and CMVN stats, decoding utterances of one data dir.

    Args:
        ckpt: checkpoint file (see :func:`speechkit.tasks.load_model`).
        units_dir, cmvn_stats: overrides of the model config's paths (None = from the config).

    Raises:
        FileNotFoundError / ConfigError / DataError: as the pieces it loads.
    """

    def __init__(self, ckpt: Path, units_dir: str | None = None, cmvn_stats: str | None = None,
                 blank_penalty: float = 0.0):
        import torch

        from speechkit.tasks.rnnt import RNNTTask, load_global_cmvn
        from speechkit.tasks import load_model

        task = RNNTTask()
        task.load_init = False
        self.model, self.cfg = load_model(ckpt, task=task)
        if blank_penalty:
            # logit_blank - P before the log-softmax == the output layer's blank bias lowered by P
            joints = [self.model.joint_net] if self.model.config.shared_softmax else list(self.model.joint_nets.values())
            with torch.no_grad():
                for j in joints:
                    j.out.bias[self.model.blank] -= blank_penalty
        if units_dir is not None:
            self.cfg.data.units_dir = units_dir
        self.units = task.units(self.cfg)
        for lang in self.model.languages:
            if lang not in self.units.inventories:
                raise ConfigError(f"{self.cfg.data.units_dir}: no units for the model's language '{lang}'")
            if not self.model.config.shared_softmax and len(self.units[lang]) != self.model.vocab_size(lang):
                raise ConfigError(f"{self.cfg.data.units_dir}/{lang}: {len(self.units[lang])} units, the model's "
                                  f"softmax has {self.model.vocab_size(lang)} (not the units it was trained with)")
        if self.model.config.shared_softmax and len(self.units.union) != self.model.vocab_size():
            raise ConfigError(f"{self.cfg.data.units_dir}/union: {len(self.units.union)} units, the model's "
                              f"softmax has {self.model.vocab_size()}")
        path = cmvn_stats or self.cfg.data.cmvn_stats or str(self.cfg.data.train_dir)
        self.cmvn = load_global_cmvn(path)
        # union id -> languages whose inventories hold it (vanilla: language of a hypothesis)
        self._union_langs: dict[int, list[str]] = {}
        if self.model.config.shared_softmax:
            reserved = 3 if self.units.unit_type != "bpe" else 2
            for lang in self.model.languages:
                for i, u in enumerate(self.units.to_union[lang]):
                    if i >= reserved:
                        self._union_langs.setdefault(u, []).append(lang)

    def hypothesis_language(self, union_ids: list[int]) -> str | None:
        """Vanilla models: the language whose units make up most of the hypothesis (None if no unit
        tells; ties go to the first language in model order)."""
        counts = {lang: 0 for lang in self.model.languages}
        for t in union_ids:
            for lang in self._union_langs.get(int(t), ()):
                counts[lang] += 1
        best = max(counts.values()) if counts else 0
        if best == 0:
            return None
        return next(lang for lang in self.model.languages if counts[lang] == best)

    def decode_text(self, tokens: list[int], lang: str | None) -> str:
        if self.model.config.shared_softmax:
            return self.units.union.decode(tokens)
        return self.units[lang].decode(tokens)


def _check_finite(m, utt: str, data_dir: Path, entry: str) -> None:
    """Raise DataError naming the utterance and its feats.scp entry if ``m`` holds a NaN or infinity
    (decoded, it would give an empty hypothesis counted as decoded)."""
    import numpy as np

    finite = np.isfinite(m)
    if not finite.all():
        t, k = np.argwhere(~finite)[0]
        raise DataError(f"{data_dir}/feats.scp: '{utt}' ({entry}): frame {t} (of {m.shape[0]}) has a non-finite "
                        f"value ({m[t, k]} in dimension {k}); fix or remove the utterance (nothing merged)")


def _finite_record(rec: dict, ckpt: Path) -> dict:
    """``rec`` if its scores and LID posteriors are finite; else DataError naming the utterance."""
    import math

    values = {f"score of {k}": v for k, v in rec["scores"].items()}
    values.update({f"LID posterior of {k}": v for k, v in (rec["lid_posteriors"] or {}).items()})
    for what, v in values.items():
        if not math.isfinite(v):
            raise DataError(f"{ckpt}: utterance '{rec['utt']}': {what} is {v} from finite features (are the "
                            "model's weights finite?); nothing merged")
    return rec


def _dumps(obj) -> str:
    """JSON without NaN/Infinity (not JSON; strict readers such as jq refuse them)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def decode_part(args, job: int, nj: int) -> None:
    """Decode part ``job`` of ``nj`` into OUT_DIR/parts (skipped when current).

    Raises:
        DataError: a feature matrix with a NaN or infinite value (names the utterance, its
            feats.scp entry and the frame), a non-finite score (names the utterance).
    """
    import numpy as np
    import torch
    from tqdm import tqdm

    from speechkit.decode.rnnt_search import DecodeConfig, recognize, recognize_batch
    from speechkit.features.cmvn import apply_cmvn
    from speechkit.features.io import FeatureReader
    from speechkit.train.trainer import resolve_device

    torch.set_num_threads(args.num_threads)
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    ckpt = _checkpoint_path(args)
    utts_all, feats_table = _utts(data_dir)
    utts = _split(utts_all, nj)[job - 1]
    fp = _fingerprint(args, ckpt, utts, feats_table)
    if not args.force and _part_current(out_dir, job, fp):
        logger.info("part %d of %d is complete and current; nothing to do", job, nj)
        return
    dec = Decoder(ckpt, args.units_dir, args.cmvn_stats, args.blank_penalty)
    model, cfg = dec.model, dec.cfg
    device = resolve_device(args.device, "--device")
    model.to(device)
    mode = _mode(args)
    if mode == "lid_free" and not model.has_lid:
        raise ConfigError(f"--lid-free needs a multisoftmax_lid model; {args.model_dir} is {model.config.variant}")
    need_lang = mode == "oracle" and model.config.variant != "vanilla"
    utt2lang = {}
    lang_file = data_dir / "utt2lang"
    if lang_file.is_file():
        utt2lang = read_table(lang_file)
    elif need_lang:
        raise FileNotFoundError(f"{lang_file}: missing; --oracle-lid decoding of a {model.config.variant} model "
                                f"needs every utterance's language (or use --lid-free with a multisoftmax_lid model)")
    reader = FeatureReader(data_dir, cmvn="none")
    if reader.dim * cfg.data.num_stack != model.config.input_dim:
        raise DataError(f"{data_dir}/feats.scp: {reader.dim}-dim features x num_stack {cfg.data.num_stack} != "
                        f"the model's input_dim {model.config.input_dim} (another frontend?)")
    dcfg = DecodeConfig(mode=mode, method=args.search, beam=args.beam, length_norm=args.length_norm,
                        max_symbols_per_frame=args.max_symbols_per_frame, tau=args.switch_off_tau,
                        s_th=args.switch_off_threshold, switch_off_rule=args.switch_off_rule,
                        chunk_frames=args.chunk_frames,
                        num_stack=cfg.data.num_stack, stack_stride=cfg.data.stack_stride,
                        frame_shift=reader.frame_shift or 0.01)
    logger.info("part %d/%d: %d utterances; model %s (%s, %s) from %s; mode %s, %s search%s%s, %d thread(s), "
                "%s, encoder batch %d",
                job, nj, len(utts), args.model_dir, model.config.variant, " ".join(model.languages), ckpt.name, mode,
                args.search, f" beam {args.beam}" if args.search == "beam" else "",
                f", switch-off tau={args.switch_off_tau} s_th={args.switch_off_threshold}"
                if args.switch_off_tau is not None else "", args.num_threads, device, args.batch_size)
    model.eval()
    records = []
    dec_s = audio_s = 0.0

    def record(rec: dict, r) -> dict:
        chosen = dec.hypothesis_language(r.tokens) if model.config.shared_softmax else r.language
        rec.update({
            "lang": chosen,
            "text": dec.decode_text(r.tokens, r.language),
            "hyps": {k: dec.decode_text(v, None if k == "union" else k) for k, v in r.hyps.items()},
            "scores": r.scores,
            "lid_posteriors": r.lid_posteriors,
            "decoder_frames": r.decoder_frames,
            "switched_off_at": r.switched_off_at,
            "num_frames": r.num_frames,
            "num_input_frames": r.num_input_frames,
            "audio_seconds": r.audio_seconds,
            "decode_seconds": r.decode_seconds,
            "rtf": r.rtf,
            "active_decoders_per_frame": r.active_decoders_per_frame,
        })
        return _finite_record(rec, ckpt)

    def too_short(rec: dict, x) -> dict:
        return {**rec, "skipped": f"too short: {x.size(0)} frames < num_stack {cfg.data.num_stack}"}

    pending: list[tuple[dict, str | None, torch.Tensor]] = []  # the batch being gathered

    def flush() -> None:
        nonlocal dec_s, audio_s
        if not pending:
            return
        results = recognize_batch(model, [x for _, _, x in pending], dcfg, langs=[lang for _, lang, _ in pending])
        for (rec, _, x), r in zip(pending, results):
            if r is None:
                records.append(too_short(rec, x))
                continue
            records.append(record(rec, r))
            dec_s += r.decode_seconds
            audio_s += r.audio_seconds
        pending.clear()

    bar = tqdm(utts, desc=f"decode {job}/{nj}", unit="utt", file=sys.stderr, disable=None, leave=False)
    for utt in bar:
        rec = {"utt": utt, "ref_lang": utt2lang.get(utt)}
        lang = None
        if need_lang:
            lang = utt2lang.get(utt)
            if lang is None:
                records.append({**rec, "skipped": "no language in utt2lang"})
                continue
            if lang not in model.languages:
                records.append({**rec, "skipped": f"language '{lang}' not in the model"})
                continue
        m = reader.raw(utt)
        _check_finite(m, utt, data_dir, feats_table[utt])
        m = apply_cmvn(m, dec.cmvn, norm_vars=cfg.data.norm_vars)
        x = torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32))
        if args.batch_size > 1:
            pending.append((rec, lang, x))
            if len(pending) == args.batch_size:
                flush()
            continue
        on_partial = None
        if args.show_partial:
            def on_partial(p, utt=utt):
                logger.info("%s partial: %s", utt, " | ".join(f"{k}: {dec.decode_text(v, k if k != 'union' else None)}"
                                                              for k, v in p.items()))
        try:
            r = recognize(model, x, dcfg, lang=lang, on_partial=on_partial)
        except ValueError as e:
            if "too short" not in str(e):
                raise
            records.append(too_short(rec, x))
            continue
        records.append(record(rec, r))
        dec_s += r.decode_seconds
        audio_s += r.audio_seconds
    flush()
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    bar.close()
    n_ok = sum(1 for r in records if "skipped" not in r)
    logger.info("part %d/%d: decoded %d of %d utterances, %.1f s of audio in %.1f s: RTF %.4f on %d thread(s)",
                job, nj, n_ok, len(utts), audio_s, dec_s, dec_s / audio_s if audio_s else float("nan"),
                args.num_threads)
    res_path, done_path = _part_paths(out_dir, job)
    res_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(res_path) as f:
        for r in records:
            f.write(_dumps(r) + "\n")
    with atomic_write(done_path) as f:
        f.write(_dumps({"fingerprint": fp, "job": job, "nj": nj, "checkpoint": str(ckpt), "utterances": len(utts),
                        "decoded": n_ok, "decode_seconds": dec_s, "audio_seconds": audio_s}) + "\n")


def merge_parts(args) -> dict:
    """Check every part is current, then write text, utt2lang, lid_posteriors, results.jsonl and
    decode_stats.json; return the stats.

    Raises:
        DataError: a part is missing or stale (names it); a part holding a non-finite score (names
            it and the utterance); no utterance decoded.
    """
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    ckpt = _checkpoint_path(args)
    utts_all, feats_table = _utts(data_dir)
    parts = _split(utts_all, args.nj)
    records = []
    for job, utts in enumerate(parts, 1):
        fp = _fingerprint(args, ckpt, utts, feats_table)
        if not _part_current(out_dir, job, fp):
            raise DataError(f"{out_dir}/parts: part {job} of {args.nj} is missing or was decoded with other inputs "
                            f"(see {out_dir}/log/decode.{job}.log); nothing merged")
        with open(_part_paths(out_dir, job)[0], encoding="utf-8") as f:
            part = [json.loads(line) for line in f if line.strip()]
        for r in part:
            if "skipped" not in r:
                try:
                    _finite_record(r, ckpt)
                except DataError:
                    raise DataError(f"{_part_paths(out_dir, job)[0]}: utterance '{r['utt']}' has a non-finite score "
                                    "(decoded by an older speechkit from features with a NaN?); decode it again "
                                    "with --force") from None
        records.extend(part)
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    done = [r for r in records if "skipped" not in r]
    if not done:
        reasons = sorted({r["skipped"] for r in records})
        raise DataError(f"{data_dir}: no utterance could be decoded ({'; '.join(reasons[:3])})")
    skipped: dict[str, int] = {}
    for r in records:
        if "skipped" in r:
            kind = r["skipped"].split(":")[0]
            skipped[kind] = skipped.get(kind, 0) + 1
    with open(_part_paths(out_dir, 1)[1], encoding="utf-8") as f:
        ckpt_used = json.load(f)["checkpoint"]
    languages = None
    with atomic_write(out_dir / "text") as f:
        for r in done:
            f.write(f"{r['utt']} {r['text']}\n" if r["text"] else f"{r['utt']}\n")
    no_lang = [r["utt"] for r in done if r["lang"] is None]
    with atomic_write(out_dir / "utt2lang") as f:
        for r in done:
            if r["lang"] is not None:
                f.write(f"{r['utt']} {r['lang']}\n")
    have_lid = done[0]["lid_posteriors"] is not None
    if have_lid:
        languages = list(done[0]["lid_posteriors"])
        with atomic_write(out_dir / "lid_posteriors") as f:
            for r in done:
                f.write(f"{r['utt']} [ " + " ".join(f"{r['lid_posteriors'][k]:.6g}" for k in languages) + " ]\n")
    elif (out_dir / "lid_posteriors").exists():
        (out_dir / "lid_posteriors").unlink()
    with atomic_write(out_dir / "results.jsonl") as f:
        for r in records:
            f.write(_dumps(r) + "\n")
    dec_s = sum(r["decode_seconds"] for r in done)
    audio_s = sum(r["audio_seconds"] for r in done)
    t_avg = sum(r["active_decoders_per_frame"] for r in done) / len(done)
    lid_correct = [r["lang"] == r["ref_lang"] for r in done if r["ref_lang"] is not None]
    stats = {
        "data_dir": str(data_dir), "model_dir": str(args.model_dir), "checkpoint": ckpt_used,
        **_options(args), "nj": args.nj,
        # JSON has no infinity: an infinite threshold (no switch-off) is written as the option was, "inf"
        **({"switch_off_threshold": "inf"} if args.switch_off_threshold == float("inf") else {}),
        "languages": languages,
        "num_utterances": len(records), "num_decoded": len(done), "num_skipped": len(records) - len(done),
        "skipped": skipped, "num_without_language": len(no_lang),
        "t_avg": t_avg, "audio_seconds": audio_s, "decode_seconds": dec_s,
        "rtf": dec_s / audio_s if audio_s > 0 else None,
        "chosen_language_accuracy": (100.0 * sum(lid_correct) / len(lid_correct)) if lid_correct else None,
    }
    with atomic_write(out_dir / "decode_stats.json") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    if skipped:
        logger.warning("skipped %d of %d utterances: %s", stats["num_skipped"], len(records),
                       ", ".join(f"{n} {k}" for k, n in skipped.items()))
    if no_lang:
        logger.warning("%d hypotheses tell no language (left out of %s/utt2lang): %s%s", len(no_lang), out_dir,
                       " ".join(no_lang[:5]), " ..." if len(no_lang) > 5 else "")
    acc = stats["chosen_language_accuracy"]
    chooses = _mode(args) == "lid_free" or "union" in done[0]["hyps"]  # LID-free, or a vanilla model
    print(f"{PROG}: {out_dir}: decoded {len(done)} of {len(records)} utterances ({audio_s:.1f} s of audio); "
          f"T_avg {t_avg:.3f}; RTF {stats['rtf']:.4f} ({args.num_threads} thread(s) per job)"
          + (f"; chosen language correct for {acc:.2f} %" if acc is not None and chooses else ""))
    return stats


# ----------------------------------------------------------------------------------------------- pool


def _child_argv(args, job: int) -> list[str]:
    argv = [sys.executable, "-m", "speechkit.bin.asr_decode", "--model-dir", str(args.model_dir),
            "--search", args.search, "--beam", str(args.beam), "--max-symbols-per-frame",
            str(args.max_symbols_per_frame), "--blank-penalty", str(args.blank_penalty),
            "--chunk-frames", str(args.chunk_frames), "--nj", str(args.nj),
            "--job", str(job), "--num-threads", str(args.num_threads),
            "--switch-off-rule", args.switch_off_rule] + (["--length-norm"] if args.length_norm else [])
    for opt, val in (("--checkpoint", args.checkpoint), ("--units-dir", args.units_dir),
                     ("--cmvn-stats", args.cmvn_stats), ("--switch-off-tau", args.switch_off_tau),
                     ("--switch-off-threshold", args.switch_off_threshold)):
        if val is not None:
            argv += [opt, str(val)]
    for flag, on in (("--lid-free", args.lid_free), ("--oracle-lid", args.oracle_lid), ("--force", args.force),
                     ("--show-partial", args.show_partial), ("--verbose", args.verbose)):
        if on:
            argv.append(flag)
    return argv + [str(args.data_dir), str(args.out_dir)]


def run_pool(args) -> list[tuple[int, Path]]:
    """Run the parts as local processes (logs in OUT_DIR/log/decode.J.log); return the failed ones."""
    log_dir = Path(args.out_dir) / "log"
    return run_local_jobs(range(1, args.nj + 1), lambda job: _child_argv(args, job),
                          lambda job: log_dir / f"decode.{job}.log", args.max_jobs or args.nj, args.num_threads)


def _check_paths(args) -> None:
    """OUT_DIR must not be, contain or lie inside DATA_DIR, the checkpoint (or EXP/checkpoints),
    --units-dir or --cmvn-stats, nor be or contain the experiment dir EXP (EXP/decode_test is
    ESPnet's layout, and fine); a --device that cannot run is refused before any work.

    Raises:
        OutputOverlapError (a ValueError): names OUT_DIR and the input; ConfigError: --device.
    """
    from speechkit.train.trainer import resolve_device
    from speechkit.utils.outputs import check_output_dir

    md = Path(args.model_dir)
    exp = md if md.is_dir() else None
    check_output_dir(args.out_dir, option="OUT_DIR",
                     inputs={"DATA_DIR": args.data_dir,
                             "the checkpoint dir": exp / "checkpoints" if exp is not None else None,
                             "the checkpoint": _checkpoint_path(args),
                             "--units-dir": args.units_dir, "--cmvn-stats": args.cmvn_stats},
                     experiment_dirs={"--model-dir": exp})
    resolve_device(args.device, "--device")


def _body(args) -> int:
    _check_args(args)
    _check_paths(args)
    if args.job is not None:
        decode_part(args, args.job, args.nj)
        return 0
    if not args.merge_only:
        if args.nj == 1:
            log_dir = Path(args.out_dir) / "log"
            log_dir.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_dir / "decode.1.log", mode="w", encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
            try:
                decode_part(args, 1, 1)
            finally:
                logger.removeHandler(handler)
                handler.close()
        else:
            failed = run_pool(args)
            if failed:
                msgs = describe_failures(failed)
                print(f"{PROG}: error: {len(failed)} of {args.nj} jobs failed; nothing merged.\n  " + "\n  ".join(msgs),
                      file=sys.stderr)
                return 1
    merge_parts(args)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.job is not None:  # a job's log is its stdout (run.pl / the pool capture it)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout, force=True,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        setup_logging(verbose=args.verbose)
    return run_main(PROG, lambda: _body(args))


if __name__ == "__main__":
    sys.exit(main())
