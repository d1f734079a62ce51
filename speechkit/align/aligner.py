"""The forced aligner: :class:`Aligner` (phone HMMs, their alignment graphs, Viterbi and
forward-backward over them, per-speaker fMLLR, save/load of ``final.mdl``) and its
:class:`AlignResult`. Training is :func:`speechkit.align.train.train_aligner`."""
from __future__ import annotations

import contextlib
import filecmp
import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from speechkit.align.config import (ALIGNMENTS_FILE, CONFIG_FILE, MODEL_FILE, MODEL_VERSION, PHONES_FILE, SIL,
                                    UNALIGNED_FILE, AlignerConfig)
from speechkit.align.features import _pmap, _read_inputs, compute_features
from speechkit.align.gmm import NEG_INF, DiagGmmSet
from speechkit.align.hmm import MAX_PRED, AlignGraph, forward_backward_batch, viterbi_batch
from speechkit.align.hybrid import FrameClassifier
from speechkit.align.transforms import _apply_fmllr, estimate_fmllr, splice
from speechkit.data.corpora._common import write_phone_alignments
from speechkit.data.datadir import backup_files
from speechkit.utils.config import load_config, to_dict
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, write_table
from speechkit.utils.outputs import OutputOverlapError

#: The files of a saved aligner (:meth:`Aligner.save`).
MODEL_FILES = (MODEL_FILE, PHONES_FILE, CONFIG_FILE)


def check_alignment_dir(exp_dir: str | os.PathLike, model_dir: str | os.PathLike) -> None:
    """Refuse to write alignments made with ``model_dir``'s aligner into an ``exp_dir`` that holds another
    aligner: its ``phone_alignments`` would lie beside a ``final.mdl`` that did not make them (a later
    ``--model-dir exp_dir`` or retraining would take them for that model's). An ``exp_dir`` holding no
    ``final.mdl`` (``exp/align_test``), or a byte-identical copy of ``model_dir``'s, is fine.

    Refused rather than backed up (as retraining backs up the earlier model with its alignments): moving
    the other aligner away would leave ``exp_dir`` without the model a later stage loads from it.

    Raises:
        OutputOverlapError: names both directories (and the parameters, :mod:`speechkit.utils.errors`).
    """
    mine, theirs = Path(model_dir) / MODEL_FILE, Path(exp_dir) / MODEL_FILE
    if theirs.exists() and not (mine.is_file() and theirs.is_file() and filecmp.cmp(mine, theirs, shallow=False)):
        raise naming_parameters(OutputOverlapError(
            f"`exp_dir` {exp_dir} holds another aligner ({theirs}, not the one of `model_dir` {model_dir}): alignments "
            "written there would lie beside a model that did not make them; choose another `exp_dir`"))


@dataclass
class AlignResult:
    """Output of :meth:`Aligner.align`.

    Attributes:
        alignments: utt -> ``[(start_s, end_s, label), ...]`` contiguous from 0 to the audio's end.
        unaligned: utt -> reason, for every utterance that could not be aligned.
        log_likelihood: utt -> acoustic log-likelihood per frame of the best path.
    """

    alignments: dict[str, list[tuple[float, float, str]]]
    unaligned: dict[str, str]
    log_likelihood: dict[str, float] = field(default_factory=dict)

    def write(self, exp_dir: str | os.PathLike) -> int:
        """Write ``exp_dir/phone_alignments`` and ``exp_dir/unaligned`` (``<utt> <reason>``), atomically.

        Returns the number of alignment lines.
        """
        exp_dir = Path(exp_dir)
        rows = [(u, s, e, p) for u, segs in self.alignments.items() for s, e, p in segs]
        n = write_phone_alignments(exp_dir / ALIGNMENTS_FILE, rows)
        write_table(exp_dir / UNALIGNED_FILE, {u: " ".join(r.split()) for u, r in self.unaligned.items()})
        return n


