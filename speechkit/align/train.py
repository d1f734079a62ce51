"""Training of the forced aligner (Kaldi's ``train_mono.sh``, ``train_deltas.sh``,
``train_lda_mllt.sh``, ``train_sat.sh`` and a hybrid refinement): :func:`train_aligner`."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np

from speechkit.align.aligner import Aligner, AlignResult, _estimate_speaker_fmllr
from speechkit.align.config import MAX_LISTED, MODEL_FILE, SIL, AlignerConfig
from speechkit.align.features import _read_inputs, compute_features
from speechkit.align.gmm import DiagGmmSet, split_targets
from speechkit.align.hmm import AlignGraph
from speechkit.align.hybrid import FrameClassifier
from speechkit.align.transforms import _apply_fmllr, estimate_lda, estimate_mllt, mllt_objective, splice
from speechkit.align.tree import build_context_tree, phone_questions
from speechkit.data.datadir import new_backup_dir
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)


#: in EXP_DIR/log while a new aligner trains there: the training log of the aligner EXP_DIR holds, kept
#: aside until :meth:`Aligner.save` replaces that aligner (then it goes to the aligner's backup)
PREVIOUS_LOG = ".train.log.previous"


def _set_previous_log_aside(exp_dir: Path) -> None:
    """Retraining into a dir that holds an aligner: its ``log/train.log`` is moved to
    :data:`PREVIOUS_LOG` (unless a failed retraining already put it there) before the new log is opened."""
    logs = exp_dir / "log"
    if (exp_dir / MODEL_FILE).is_file() and (logs / "train.log").is_file() and not (logs / PREVIOUS_LOG).exists():
        os.replace(logs / "train.log", logs / PREVIOUS_LOG)


def _save(al: Aligner, exp_dir: Path, log: "_TrainLog") -> None:
    """Save ``al`` in ``exp_dir``; the aligner it replaces (and its alignments and training log) are kept in
    ``exp_dir/.backup/N/`` (logged)."""
    kept = al.save(exp_dir)
    previous_log = exp_dir / "log" / PREVIOUS_LOG
    if previous_log.is_file():
        kept = kept or new_backup_dir(exp_dir)
        (kept / "log").mkdir(exist_ok=True)
        os.replace(previous_log, kept / "log" / "train.log")
    if kept is not None:
        log(f"replaced the aligner of {exp_dir}: the previous one, its alignments and its log are in {kept}")


class _TrainLog:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "w", encoding="utf-8")

    def __call__(self, msg: str) -> None:
        logger.info(msg)
        self.f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _duration_inliers(aligner: Aligner, graphs: list[AlignGraph], paths: list[np.ndarray], k: float
                      ) -> list[np.ndarray]:
    """Per utterance, bool ``(T,)``: the frame's token has a plausible duration for its phone,
    ``|log d - median| <= k * max(1.4826 MAD, 0.25)`` over the phone's tokens in this alignment
    (robust z-score of the log duration)."""
    runs = []
    for g, p in zip(graphs, paths):
        tok = g.token[p]
        starts = np.concatenate([[0], np.nonzero(np.diff(tok))[0] + 1])
        lens = np.diff(np.append(starts, len(p)))
        runs.append((g.label[p[starts]], lens, starts))
    lab = np.concatenate([r[0] for r in runs])
    logd = np.log(np.concatenate([r[1] for r in runs]).astype(np.float64))
    med = np.zeros(len(aligner.phones))
    spread = np.ones(len(aligner.phones))
    for ph in np.unique(lab):
        v = logd[lab == ph]
        med[ph] = np.median(v)
        spread[ph] = max(1.4826 * np.median(np.abs(v - med[ph])), 0.25)
    out = []
    for (l, lens, starts), p in zip(runs, paths):
        ok = np.abs(np.log(lens) - med[l]) <= k * spread[l]
        out.append(np.repeat(ok, lens))
    return out


def _accumulate(aligner: Aligner, graphs: list[AlignGraph], feats: list[np.ndarray],
                paths: list[np.ndarray]) -> tuple[list[np.ndarray | None], np.ndarray]:
    """Frames per pdf and transition counts ``(num_phones, max_states, 3)`` from state paths
    (with ``duration_outlier_k`` > 0, frames of tokens of implausible duration are left out)."""
    k = aligner.config.duration_outlier_k
    if k > 0:
        keep = _duration_inliers(aligner, graphs, paths, k)
        feats = [f[m] for f, m in zip(feats, keep)]
        pdfs = [g.pdf[p][m] for g, p, m in zip(graphs, paths, keep)]
    else:
        pdfs = [g.pdf[p] for g, p in zip(graphs, paths)]
    X = np.concatenate(feats)
    pdf_of_frame = np.concatenate(pdfs)
    order = np.argsort(pdf_of_frame, kind="stable")
    bounds = np.searchsorted(pdf_of_frame[order], np.arange(aligner.num_pdfs + 1))
    frames = [X[order[bounds[p]:bounds[p + 1]]] if bounds[p + 1] > bounds[p] else None
              for p in range(aligner.num_pdfs)]
    counts = np.zeros(aligner.trans.shape)
    for g, p in zip(graphs, paths):
        a, b = p[:-1], p[1:]
        kind = np.where(a == b, 0, np.where((g.label[a] == g.label[b]) & (g.token[a] == g.token[b])
                                            & (g.hmm_state[b] == g.hmm_state[a] + 2), 2, 1))
        np.add.at(counts, (g.label[a], g.hmm_state[a], kind), 1)
        counts[g.label[p[-1]], g.hmm_state[p[-1]], 1] += 1
    return frames, counts


def _accumulate_posteriors(aligner: Aligner, graphs: list[AlignGraph], feats: list[np.ndarray],
                           fb: list) -> tuple[list, np.ndarray]:
    """Like :func:`_accumulate`, from forward-backward output (weighted frames, expected transition counts)."""
    X = np.concatenate(feats)
    offs = np.concatenate([[0], np.cumsum([len(f) for f in feats])])
    rows, pdfs, ws = [], [], []
    counts = np.zeros(aligner.trans.shape)
    slot_kind = np.array([0, 1, 2, 1])
    for g, o, (logz, (tt, jj, w), xi) in zip(graphs, offs[:-1], fb):
        if not np.isfinite(logz):
            continue
        rows.append(tt + o)
        pdfs.append(g.pdf[jj])
        ws.append(w)
        j, k = np.nonzero(xi > 0)
        i = g.pred[j, k]
        np.add.at(counts, (g.label[i], g.hmm_state[i], slot_kind[k]), xi[j, k])
        last = tt == tt.max()
        np.add.at(counts, (g.label[jj[last]], g.hmm_state[jj[last]], 1), w[last])
    rows, pdfs, ws = np.concatenate(rows), np.concatenate(pdfs), np.concatenate(ws)
    order = np.argsort(pdfs, kind="stable")
    bounds = np.searchsorted(pdfs[order], np.arange(aligner.num_pdfs + 1))
    frames = [(X[rows[order[bounds[p]:bounds[p + 1]]]], ws[order[bounds[p]:bounds[p + 1]]])
              if bounds[p + 1] > bounds[p] else None for p in range(aligner.num_pdfs)]
    return frames, counts


def _update_trans(aligner: Aligner, counts: np.ndarray) -> None:
    floor = aligner.config.transition_floor
    allowed = aligner.trans > 0
    tot = counts.sum(-1, keepdims=True)
    new = np.where(allowed, np.maximum(counts / np.maximum(tot, 1e-300), floor), 0.0)
    new /= np.maximum(new.sum(-1, keepdims=True), 1e-300)
    has = (tot[..., 0] > 0)
    aligner.trans[has] = new[has]


def _realign(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray], nj: int):
    """Viterbi paths of the training data: ``(ok, graphs, paths, log-likelihood per frame)`` for
    the indices ``ok`` of the utterances that have a path."""
    lt = al._scaled_trans()
    graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
    res = al.viterbi(graphs, F, nj=nj)
    ok = [i for i, (s, _) in enumerate(res) if np.isfinite(s)]
    avg = float(np.sum([res[i][0] * len(F[i]) for i in ok]) / max(1, sum(len(F[i]) for i in ok)))
    return ok, [graphs[i] for i in ok], [res[i][1] for i in ok], avg


def _pdf_covariances(frames: list) -> tuple[np.ndarray, np.ndarray]:
    """``(P, D, D)`` full covariances and ``(P,)`` counts of the frames of each pdf (0 for a pdf
    with no more frames than dimensions)."""
    D = next(f.shape[1] for f in frames if f is not None)
    covs = np.zeros((len(frames), D, D))
    n = np.zeros(len(frames))
    for p, f in enumerate(frames):
        if f is not None and len(f) > D:  # fewer frames give a singular covariance
            f = np.asarray(f, np.float64)
            n[p] = len(f)
            covs[p] = np.cov(f, rowvar=False, bias=True)
    return covs, n


def _train_sat(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray], spk: list[str],
               rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """Speaker-adaptive training (Kaldi's ``train_sat.sh``; Anastasakos et al. 1996) continuing the
    current model: per-speaker fMLLR re-estimated on the passes in ``sat_fmllr_iters``, the GMMs
    re-estimated on the transformed features every pass, re-aligning on ``sat_realign_iters``.
    Returns the transformed training features."""
    c = al.config
    ok, pg, paths, _ = _realign(al, keys, tokens, words, F, nj)
    Ft = F
    W: dict[str, np.ndarray] = {}
    X = np.concatenate(F).astype(np.float64)
    var_floor = c.var_floor * X.var(0)
    for it in range(1, c.sat_iters + 1):
        t0 = time.time()
        msg = []
        if it in set(c.sat_fmllr_iters):
            W = _estimate_speaker_fmllr(al, pg, [F[i] for i in ok], [Ft[i] for i in ok], paths,
                                        [spk[i] for i in ok], W)
            Ft = [_apply_fmllr(W.get(s), f) for s, f in zip(spk, F)]
            msg.append(f"fMLLR of {len(W)} speakers")
        if it in set(c.sat_realign_iters):
            ok, pg, paths, avg = _realign(al, keys, tokens, words, Ft, nj)
            msg.append(f"realigned, log-likelihood per frame {avg:.3f}")
        frames, counts = _accumulate(al, pg, [Ft[i] for i in ok], paths)
        al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        log(f"SAT iteration {it}: {'; '.join(msg) or 'no realignment'} ({time.time() - t0:.1f} s)")
        if callback is not None:
            callback(it_offset + it, al)
    return Ft


def _train_stage(al: Aligner, name: str, keys: list[str], tokens, words, F: list[np.ndarray],
                 ok: list[int], paths: list[np.ndarray], num_iters: int, realign_iters: list[int],
                 mllt_iters: list[int], total_gauss: int, rng: np.random.Generator, log, nj: int,
                 callback, it_offset: int) -> list[np.ndarray]:
    """Viterbi training of ``al``'s current pdfs from the state ``paths`` of utterances ``ok``
    (Kaldi's ``train_deltas.sh`` / ``train_lda_mllt.sh`` loop): single Gaussians from the
    alignment, then ``num_iters`` EM passes, mixing up to ``total_gauss`` over the first
    ``max_iter_inc``, re-aligning on ``realign_iters`` and re-estimating an MLLT (when the model
    has an LDA transform) on ``mllt_iters``. Returns the training features (changed by an MLLT)."""
    c = al.config
    lt = al._scaled_trans()
    pg = [al.make_graph(tokens[keys[i]], None if words is None else words.get(keys[i]), _lt=lt) for i in ok]
    X = np.concatenate(F).astype(np.float64)
    var_floor = c.var_floor * X.var(0)
    al.gmm = DiagGmmSet.single(al.num_pdfs, X.mean(0), X.var(0))
    frames, _ = _accumulate(al, pg, [F[i] for i in ok], paths)
    al.gmm.em_update(frames, var_floor, c.min_count)
    realign, mllt = set(realign_iters), set(mllt_iters)
    num_gauss = float(al.num_pdfs)
    inc = max(0, total_gauss - num_gauss) / max(1, min(c.max_iter_inc, num_iters))
    for it in range(1, num_iters + 1):
        t0 = time.time()
        msg = []
        if it in mllt and al.transform is not None:
            frames, _ = _accumulate(al, pg, [F[i] for i in ok], paths)
            covs, n = _pdf_covariances(frames)
            A = estimate_mllt(covs, n)
            gain = mllt_objective(A, covs, n) - mllt_objective(np.eye(len(A)), covs, n)
            al.transform = A @ al.transform
            F = [(f @ A.T).astype(np.float32) for f in F]
            al.gmm.means = al.gmm.means @ A.T  # variances are re-estimated below (gmm-transform-means)
            al.gmm._cache = None
            var_floor = c.var_floor * np.concatenate(F).astype(np.float64).var(0)
            msg.append(f"MLLT, log-likelihood gain per frame {gain / max(1.0, n.sum()):.3f}")
        if it in realign:
            ok, pg, paths, avg = _realign(al, keys, tokens, words, F, nj)
            msg.append(f"realigned, log-likelihood per frame {avg:.3f}")
        frames, counts = _accumulate(al, pg, [F[i] for i in ok], paths)
        occ = al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        if it <= c.max_iter_inc:
            num_gauss = min(total_gauss, num_gauss + inc)
            al.gmm.split(split_targets(occ, int(round(num_gauss)), c.power, c.min_gauss_count), c.perturb, rng)
        log(f"{name} iteration {it}: {'; '.join(msg) or 'no realignment'}; "
            f"{int(al.gmm.num_components().sum())} Gaussians ({time.time() - t0:.1f} s)")
        if callback is not None:
            callback(it_offset + it, al)
    return F


def _train_triphones(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray],
                     rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """Triphone stage (Kaldi's ``train_deltas.sh``): statistics of every seen (left, phone, right,
    state) from the current alignment, questions from a clustering of the phones' monophone means,
    a tree per (phone, state) grown to ``tri_leaves`` leaves, then :func:`_train_stage`."""
    c = al.config
    t0 = time.time()
    ok, pg, paths, _ = _realign(al, keys, tokens, words, F, nj)
    N = len(al.phones)
    E = N
    ctxs = []
    for i, g, p in zip(ok, pg, paths):
        tid = np.array([al.phone_id[t] for t in tokens[keys[i]]])
        left = np.concatenate([[E], tid[:-1]])
        right = np.concatenate([tid[1:], [E]])
        tok = g.token[p]
        inside = tok >= 0
        ctxs.append(np.stack([np.where(inside, left[np.maximum(tok, 0)], E), g.label[p],
                              np.where(inside, right[np.maximum(tok, 0)], E), g.hmm_state[p]], 1))
    ctx = np.concatenate(ctxs)
    X = np.concatenate([F[i] for i in ok]).astype(np.float64)
    if c.duration_outlier_k > 0:
        keep = np.concatenate(_duration_inliers(al, pg, paths, c.duration_outlier_k))
        ctx, X = ctx[keep], X[keep]
    code = ((ctx[:, 0] * N + ctx[:, 1]) * (N + 1) + ctx[:, 2]) * al.num_states.max() + ctx[:, 3]
    uniq, inv = np.unique(code, return_inverse=True)
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv] = np.arange(len(inv))
    n = np.bincount(inv, minlength=len(uniq)).astype(np.float64)
    sx = np.zeros((len(uniq), X.shape[1]))
    sxx = np.zeros_like(sx)
    np.add.at(sx, inv, X)
    np.add.at(sxx, inv, X * X)
    # questions from the monophone GMMs: each phone's (weighted) state means, concatenated
    w = np.exp(al.gmm.log_weights)
    pdf_mean = np.einsum("pm,pmd->pd", w, al.gmm.means)
    S = int(al.num_states.max())
    pm = np.stack([np.concatenate([pdf_mean[al.pdf_offset[p] + min(s, al.num_states[p] - 1)] for s in range(S)])
                   for p in range(N)])
    questions = phone_questions(pm)
    ctx_pdf = build_context_tree(ctx[first], n, sx, sxx, N, al.num_states, questions, c.tri_leaves,
                                 c.tri_min_count, c.var_floor * X.var(0))
    al.set_tree(ctx_pdf)
    log(f"triphones: {len(uniq)} seen context states, {len(questions)} questions, {al.num_pdfs} tied states "
        f"({time.time() - t0:.1f} s)")
    return _train_stage(al, "triphone", keys, tokens, words, F, ok, paths, c.tri_iters, c.tri_realign_iters,
                        [], c.tri_total_gauss, rng, log, nj, callback, it_offset)


def _train_lda_mllt(al: Aligner, keys: list[str], tokens, words, base: list[np.ndarray],
                    rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """The LDA+MLLT stage (Kaldi's ``train_lda_mllt.sh``) from the current model's alignment
    (and its pdfs: monophone or tied triphone states): sets ``al.transform`` and re-trains
    ``al.gmm`` (:func:`_train_stage`); returns the training features in the new space."""
    c = al.config
    t0 = time.time()
    ok, pg, paths, _ = _realign(al, keys, tokens, words, base, nj)
    spliced = [splice(np.asarray(f[:, :c.n_mfcc], np.float32), c.lda_context) for f in base]
    labels = np.concatenate([g.pdf[p] for g, p in zip(pg, paths)])
    S = np.concatenate([spliced[i] for i in ok])
    dim = min(c.lda_dim, S.shape[1])
    al.transform = estimate_lda(S, labels, dim, al.num_pdfs)
    F = [(x @ al.transform.T).astype(np.float32) for x in spliced]
    log(f"LDA: {S.shape[1]} -> {dim} dimensions, {len(np.unique(labels))} classes ({time.time() - t0:.1f} s)")
    total = c.tri_total_gauss if al.ctx_pdf is not None else c.total_gauss
    return _train_stage(al, "LDA+MLLT", keys, tokens, words, F, ok, paths, c.lda_iters, c.lda_realign_iters,
                        c.mllt_iters, total, rng, log, nj, callback, it_offset)


def train_aligner(data_dir: str | os.PathLike, exp_dir: str | os.PathLike,
                  config: AlignerConfig | None = None, nj: int = 1,
                  callback: Callable[[int, Aligner], None] | None = None) -> tuple[Aligner, AlignResult]:
    """Train a monophone HMM-GMM aligner on a data dir, save it in ``exp_dir`` and align the data.

    Writes ``exp_dir/{final.mdl, phones.txt, config.yaml, log/train.log}`` (not the alignments:
    see :meth:`AlignResult.write`). An aligner already in ``exp_dir`` is replaced only when the new one
    is trained, and kept: its files, the alignments made with it and its ``log/train.log`` are moved to
    ``exp_dir/.backup/N/`` (:meth:`Aligner.save`); a failed retraining leaves it in place.

    Args:
        data_dir: Kaldi data dir with ``wav.scp`` (+ ``segments``), ``text`` (phone tokens),
            ``utt2spk`` and optionally ``phone_info`` (word boundaries for optional silence).
        exp_dir: output directory.
        config: training/alignment settings (default :class:`AlignerConfig`).
        nj: parallel processes for features and alignment.
        callback: called as ``callback(iteration, aligner)`` after every training pass (for
            monitoring, e.g. boundary accuracy against reference labels).

    Returns:
        ``(aligner, result)``: the trained aligner and the alignment of ``data_dir`` by its final model.

    Raises:
        FileNotFoundError / DataError: missing or malformed inputs (named file and line).
        DataError: no utterance usable for training.
    """
    c = config or AlignerConfig()
    exp_dir = Path(exp_dir)
    _set_previous_log_aside(exp_dir)
    log = _TrainLog(exp_dir / "log" / "train.log")
    t_start = time.time()
    try:
        d, tokens, words = _read_inputs(data_dir)
        if not c.optional_silence:
            words = None
        feats, durs, failed = compute_features(d, d.utts, c, nj)
        log(f"features: {len(feats)} utterances, {sum(len(f) for f in feats.values())} frames "
            f"({time.time() - t_start:.1f} s)")
        inventory = sorted({t for u in feats for t in tokens[u]})
        if c.optional_silence:
            inventory = sorted(set(inventory) | {SIL})
        if not inventory:
            raise DataError(f"{data_dir}/text: no tokens to train on")
        al = Aligner(c, inventory)
        rng = np.random.default_rng(c.seed)
        lt = al._scaled_trans()
        keys, graphs, eq_graphs = [], [], []
        skipped: dict[str, str] = dict(failed)
        for u in sorted(feats):
            toks = tokens[u]
            if not toks:
                skipped[u] = "empty text"
                continue
            g = al.make_graph(toks, None if words is None else words.get(u), _lt=lt)
            if len(feats[u]) < g.min_frames():
                skipped[u] = f"too few frames: {len(feats[u])} frames for {len(toks)} tokens"
                continue
            eg = al.make_graph(toks, equal_path=True, _lt=lt)
            if len(feats[u]) < eg.num_states and al.sil_id is not None:  # too short to also hold silence
                eg = al.make_graph(toks, equal_path=True, silence=False, _lt=lt)
            keys.append(u)
            graphs.append(g)
            eq_graphs.append(eg if len(feats[u]) >= eg.num_states else None)
        if skipped:
            log(f"not used for training: {len(skipped)} utterance(s), e.g. "
                + ", ".join(f"{u} ({r})" for u, r in list(skipped.items())[:MAX_LISTED]))
        if not keys:
            raise DataError(f"{data_dir}: no utterance can be used to train the aligner "
                            f"({len(skipped)} skipped)")
        F = [feats[u] for u in keys]
        X = np.concatenate(F).astype(np.float64)
        gmean, gvar = X.mean(0), X.var(0)
        var_floor = c.var_floor * gvar
        al.gmm = DiagGmmSet.single(al.num_pdfs, gmean, gvar)
        # ---- flat start: equal alignment
        eq_paths, eq_g, eq_f = [], [], []
        for g, f in zip(eq_graphs, F):
            if g is None:
                continue
            eq_paths.append((np.arange(len(f)) * g.num_states) // len(f))
            eq_g.append(g)
            eq_f.append(f)
        frames, counts = _accumulate(al, eq_g, eq_f, eq_paths)
        occ = al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        num_gauss = al.num_pdfs
        inc = max(0, (c.total_gauss - num_gauss)) / max(1, c.max_iter_inc)
        log(f"iteration 0 (equal alignment): {al.num_pdfs} pdfs, {len(keys)} utterances")
        paths = None
        realign = set(c.realign_iters)
        for it in range(1, c.num_iters + 1):
            t0 = time.time()
            if it <= c.baum_welch_iters:
                lt = al._scaled_trans()
                graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
                scale = c.train_acoustic_scale
                if c.train_acoustic_scale_final is not None and c.baum_welch_iters > 1:
                    frac = (it - 1) / (c.baum_welch_iters - 1)
                    scale = c.train_acoustic_scale * (c.train_acoustic_scale_final / c.train_acoustic_scale) ** frac
                fb = al.forward_backward(graphs, F, nj=nj, scale=scale)
                frames, counts = _accumulate_posteriors(al, graphs, F, fb)
                msg = "Baum-Welch"
            elif it in realign or paths is None:
                lt = al._scaled_trans()
                graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
                res = al.viterbi(graphs, F, nj=nj)
                ok = [i for i, (s, _) in enumerate(res) if np.isfinite(s)]
                paths = [res[i][1] for i in ok]
                pg, pf = [graphs[i] for i in ok], [F[i] for i in ok]
                avg = float(np.sum([res[i][0] * len(F[i]) for i in ok]) / max(1, sum(len(F[i]) for i in ok)))
                msg = f"realigned, log-likelihood per frame {avg:.3f}"
            else:
                msg = "no realignment"
            if it > c.baum_welch_iters:
                frames, counts = _accumulate(al, pg, pf, paths)
            occ = al.gmm.em_update(frames, var_floor, c.min_count)
            _update_trans(al, counts)
            if it <= c.max_iter_inc:
                num_gauss = min(c.total_gauss, num_gauss + inc)
                al.gmm.split(split_targets(occ, int(round(num_gauss)), c.power, c.min_gauss_count), c.perturb, rng)
            log(f"iteration {it}: {msg}; {int(al.gmm.num_components().sum())} Gaussians "
                f"({time.time() - t0:.1f} s)")
            if callback is not None:
                callback(it, al)
        it_offset = c.num_iters
        if c.tri_leaves > 0:
            F = _train_triphones(al, keys, tokens, words, F, rng, log, nj, callback, it_offset)
            it_offset += c.tri_iters
        if c.lda_dim > 0:
            F = _train_lda_mllt(al, keys, tokens, words, [feats[u] for u in keys], rng, log, nj, callback,
                                it_offset)
            it_offset += c.lda_iters
        if c.sat_iters > 0:
            F = _train_sat(al, keys, tokens, words, F, [d.utt2spk.get(u, u) for u in keys], rng, log, nj,
                           callback, it_offset)
            it_offset += c.sat_iters
        for r in range(1, c.refine_iters + 1):
            t0 = time.time()
            lt = al._scaled_trans()
            graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
            res = al.viterbi(graphs, F, nj=nj)
            ok = [i for i, (sc, _) in enumerate(res) if np.isfinite(sc)]
            targets = [graphs[i].pdf[res[i][1]] for i in ok]
            al.mlp = FrameClassifier.train([F[i] for i in ok], targets, al.num_pdfs, c, seed=c.seed + r)
            log(f"refinement {r}: frame classifier trained on {sum(len(t) for t in targets)} frames, "
                f"frame accuracy {al.mlp.train_accuracy:.3f} ({time.time() - t0:.1f} s)")
            if callback is not None:
                callback(c.num_iters + r, al)
        _save(al, exp_dir, log)
        log(f"saved {exp_dir / MODEL_FILE}; training took {time.time() - t_start:.1f} s")
        result = al.align_features(feats, tokens, words, durs, nj, utt2spk=d.utt2spk)
        result.unaligned.update(failed)
        result.unaligned = dict(sorted(result.unaligned.items()))
        log(f"aligned {len(result.alignments)} utterance(s), {len(result.unaligned)} not aligned")
        return al, result
    finally:
        log.close()
