"""Brute-force, per-triplet ABX reference (ZeroSpeech/ABXpy semantics), for tests and the benchmark.

Written independently of ``speechkit.scoring.abx``: plain Python loops over every triplet, two DTWs
per triplet computed from scratch (no caching, no batching), frame distances straight from the
ABXpy formulas (hamming from ``scipy.spatial.distance.cdist``). Deliberately slow and obvious.
Not collected by pytest (no ``test_`` prefix); load it by path.
"""
from __future__ import annotations

import math
from collections import defaultdict
from decimal import Decimal

import numpy as np
from scipy.spatial.distance import cdist


def ref_frame_distance(x: np.ndarray, y: np.ndarray, distance: str) -> np.ndarray:
    x = np.array(x, dtype=np.float64)
    y = np.array(y, dtype=np.float64)
    if distance == "cosine":
        nx = np.sqrt((x**2).sum(1))
        ny = np.sqrt((y**2).sum(1))
        d = np.empty((len(x), len(y)))
        for i in range(len(x)):
            for j in range(len(y)):
                if nx[i] == 0 and ny[j] == 0:
                    d[i, j] = 0.0
                elif nx[i] == 0 or ny[j] == 0:
                    d[i, j] = 1.0
                else:
                    c = float(np.dot(x[i], y[j])) / (nx[i] * ny[j])
                    d[i, j] = math.acos(min(1.0, max(-1.0, c))) / math.pi
        return d
    if distance == "kl":
        eps = np.finfo(np.float64).eps

        def smooth(p):
            p = p / p.sum(1, keepdims=True)
            p = p + eps
            return p / p.sum(1, keepdims=True)

        p, q = smooth(x), smooth(y)
        d = np.empty((len(p), len(q)))
        for i in range(len(p)):
            for j in range(len(q)):
                kl_pq = float(np.sum(p[i] * (np.log(p[i]) - np.log(q[j]))))
                kl_qp = float(np.sum(q[j] * (np.log(q[j]) - np.log(p[i]))))
                d[i, j] = 0.5 * kl_pq + 0.5 * kl_qp
        return d
    if distance == "hamming":
        return cdist(x, y, "hamming")
    raise ValueError(distance)


def ref_dtw(dist: np.ndarray, normalize: bool = True) -> float:
    """ABXpy ``_dtw``: cumulative-sum borders, 3-way min, backtrack preferring diag, then left."""
    n, m = dist.shape
    cost = [[0.0] * m for _ in range(n)]
    cost[0][0] = float(dist[0, 0])
    for i in range(1, n):
        cost[i][0] = float(dist[i, 0]) + cost[i - 1][0]
    for j in range(1, m):
        cost[0][j] = float(dist[0, j]) + cost[0][j - 1]
    for i in range(1, n):
        for j in range(1, m):
            cost[i][j] = float(dist[i, j]) + min(cost[i - 1][j], cost[i - 1][j - 1], cost[i][j - 1])
    final = cost[n - 1][m - 1]
    if not normalize:
        return final
    path_len = 1
    i, j = n - 1, m - 1
    while i > 0 and j > 0:
        c_up, c_left, c_diag = cost[i - 1][j], cost[i][j - 1], cost[i - 1][j - 1]
        if c_diag <= c_left and c_diag <= c_up:
            i, j = i - 1, j - 1
        elif c_left <= c_up:
            j -= 1
        else:
            i -= 1
        path_len += 1
    if i == 0:
        path_len += j
    if j == 0:
        path_len += i
    return final / path_len


def ref_token(features, item, frame_shift, empty_items="overlap", exact=False):
    """Frames whose centre time lies in [onset, offset] (ABXpy ``get_features_from_raw``); with
    ``overlap``, an item holding no centre takes every frame whose span [i dt, (i+1) dt) shares a
    stretch of positive length with (onset, offset), or the last frame if none does. ``exact``: the
    comparison in decimal arithmetic (fastabx), else in floats (ABXpy)."""
    feats = features[item["file"]]
    if exact:
        dt = Decimal(repr(frame_shift))
        times = [(Decimal(i) + Decimal("0.5")) * dt for i in range(len(feats))]
        on, off = Decimal(repr(item["onset"])), Decimal(repr(item["offset"]))
        mask = np.array([on <= t <= off for t in times], dtype=bool)
    else:
        times = (np.arange(len(feats)) + 0.5) * frame_shift
        mask = np.logical_and(times >= item["onset"], times <= item["offset"])
    if mask.any() or empty_items == "drop":
        return feats[mask]
    keep = []
    for i in range(len(feats)):
        lo, hi = max(i * frame_shift, item["onset"]), min((i + 1) * frame_shift, item["offset"])
        if hi - lo > 1e-9:
            keep.append(i)
    if not keep:  # a zero-length item, or one past the last frame: the frame at (or before) its onset
        keep = [min(int(item["onset"] / frame_shift + 1e-9), len(feats) - 1)]
    return feats[keep]