class Aligner:
    """A monophone HMM-GMM forced aligner (see :mod:`speechkit.align`).

    Attributes:
        config: the :class:`AlignerConfig` it was trained with.
        phones: phone symbols; index = phone id.
        gmm: one GMM per (phone, HMM state); pdf of state ``s`` of phone ``p`` is ``pdf_offset[p] + s``.
        trans: float64 ``(num_phones, max_states, 3)`` transition probabilities ``[self, next, skip]``.
    """

    def __init__(self, config: AlignerConfig, phones: list[str], gmm: DiagGmmSet | None = None,
                 trans: np.ndarray | None = None):
        self.config = config
        self.phones = list(phones)
        self.phone_id = {p: i for i, p in enumerate(self.phones)}
        self.num_states = np.array([config.sil_num_states if p == SIL else config.num_states for p in self.phones])
        self.pdf_offset = np.concatenate([[0], np.cumsum(self.num_states)])[:-1]
        self.num_pdfs = int(self.num_states.sum())
        ms = int(self.num_states.max())
        if trans is None:
            a = config.self_loop_init
            trans = np.zeros((len(self.phones), ms, 3))
            trans[:, :, 0] = a
            trans[:, :, 1] = 1 - a
            if config.skip:
                for p, n in enumerate(self.num_states):
                    for s in range(n - 2):
                        trans[p, s, 1] = trans[p, s, 2] = (1 - a) / 2
        self.trans = trans
        self.gmm = gmm
        self.mlp: FrameClassifier | None = None
        #: LDA+MLLT projection ``(lda_dim, n_mfcc * (2 lda_context + 1))`` of the spliced static
        #: cepstra, or None (the model reads MFCC + deltas).
        self.transform: np.ndarray | None = None
        #: Triphone state tying: pdf of each ``(left, phone, right, state)``, int
        #: ``(num_phones + 1, num_phones, num_phones + 1, max_states)`` (index ``num_phones`` = the
        #: utterance edge), or None (monophones: pdf ``pdf_offset[phone] + state``).
        self.ctx_pdf: np.ndarray | None = None

    def set_tree(self, ctx_pdf: np.ndarray | None) -> None:
        """Use the tied triphone states ``ctx_pdf`` (see :attr:`ctx_pdf`; None = monophones)."""
        self.ctx_pdf = ctx_pdf
        self.num_pdfs = int(self.num_states.sum()) if ctx_pdf is None else int(ctx_pdf.max()) + 1

    def model_features(self, feats: np.ndarray) -> np.ndarray:
        """The features the model reads, from :func:`compute_features`'s ``(T, 3 n_mfcc)``:
        themselves, or the LDA+MLLT projection of the spliced static cepstra ``(T, lda_dim)``."""
        if self.transform is None:
            return feats
        x = splice(np.asarray(feats[:, :self.config.n_mfcc], np.float32), self.config.lda_context)
        return (x @ self.transform.T.astype(np.float32)).astype(np.float32)

    @property
    def sil_id(self) -> int | None:
        return self.phone_id.get(SIL) if self.config.optional_silence else None

    # ------------------------------------------------------------------ graphs
    def _scaled_trans(self) -> np.ndarray:
        """Log transition weights with Kaldi's self-loop scaling: ``s log a`` for the self-loop and
        ``log(b / (1 - a)) + s log(1 - a)`` for a forward transition of probability ``b``; all
        times ``transition_scale``."""
        c = self.config
        t = np.maximum(self.trans, 1e-300)
        a = t[..., 0]
        with np.errstate(divide="ignore"):
            out = np.empty_like(t)
            out[..., 0] = c.self_loop_scale * np.log(a)
            fwd = np.log(t[..., 1:]) - np.log1p(-a)[..., None] + c.self_loop_scale * np.log1p(-a)[..., None]
            out[..., 1:] = np.where(self.trans[..., 1:] > 0, fwd, NEG_INF)
        return c.transition_scale * out

    def make_graph(self, tokens: list[str], words: list[int] | None = None, *, equal_path: bool = False,
                   silence: bool = True, _lt: np.ndarray | None = None) -> AlignGraph:
        """The alignment graph of a token sequence.

        Args:
            tokens: phone symbols (all in :attr:`phones`).
            words: word index per token; optional silence goes between tokens whose word index
                differs (only with ``optional_silence``).
            equal_path: build the flat-start path instead: silence (if optional) only at the start
                and end, taken, for an equal alignment.
            silence: ``False`` leaves the optional silence out.

        Raises:
            KeyError: a token not in :attr:`phones`.
        """
        c = self.config
        lt = self._scaled_trans() if _lt is None else _lt
        sil = self.sil_id if silence else None
        lsil, lnosil = (c.transition_scale * math.log(c.sil_prob), c.transition_scale * math.log1p(-c.sil_prob))
        # blocks: (phone id, token position or -1-k, optional?)
        blocks: list[tuple[int, int, bool]] = []
        nsil = 0
        for i, tok in enumerate(tokens):
            pid = self.phone_id[tok]
            boundary = i == 0 or (words is not None and words[i] != words[i - 1])
            if sil is not None and boundary and not (equal_path and i > 0):
                blocks.append((sil, -1 - nsil, not equal_path))
                nsil += 1
            blocks.append((pid, i, False))
        if sil is not None:
            blocks.append((sil, -1 - nsil, not equal_path))
        S = int(sum(self.num_states[b[0]] for b in blocks))
        pdf = np.zeros(S, dtype=np.int64)
        token = np.zeros(S, dtype=np.int64)
        label = np.zeros(S, dtype=np.int64)
        hst = np.zeros(S, dtype=np.int64)
        pred = np.full((S, MAX_PRED), -1, dtype=np.int64)
        ltr = np.full((S, MAX_PRED), NEG_INF)
        init = np.full(S, NEG_INF)
        final = np.full(S, NEG_INF)
        j = 0
        prev_last = -1  # last state of the previous block
        prev_exit = 0.0  # log weight of leaving the previous block
        skip_src, skip_w = -1, NEG_INF  # state before an optional block, and its weight to bypass it
        for bi, (pid, tpos, optional) in enumerate(blocks):
            n = int(self.num_states[pid])
            idx = np.arange(j, j + n)
            if self.ctx_pdf is None:
                pdf[idx] = self.pdf_offset[pid] + np.arange(n)
            else:
                E = len(self.phones)
                left = self.phone_id[tokens[tpos - 1]] if tpos > 0 else E  # optional silence: (E, E)
                right = self.phone_id[tokens[tpos + 1]] if 0 <= tpos < len(tokens) - 1 else E
                pdf[idx] = self.ctx_pdf[left, pid, right, :n]
            token[idx], label[idx], hst[idx] = tpos, pid, np.arange(n)
            pred[idx, 0] = idx
            ltr[idx, 0] = lt[pid, :n, 0]
            pred[idx[1:], 1] = idx[:-1]
            ltr[idx[1:], 1] = lt[pid, :n - 1, 1]
            if n > 2:
                pred[idx[2:], 2] = idx[:-2]
                ltr[idx[2:], 2] = lt[pid, :n - 2, 2]
            w_in = lsil if optional else 0.0
            if prev_last < 0:
                init[j] = w_in
            else:
                pred[j, 1] = prev_last
                ltr[j, 1] = prev_exit + w_in
            if skip_src >= 0 and not optional:
                pred[j, 3] = skip_src
                ltr[j, 3] = skip_w
            elif skip_src == -2 and not optional:  # bypassed an optional block at the very start
                init[j] = lnosil
            exit_w = lt[pid, n - 1, 1]
            if optional:
                # the next block may be reached from before this block, bypassing it
                if prev_last >= 0:
                    skip_src, skip_w = prev_last, prev_exit + lnosil
                else:
                    skip_src = -2
            else:
                skip_src, skip_w = -1, NEG_INF
            prev_last, prev_exit = j + n - 1, exit_w
            j += n
        final[prev_last] = prev_exit
        if skip_src >= 0:  # the last block is optional: ending without it
            final[skip_src] = skip_w
        return AlignGraph(pdf, token, label, hst, pred, ltr, init, final)

    # ------------------------------------------------------------------ alignment
    def _emissions(self, graphs: list[AlignGraph], feats: list[np.ndarray], scale: float | None = None
                   ) -> list[np.ndarray]:
        """Scaled log-likelihoods ``(T_u, S_u)`` of each utterance's frames in its graph's states
        (only the pdfs of the utterance are evaluated)."""
        if self.mlp is not None:
            return [self.config.mlp_acoustic_scale * self.mlp.log_likelihood(f)[:, g.pdf].astype(np.float64)
                    for g, f in zip(graphs, feats)]
        scale = self.config.acoustic_scale if scale is None else scale
        out = []
        for g, f in zip(graphs, feats):
            pdfs, inverse = np.unique(g.pdf, return_inverse=True)
            ll = self.gmm.log_likelihood(f, pdfs)
            out.append(scale * ll[:, inverse].astype(np.float64))
        return out

    def viterbi(self, graphs: list[AlignGraph], feats: list[np.ndarray], nj: int = 1
                ) -> list[tuple[float, np.ndarray]]:
        """Best state path of each utterance (batched by about ``chunk_frames`` frames, length-sorted).

        Returns:
            Per utterance ``(log-likelihood of the path's frames (unscaled), path)``; ``-inf`` and
            a ``-1`` path when no path fits.
        """
        chunks = self._chunks(feats)
        res = _pmap(_viterbi_worker, [(self, [graphs[i] for i in ch], [feats[i] for i in ch]) for ch in chunks], nj)
        out: list = [None] * len(graphs)
        for ch, r in zip(chunks, res):
            for i, v in zip(ch, r):
                out[i] = v
        return out

    def forward_backward(self, graphs: list[AlignGraph], feats: list[np.ndarray], nj: int = 1,
                         scale: float | None = None) -> list:
        """Forward-backward of each utterance (see :func:`~speechkit.align.hmm.forward_backward_batch`),
        emissions scaled by ``scale`` (default ``train_acoustic_scale``); batched as :meth:`viterbi`."""
        scale = self.config.train_acoustic_scale if scale is None else scale
        chunks = self._chunks(feats)
        res = _pmap(_fb_worker, [(self, [graphs[i] for i in ch], [feats[i] for i in ch], scale) for ch in chunks], nj)
        out: list = [None] * len(graphs)
        for ch, r in zip(chunks, res):
            for i, v in zip(ch, r):
                out[i] = v
        return out

    def _chunks(self, feats: list[np.ndarray]) -> list[list[int]]:
        order = sorted(range(len(feats)), key=lambda i: len(feats[i]))
        chunks, cur, nfr = [], [], 0
        for i in order:
            cur.append(i)
            nfr += len(feats[i])
            if nfr >= self.config.chunk_frames:
                chunks.append(cur)
                cur, nfr = [], 0
        if cur:
            chunks.append(cur)
        return chunks

    def align_features(self, feats: dict[str, np.ndarray], tokens: dict[str, list[str]],
                       words: dict[str, list[int]] | None = None, durations: dict[str, float] | None = None,
                       nj: int = 1, utt2spk: dict[str, str] | None = None) -> AlignResult:
        """Align utterances given their features (already normalised) and tokens.

        Args:
            feats: utt -> ``(T, D)`` features from :func:`compute_features`.
            tokens: utt -> phone symbols.
            words: utt -> word index per token (optional silence between words).
            durations: utt -> audio duration in seconds (end of the last segment); default
                ``T * frame_shift``.
            nj: parallel processes.
            utt2spk: utt -> speaker, for the per-speaker fMLLR of a speaker-adaptively trained
                model (default: each utterance its own speaker).

        Returns:
            :class:`AlignResult`; utterances with an empty token list, unknown tokens or too few
            frames are in ``unaligned``.
        """
        unaligned: dict[str, str] = {}
        graphs, keys = [], []
        lt = self._scaled_trans()
        for u in sorted(feats):
            toks = tokens.get(u, [])
            if not toks:
                unaligned[u] = "empty text"
                continue
            unknown = sorted({t for t in toks if t not in self.phone_id})
            if unknown:
                unaligned[u] = "unknown tokens: " + " ".join(unknown[:10])
                continue
            g = self.make_graph(toks, None if words is None else words.get(u), _lt=lt)
            need = g.min_frames()
            if len(feats[u]) < need:
                unaligned[u] = f"too few frames: {len(feats[u])} frames for {len(toks)} tokens (needs {need})"
                continue
            graphs.append(g)
            keys.append(u)
        F = [self.model_features(feats[u]) for u in keys]
        if self.config.sat_iters > 0:
            F = self._speaker_adapt(graphs, F, [utt2spk.get(u, u) if utt2spk else u for u in keys], nj)
        res = self.viterbi(graphs, F, nj=nj)
        out: dict[str, list[tuple[float, float, str]]] = {}
        lls: dict[str, float] = {}
        for u, g, (score, path) in zip(keys, graphs, res):
            if not np.isfinite(score):
                unaligned[u] = "no alignment (no path through the graph)"
                continue
            dur = durations[u] if durations and u in durations else len(path) * self.config.frame_shift
            out[u] = self._segments(g, path, dur, tokens[u])
            lls[u] = score
        return AlignResult(out, unaligned, lls)

    def _segments(self, g: AlignGraph, path: np.ndarray, duration: float, toks: list[str]
                  ) -> list[tuple[float, float, str]]:
        tok = g.token[path]
        change = np.nonzero(np.diff(tok))[0] + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change, [len(path)]])
        fs = self.config.frame_shift
        segs = []
        for a, b in zip(starts, ends):
            t0 = 0.0 if a == 0 else (a - 0.5) * fs
            t1 = duration if b == len(path) else (b - 0.5) * fs
            k = int(tok[a])
            segs.append((t0, t1, toks[k] if k >= 0 else SIL))
        return segs

    def align(self, data_dir: str | os.PathLike, nj: int = 1) -> AlignResult:
        """Align every utterance of a data directory (``wav.scp``, ``text``, optional ``segments``,
        ``phone_info``).

        Raises:
            FileNotFoundError: missing data dir, ``text`` or ``wav.scp``.
            DataError: malformed tables or ``phone_info`` (names file and line).
        """
        d, tokens, words = _read_inputs(data_dir)
        feats, durs, failed = compute_features(d, d.utts, self.config, nj)
        res = self.align_features(feats, tokens, words if self.config.optional_silence else None, durs, nj,
                                  utt2spk=d.utt2spk)
        res.unaligned.update(failed)
        res.unaligned = dict(sorted(res.unaligned.items()))
        return res

    def _speaker_adapt(self, graphs: list[AlignGraph], F: list[np.ndarray], spk: list[str], nj: int,
                       rounds: int = 2) -> list[np.ndarray]:
        """Per-speaker fMLLR of the features ``F`` for this (speaker-adaptively trained) model, as
        Kaldi's ``align_fmllr.sh``: align, estimate each speaker's transform from the alignment,
        transform, ``rounds`` times. Returns the transformed features."""
        W: dict[str, np.ndarray] = {}
        Ft = F
        for _ in range(rounds):
            res = self.viterbi(graphs, Ft, nj=nj)
            ok = [i for i, (sc, _) in enumerate(res) if np.isfinite(sc)]
            W = _estimate_speaker_fmllr(self, [graphs[i] for i in ok], [F[i] for i in ok], [Ft[i] for i in ok],
                                        [res[i][1] for i in ok], [spk[i] for i in ok], W)
            Ft = [_apply_fmllr(W.get(s), f) for s, f in zip(spk, F)]
        return Ft

    # ------------------------------------------------------------------ persistence
    def save(self, exp_dir: str | os.PathLike) -> Path | None:
        """Write ``final.mdl`` (npz), ``phones.txt`` (``<phone> <id>``) and ``config.yaml``.

        A model never replaces another without a backup: the files of an earlier model in
        ``exp_dir`` (:data:`MODEL_FILES`) and the alignments made with it (``phone_alignments``,
        ``unaligned``) are moved to ``exp_dir/.backup/N/`` (a new N each time) just before the new
        files take their names. The new files are first written in full under temporary names, then
        renamed into place, ``final.mdl`` last: a failed or killed save leaves the earlier model as it
        was, or (killed between the backup and the last rename) no ``final.mdl``; never a new model
        beside an earlier model's files or alignments.

        Returns:
            The backup directory, or ``None`` when ``exp_dir`` held none of those files.
        """
        exp_dir = Path(exp_dir)
        exp_dir.mkdir(parents=True, exist_ok=True)
        meta = {"version": MODEL_VERSION, "phones": self.phones}
        # atomic_write renames each file onto its name when its block exits: the stack exits in
        # reverse, so config.yaml and phones.txt take their names before final.mdl
        with contextlib.ExitStack() as stack:
            f = stack.enter_context(atomic_write(exp_dir / MODEL_FILE, "wb"))
            extra = self.mlp.arrays() if self.mlp is not None else {}
            if self.transform is not None:
                extra["transform"] = self.transform
            if self.ctx_pdf is not None:
                extra["ctx_pdf"] = self.ctx_pdf.astype(np.int32)
            np.savez(f, means=self.gmm.means, vars=self.gmm.vars, log_weights=self.gmm.log_weights,
                     trans=self.trans, meta=np.array(json.dumps(meta)), **extra)
            f = stack.enter_context(atomic_write(exp_dir / PHONES_FILE))
            for i, p in enumerate(self.phones):
                f.write(f"{p} {i}\n")
            f = stack.enter_context(atomic_write(exp_dir / CONFIG_FILE))
            yaml.safe_dump(to_dict(self.config), f, sort_keys=False, default_flow_style=False, allow_unicode=True)
            # everything written: the earlier model and its outputs go to a backup, then the renames
            return backup_files(exp_dir, (*MODEL_FILES, ALIGNMENTS_FILE, UNALIGNED_FILE), move=True)

    @classmethod
    def load(cls, model_dir: str | os.PathLike) -> "Aligner":
        """Load an aligner saved by :meth:`save` / :func:`train_aligner`.

        Raises:
            FileNotFoundError: ``final.mdl`` or ``config.yaml`` missing.
            ConfigError: a malformed ``config.yaml`` (names the file and key).
            DataError: a ``final.mdl`` that is truncated, corrupt, of another version, or whose
                arrays (GMMs, transitions, tree, transforms) disagree with each other or with
                ``config.yaml``; the message names the file and the array.
        """
        model_dir = Path(model_dir)
        mdl = model_dir / MODEL_FILE
        if not mdl.is_file():
            raise FileNotFoundError(f"{mdl}: no such file (train an aligner into {model_dir} first)")
        config = load_config(AlignerConfig, model_dir / CONFIG_FILE)
        z = _read_model_file(mdl)
        try:
            meta = json.loads(str(z["meta"]))
        except (KeyError, ValueError) as e:
            raise DataError(f"{mdl}: not a speechkit aligner model (no readable 'meta': {e})") from None
        if not isinstance(meta, dict) or meta.get("version") != MODEL_VERSION:
            version = meta.get("version") if isinstance(meta, dict) else None
            raise DataError(f"{mdl}: model version {version} (expected {MODEL_VERSION})")
        phones = meta.get("phones")
        if not isinstance(phones, list) or not phones or \
                not all(isinstance(p, str) and p.split() == [p] for p in phones):
            raise DataError(f"{mdl}: 'phones' must be a non-empty list of phone symbols, got {phones!r:.80}")
        if len(set(phones)) != len(phones):
            raise DataError(f"{mdl}: 'phones' lists a phone twice")
        for key in ("means", "vars", "log_weights", "trans"):
            if key not in z:
                raise DataError(f"{mdl}: not a speechkit aligner model (no array '{key}')")
            if not np.issubdtype(z[key].dtype, np.floating):
                raise DataError(f"{mdl}: '{key}' holds {z[key].dtype} values, expected floats")
        try:
            gmm = DiagGmmSet(z["means"], z["vars"], z["log_weights"])
        except ValueError as e:
            raise DataError(f"{mdl}: {e}") from None
        al = cls(config, phones, gmm, z["trans"])
        ctx_pdf = z.get("ctx_pdf")
        if ctx_pdf is not None:
            N, S = len(phones), int(al.num_states.max())
            if not np.issubdtype(ctx_pdf.dtype, np.integer) or ctx_pdf.shape != (N + 1, N, N + 1, S) \
                    or ctx_pdf.min() < 0:
                raise DataError(f"{mdl}: 'ctx_pdf' (the triphone tree) must be non-negative integers of shape "
                                f"{(N + 1, N, N + 1, S)} for {N} phones, got {ctx_pdf.dtype} {ctx_pdf.shape}")
            ctx_pdf = ctx_pdf.astype(np.int64)
        al.set_tree(ctx_pdf)
        if gmm.num_pdfs != al.num_pdfs:
            raise DataError(f"{mdl}: {gmm.num_pdfs} GMMs but the topology has {al.num_pdfs} states")
        used = np.isfinite(gmm.log_weights)
        if not used.any(1).all() or not np.isfinite(gmm.means[used]).all() or \
                not (np.isfinite(gmm.vars[used]) & (gmm.vars[used] > 0)).all():
            raise DataError(f"{mdl}: the GMMs hold a pdf without components, non-finite means or "
                            "non-positive variances")
        shape = (len(phones), int(al.num_states.max()), 3)
        if al.trans.shape != shape or not ((al.trans >= 0) & (al.trans <= 1)).all():
            raise DataError(f"{mdl}: 'trans' must be probabilities of shape {shape}, got {al.trans.shape}")
        transform = z.get("transform")
        if transform is not None:
            cols = config.n_mfcc * (2 * config.lda_context + 1)
            if transform.ndim != 2 or transform.shape != (gmm.dim, cols) or not np.isfinite(transform).all():
                raise DataError(f"{mdl}: 'transform' (LDA+MLLT) must be finite of shape {(gmm.dim, cols)} "
                                f"(GMM dimension, n_mfcc x (2 lda_context + 1) of {model_dir / CONFIG_FILE}), "
                                f"got {transform.shape}")
        elif gmm.dim != 3 * config.n_mfcc:
            raise DataError(f"{mdl}: GMMs of dimension {gmm.dim}, but {model_dir / CONFIG_FILE} gives "
                            f"n_mfcc {config.n_mfcc} (features of dimension {3 * config.n_mfcc})")
        al.transform = transform
        if "mlp_log_prior" in z:
            try:
                al.mlp = FrameClassifier.from_arrays(z)
            except KeyError as e:
                raise DataError(f"{mdl}: incomplete frame classifier (no array {e})") from None
            except (ValueError, TypeError) as e:
                raise DataError(f"{mdl}: malformed frame classifier ({e})") from None
            dims = [w.shape for w, _ in al.mlp.layers]
            want_in = gmm.dim * (2 * al.mlp.context + 1)
            if not dims or any(len(d) != 2 for d in dims) or dims[0][0] != want_in or dims[-1][1] != al.num_pdfs \
                    or any(a[1] != b[0] for a, b in zip(dims, dims[1:])) \
                    or any(b.shape != (w.shape[1],) for w, b in al.mlp.layers) \
                    or al.mlp.log_prior.shape != (al.num_pdfs,):
                raise DataError(f"{mdl}: the frame classifier's layers {dims} do not map {want_in} inputs to "
                                f"{al.num_pdfs} pdfs")
        return al


def _read_model_file(mdl: Path) -> dict[str, np.ndarray]:
    """Every array of an aligner's ``final.mdl`` (an npz archive).

    Raises:
        DataError: an empty file, not an npz archive, or a truncated/corrupt one (names the file).
        OSError: the file cannot be read (permissions).
    """
    with open(mdl, "rb") as f:
        head = f.read(4)
    if head != b"PK\x03\x04":
        what = "an empty file" if not head else "not an npz archive"
        raise DataError(f"{mdl}: not a speechkit aligner model ({what}); train the aligner again")
    try:
        with np.load(mdl, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(f"{mdl}: truncated or corrupt aligner model ({type(e).__name__}: {e}); "
                        f"train the aligner again") from None


def _viterbi_worker(args):
    aligner, graphs, feats = args
    em = aligner._emissions(graphs, feats)
    res = viterbi_batch(graphs, em)
    # report the unscaled log-likelihood per frame of the path
    out = []
    for g, e, (score, path) in zip(graphs, em, res):
        if np.isfinite(score):
            ac = float(e[np.arange(len(path)), path].sum()) / aligner.config.acoustic_scale
            out.append((ac / len(path), path))
        else:
            out.append((score, path))
    return out


def _fb_worker(args):
    aligner, graphs, feats, scale = args
    em = aligner._emissions(graphs, feats, scale=scale)
    return forward_backward_batch(graphs, em)


def _estimate_speaker_fmllr(al: Aligner, graphs: list[AlignGraph], F: list[np.ndarray], Ft: list[np.ndarray],
                            paths: list[np.ndarray], spk: list[str], init: dict[str, np.ndarray]
                            ) -> dict[str, np.ndarray]:
    """fMLLR ``(D, D + 1)`` of each speaker from the state ``paths``: Gaussian posteriors from the
    model on the current features ``Ft``, statistics on the untransformed ``F``
    (:func:`estimate_fmllr`). A speaker with fewer than ``fmllr_min_frames`` frames keeps ``init``."""
    c = al.config
    out = dict(init)
    by_spk: dict[str, list[int]] = {}
    for i, s in enumerate(spk):
        by_spk.setdefault(s, []).append(i)
    gm = al.gmm
    for s, idx in by_spk.items():
        x = np.concatenate([F[i] for i in idx]).astype(np.float64)
        xt = np.concatenate([Ft[i] for i in idx]).astype(np.float64)
        if len(x) < c.fmllr_min_frames:
            continue
        pdf = np.concatenate([graphs[i].pdf[paths[i]] for i in idx])
        D = x.shape[1]
        xi = np.hstack([x, np.ones((len(x), 1))])
        a = np.zeros((len(x), D))  # sum_m gamma_tm / var_m
        b = np.zeros((len(x), D))  # sum_m gamma_tm mu_m / var_m
        for p in np.unique(pdf):
            rows = np.nonzero(pdf == p)[0]
            lc = gm.component_log_likelihood(xt[rows], int(p))
            g = np.exp(lc - np.max(lc, 1, keepdims=True))
            g /= g.sum(1, keepdims=True)
            used = np.isfinite(gm.log_weights[p])
            g = g[:, used]
            a[rows] = g @ (1.0 / gm.vars[p, used])
            b[rows] = g @ (gm.means[p, used] / gm.vars[p, used])
        K = b.T @ xi
        G = np.einsum("ti,tj,tk->ijk", a, xi, xi, optimize=True)
        out[s] = estimate_fmllr(float(len(x)), K, G, num_iters=c.fmllr_update_iters, init=out.get(s))
    return out