def ref_abx(features, items, mode="across", distance="cosine", frame_shift=0.01, normalize=True, max_triplets=None,
            empty_items="overlap", same_speaker=None, convention="zr2019"):
    """Per-triplet ABX error (percent), plus the number of triplets scored.

    ``items``: dicts with file, onset, offset, phone, context (tuple), speaker. Items without
    frames are dropped first. ``max_triplets`` stops early (benchmark extrapolation only).
    ``same_speaker(s1, s2)``: across, X must not be of the same *underlying* speaker as A (for
    bootstrap copies ``s#1``, ``s#2`` of one speaker); default: equal labels.
    ``convention``: ``zr2019`` (ABXpy: d(A, X) with A's frames as the DTW's rows, cell means averaged
    over contexts, then (A/B, X) speaker pairs, then phone pairs) or ``zr2021`` (fastabx/Libri-Light:
    d(X, A) with X's frames as the rows, cells averaged over contexts and X speakers together, then
    A/B speakers, then phone pairs; frames selected in decimal arithmetic).
    """
    same = same_speaker or (lambda s1, s2: s1 == s2)
    toks = []
    for it in items:
        t = ref_token(features, it, frame_shift, empty_items, exact=convention == "zr2021")
        if len(t):
            toks.append((it, t))
    by_ctx = defaultdict(list)
    for it, t in toks:
        by_ctx[tuple(it["context"])].append((it, t))
    cell_scores = defaultdict(list)  # (ctx, p1, p2, speakers) -> triplet scores
    n = 0
    for ctx, group in by_ctx.items():
        for ia, (a, ta) in enumerate(group):
            for ib, (b, tb) in enumerate(group):
                for ix, (x, tx) in enumerate(group):
                    if a["phone"] != x["phone"] or b["phone"] == a["phone"]:
                        continue
                    if mode == "across":
                        if a["speaker"] != b["speaker"] or same(x["speaker"], a["speaker"]):
                            continue
                        spk = (a["speaker"], x["speaker"])
                    else:
                        if not (a["speaker"] == b["speaker"] == x["speaker"]) or ia == ix:
                            continue
                        spk = (a["speaker"],)
                    if convention == "zr2021":
                        dax = ref_dtw(ref_frame_distance(tx, ta, distance), normalize)
                        dbx = ref_dtw(ref_frame_distance(tx, tb, distance), normalize)
                    else:
                        dax = ref_dtw(ref_frame_distance(ta, tx, distance), normalize)
                        dbx = ref_dtw(ref_frame_distance(tb, tx, distance), normalize)
                    s = 1.0 if dax < dbx else (0.5 if dax == dbx else 0.0)
                    cell_scores[(ctx, a["phone"], b["phone"], spk)].append(s)
                    n += 1
                    if max_triplets is not None and n >= max_triplets:
                        return _average(cell_scores, convention), n
    return _average(cell_scores, convention), n


def _average(cell_scores, convention="zr2019"):
    # mean in each cell, then over contexts (zr2021: contexts and X speakers), then speakers, then phone pairs
    ctx_level = defaultdict(list)
    for (ctx, p1, p2, spk), scores in cell_scores.items():
        key = (p1, p2, spk[:1]) if convention == "zr2021" else (p1, p2, spk)
        ctx_level[key].append(sum(scores) / len(scores))
    spk_level = defaultdict(list)
    for (p1, p2, spk), v in ctx_level.items():
        spk_level[(p1, p2)].append(sum(v) / len(v))
    pair_means = [sum(v) / len(v) for v in spk_level.values()]
    return 100.0 * (1.0 - sum(pair_means) / len(pair_means))
