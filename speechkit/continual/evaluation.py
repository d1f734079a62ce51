"""Per-episode evaluation of a continual speaker-adaptation run (Hemati & Borth 2021, sections 2.3, 4).

After episode ``l`` of a ``speechkit-train-continual`` run (``EXP``), for ``l = 1..L``:

1. the speaker verifier (:class:`~speechkit.scoring.speaker_verification.SpeakerVerifier`) is
   retrained on the ground-truth utterances of every speaker seen so far -- the continual speakers
   of episodes ``1..l`` plus the ``extra_speakers`` the model was pre-trained on, which keep
   episode 1 from being a one-class problem (the extra classes are this toolkit's; the paper's
   verifier knows the continual speakers seen so far only, sec. 2.3) -- those utterances first
   passed through the vocoder the TTS uses (WORLD analysis-synthesis, or Griffin-Lim from the log-mel for tacotron2:
   ``speechkit-vocode``), then embedded with the GE2E
   encoder (``speechkit-embed-speakers``); its accuracy on held-out vocoded ground truth of the
   same speakers is recorded;
2. ``num_utts`` test sentences of each seen continual speaker are synthesized with episode
   ``l``'s model in that speaker's voice (salad / musa_rnn: forced durations from the test dir's
   ``labels.scp``, WORLD synthesis; tacotron2: the phones of the test dir's ``text``, the stop
   token, Griffin-Lim from the log-mel with the model's ``feats.yaml``), embedded, and
   classified: ``a_{l,i}`` = the fraction assigned to speaker ``i``;
3. after the last episode, the accuracy matrix gives retained accuracy RA (eq. 1) and forgetting
   FG (eq. 2, its maximum taken over the episodes since the speaker was seen: see
   :func:`~speechkit.scoring.speaker_verification.forgetting`) per episode.

Files (``EVAL = EXP/eval``, or the ``eval_dir`` given: e.g. ``EXP/eval_dev`` for the dev utterances)::

    EVAL/episode_<tt>.json     verifier classes and held-out accuracy, a_{l,i} per seen speaker,
                               each synthesized utterance's prediction, and ``inputs``: a content
                               digest of everything the result depends on (written last per episode)
    EVAL/episode_<tt>.npz      the synthesized utterances' embeddings (keys, speakers, embeddings)
    EVAL/wav/episode_<tt>/     the first synthesized utterance of every seen speaker
    EVAL/scores.json           order, accuracy matrix, RA/FG per episode, verifier accuracies
    EVAL/confusion_matrix.png  true vs verified speaker of the last episode's syntheses (Figure 4a)
    EVAL/embeddings_2d.png     PCA map of ground-truth and synthesized embeddings, last episode
                               (Figure 4b, which uses t-SNE)
    EVAL/accuracy_matrix.png   a_{l,i} as a heat map

A finished episode's result is reused only when every input it was computed from has the same
content (:mod:`speechkit.data.fingerprint`: bytes of the tables and of the arks they point to, not
paths or times): the episode's model (episode.json, the checkpoint loaded, its feats.yaml and
speakers, the speaker vectors its config names), the test dir's labels (or phones) and utt2spk,
the ``gt_train`` / ``gt_test`` embeddings and utt2spk, the GE2E encoder's weights and the options
(``num_utts``, ``wavs_per_speaker``, ``min_speech``, the verifier's classes and settings, the
synthesis settings). Otherwise it is evaluated again, with a log line naming what changed.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from speechkit.data.fingerprint import (DataInput, content_digest, fingerprint_file, fingerprint_input,
                                        fingerprint_inputs)
from speechkit.data.speakers import load_embeddings
from speechkit.decode.audio_out import write_synthesized
from speechkit.features.io import ScpReader
from speechkit.inference.text2speech import Synthesizer
from speechkit.scoring.continual_plots import plot_confusion_matrix, plot_embeddings_2d
from speechkit.scoring.speaker_verification import SpeakerVerifier, accuracy_matrix, continual_scores
from speechkit.train.checkpoint import load_checkpoint, resolve_checkpoint
from speechkit.utils.fileio import DataError, atomic_write, id_file, read_table
from speechkit.utils.jsonio import read_json, read_json_cache
from speechkit.utils.outputs import replace_dir

# models.speaker_encoder, tasks.tacotron2 and continual.driver (torch) and matplotlib (the accuracy plot) are imported
# where used: the module and the CLI's --help import without them.

__all__ = ["EvalConfig", "evaluate_continual", "GroundTruth"]

log = logging.getLogger(__name__)


def _c_sorted(xs) -> list[str]:
    return sorted(xs, key=lambda s: s.encode("utf-8"))


@dataclass
class EvalConfig:
    """Options of :func:`evaluate_continual`.

    Attributes:
        num_utts: test sentences synthesized per seen speaker and episode (paper: 5, sec. 2.3).
        extra_speakers: speakers always among the verifier's classes (the pre-training speakers).
        wavs_per_speaker: synthesized waveforms kept per seen speaker and episode (for listening).
        plots: write the PNGs of the last episode.
        min_speech: the speaker encoder's minimum speech (s) per utterance; shorter ones are skipped and counted.
    """

    num_utts: int = 5
    extra_speakers: Sequence[str] = ()
    wavs_per_speaker: int = 1
    plots: bool = True
    min_speech: float = 0.5


class GroundTruth:
    """Embeddings of vocoded ground-truth utterances with their speakers (an embed-speakers out dir).

    Args:
        embed_dir: dir with ``embeddings.scp`` and ``utt2spk`` (``speechkit-embed-speakers``).

    Raises:
        FileNotFoundError: either file is missing.
        DataError: an embedding without a speaker in utt2spk (named).
    """

    def __init__(self, embed_dir: str | os.PathLike):
        d = Path(embed_dir)
        for f in ("embeddings.scp", "utt2spk"):
            if not (d / f).is_file():
                raise FileNotFoundError(f"{d / f}: no such file (run speechkit-embed-speakers on the vocoded "
                                        f"ground truth)")
        emb = load_embeddings(d / "embeddings.scp")
        u2s = read_table(d / "utt2spk")
        missing = [u for u in emb if u not in u2s]
        if missing:
            raise DataError(f"{d / 'utt2spk'}: no speaker for {len(missing)} embedded utterances, e.g. '{missing[0]}'")
        self.dir = d
        self.utts = _c_sorted(emb)
        self.speakers = np.array([u2s[u] for u in self.utts])
        self.x = np.stack([emb[u] for u in self.utts]) if self.utts else np.zeros((0, 256), np.float32)

    def select(self, speakers: Sequence[str], what: str) -> tuple[np.ndarray, np.ndarray]:
        """``(embeddings (N, 256), speakers (N,))`` of the given speakers.

        Raises:
            DataError: a speaker with no utterance here (named).
        """
        keep = np.isin(self.speakers, list(speakers))
        have = set(self.speakers[keep].tolist())
        lost = [s for s in speakers if s not in have]
        if lost:
            raise DataError(f"{self.dir}: no {what} utterance of speaker(s) {', '.join(lost)}")
        return self.x[keep], self.speakers[keep]


def _episode_checkpoint(ep_dir: Path) -> Path | None:
    """The checkpoint an episode's model is loaded from: best.pt, else the latest (None: none)."""
    try:
        return resolve_checkpoint(ep_dir)
    except FileNotFoundError:
        return None


def _model_digest(ep_dir: Path) -> str:
    """Content digest of what an episode's syntheses depend on: its episode.json, the checkpoint
    loaded, the model dir's feats.yaml and speakers, and the speaker vectors its config names."""
    inputs = {"dir": DataInput(str(ep_dir), ("episode.json", "feats.yaml", "speakers"))}
    ckpt = _episode_checkpoint(ep_dir)
    if ckpt is not None:
        inputs["checkpoint"] = DataInput(str(ckpt))
        scp = (load_checkpoint(ckpt).get("config") or {}).get("data", {}).get("speaker_embeddings")
        if scp:
            inputs["speaker_embeddings"] = DataInput(str(scp))
    return content_digest(fingerprint_inputs(inputs))


def _encoder_digest() -> str | None:
    """SHA-256 of the GE2E encoder's weights file (None when resemblyzer is not installed)."""
    from speechkit.models.speaker_encoder import weights_path

    try:
        fp = fingerprint_file(weights_path())
    except ImportError:
        return None
    return None if fp is None else fp["sha256"]


def _eval_inputs(model: str, test: str, gt_train: str, gt_test: str, encoder: str | None, cfg: "EvalConfig",
                 classes: list[str]) -> dict[str, str | None]:
    """The cache key of one episode's result: a digest per input it depends on, named for the log."""
    verifier = SpeakerVerifier()
    options = {"num_utts": cfg.num_utts, "wavs_per_speaker": cfg.wavs_per_speaker, "min_speech": cfg.min_speech,
               "classes": classes, "verifier": {k: getattr(verifier, k, None) for k in
                                                ("C", "max_iter", "standardize", "balanced", "seed")},
               "synthesis": {k: getattr(_Synthesizer, k, None) for k in ("max_frames_per_phone", "griffin_lim_iters")}}
    return {"the episode's model": model, "--test-dir": test, "--gt-train": gt_train,
            "--gt-test": gt_test, "the speaker encoder's weights": encoder,
            "the evaluation options": hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()}


def _episodes(exp: Path) -> tuple[list[str], list[tuple[int, str, Path]]]:
    """The run's speaker order (plan.json) and its finished episodes ``(t, speaker, dir)``."""
    plan_path = exp / "plan.json"
    if not plan_path.is_file():
        raise FileNotFoundError(f"{plan_path}: no such file (not a speechkit-train-continual exp dir)")
    plan = read_json(plan_path, expect=dict)  # not JSON: an error naming the file and line
    order = list(plan["order"])
    done = []
    for t, spk in enumerate(order, 1):
        from speechkit.continual.driver import episode_dir_name

        d = exp / episode_dir_name(t, spk)
        if not (d / "episode.json").is_file():
            break
        done.append((t, spk, d))
    if not done:
        raise FileNotFoundError(f"{exp}: no finished episode (episode_01_*/episode.json)")
    return order, done


def _test_utterances(test_dir: Path, speakers: Sequence[str], num_utts: int, source: str = "labels.scp"
                     ) -> dict[str, list[str]]:
    """The first ``num_utts`` (C order) test utterances with an entry in ``source`` (``labels.scp``;
    tacotron2: the phone file ``text``) of each speaker."""
    for f in (source, "utt2spk"):
        if not (test_dir / f).is_file():
            raise FileNotFoundError(f"{test_dir / f}: no such file (the continual speakers' test labels)")
    labelled = {u for u, v in read_table(test_dir / source, allow_empty_value=True).items() if v.strip()}
    by_spk: dict[str, list[str]] = {}
    for u, s in read_table(test_dir / "utt2spk").items():
        if u in labelled:
            by_spk.setdefault(s, []).append(u)
    out = {}
    for s in speakers:
        utts = _c_sorted(by_spk.get(s, []))
        if not utts:
            raise DataError(f"{test_dir}: speaker '{s}' has no test utterance with labels")
        if len(utts) < num_utts:
            log.warning("%s: speaker '%s' has %d test utterances, fewer than %d: using %d", test_dir, s,
                        len(utts), num_utts, len(utts))
        out[s] = utts[:num_utts]
    return out


def _synthesis_input(ep_dir: Path) -> str:
    """What an episode model synthesizes from: ``"phones"`` (the test dir's ``text``) for a
    tacotron2 checkpoint, ``"labels"`` (``labels.scp``) otherwise or when it has no checkpoint."""
    path = _episode_checkpoint(ep_dir)
    if path is None:
        return "labels"
    return "phones" if load_checkpoint(path).get("task") == "tacotron2" else "labels"


class _Synthesizer(Synthesizer):
    """One episode model: its input + a speaker -> waveform at :attr:`sr` Hz, peak at most 0.99.

    The :class:`~speechkit.inference.text2speech.Synthesizer` of the episode dir (best.pt, else the
    latest checkpoint), required to be speaker-conditioned and to have its vocoder config:

    - salad / musa_rnn: ``(T, D)`` label vectors (forced durations) -> WORLD features -> WORLD synthesis.
    - tacotron2: a phone list -> :func:`~speechkit.tasks.tacotron2.synthesize` (stop token, at most
      ``max_frames_per_phone`` frames per phone + 20) -> natural-log mel ->
      :func:`~speechkit.decode.griffin_lim.mel_to_waveform` (Griffin-Lim, ``griffin_lim_iters``
      iterations) with the model's ``feats.yaml`` (``logmel``); phones outside the model's
      vocabulary become ``<unk>`` as in training (warned); a single frame is repeated once
      (``hop_length`` samples, warned; the speaker encoder then skips and counts the utterance).

    Raises:
        DataError: the model is not speaker-conditioned; (at call) a speaker it was never trained on.
        FileNotFoundError: no feats.yaml (WORLD or log-mel config) to vocode with.
        ValueError: a tacotron2 model whose feats.yaml is not a ``logmel`` front end.
    """

    def __init__(self, ep_dir: Path):
        super().__init__(ep_dir)
        if not self.conditioned:
            raise DataError(f"{ep_dir}: the model is not speaker-conditioned (no data.speaker_embeddings)")
        _ = self.vectors, self.speakers  # read now: an unreadable scp or speaker list fails here, not at the first call
        self.require_vocoder()


def evaluate_continual(exp_dir: str | os.PathLike, test_dir: str | os.PathLike, gt_train: str | os.PathLike,
                       gt_test: str | os.PathLike, cfg: EvalConfig | None = None,
                       eval_dir: str | os.PathLike | None = None) -> dict:
    """Evaluate every finished episode of ``exp_dir`` (see the module docstring); resumable.

    Args:
        exp_dir: a ``speechkit-train-continual`` exp dir.
        test_dir: labels.scp (forced durations; tacotron2: the phones in ``text``) + utt2spk of the
            continual speakers' test utterances.
        gt_train: embed dir of the vocoded ground-truth utterances the verifier is trained on.
        gt_test: embed dir of held-out vocoded ground truth (the verifier's accuracy; the ground-truth
            points of the embedding map).
        cfg: options.
        eval_dir: where the results go (default ``exp_dir/eval``); scoring other sentences (the dev
            utterances) into another dir keeps the test results as they are.

    Returns:
        The content of ``EVAL/scores.json``: ``order`` (evaluated episodes' speakers),
        ``accuracy_matrix``, ``retained_accuracy``, ``forgetting`` (per episode, fractions),
        ``final_ra``, ``final_fg``, ``verifier_accuracy`` (per episode), ``skipped`` (synthesized
        utterances too short for the encoder).

    Raises:
        FileNotFoundError: missing inputs (named).
        DataError: a seen speaker without test labels or ground truth, a speaker the episode's
            model was never trained on (named).
        ValueError: ``num_utts`` < 1, ``wavs_per_speaker`` or ``min_speech`` < 0.
    """
    from speechkit.models.speaker_encoder import SpeakerEncoder

    cfg = cfg or EvalConfig()
    if cfg.num_utts < 1:
        raise ValueError(f"num_utts must be >= 1, got {cfg.num_utts}")
    if cfg.wavs_per_speaker < 0:
        raise ValueError(f"wavs_per_speaker must be >= 0, got {cfg.wavs_per_speaker}")
    if not cfg.min_speech >= 0:
        raise ValueError(f"min_speech must be >= 0, got {cfg.min_speech}")
    exp, test_dir = Path(exp_dir), Path(test_dir)
    out = Path(eval_dir) if eval_dir is not None else exp / "eval"
    order, done = _episodes(exp)
    extra = [s for s in cfg.extra_speakers if s not in order]
    train_gt, test_gt = GroundTruth(gt_train), GroundTruth(gt_test)
    source = "text" if _synthesis_input(done[0][2]) == "phones" else "labels.scp"
    if source == "text":  # tacotron2: phones of the test dir's text
        from speechkit.tasks.tacotron2 import read_phone_table

        test_utts = _test_utterances(test_dir, [s for _, s, _ in done], cfg.num_utts, source="text")
        phones = read_phone_table(test_dir / "text")

        def synth_input(u: str):
            return phones[u]
    else:
        test_utts = _test_utterances(test_dir, [s for _, s, _ in done], cfg.num_utts)
        labels = ScpReader(test_dir / "labels.scp", what="label vectors")

        def synth_input(u: str):
            return np.asarray(labels.read(u), dtype=np.float32)
    encoder = None
    per_episode, verifier_acc, skipped_total = [], [], 0
    digests = {name: content_digest(fingerprint_input(DataInput(str(d), tables))) for name, d, tables in (
        ("test", test_dir, (source, "utt2spk")), ("gt_train", gt_train, ("embeddings.scp", "utt2spk")),
        ("gt_test", gt_test, ("embeddings.scp", "utt2spk")))}
    encoder_digest = _encoder_digest()
    for t, spk, ep_dir in done:
        seen = order[:t]
        res_path = out / f"episode_{t:02d}.json"
        inputs = _eval_inputs(_model_digest(ep_dir), digests["test"], digests["gt_train"], digests["gt_test"],
                              encoder_digest, cfg, extra + seen)
        res = read_json_cache(res_path)  # cut short (a killed run): None, with a warning naming it: evaluated again
        if res is not None:
            saved = res.get("inputs")
            if saved == inputs:
                per_episode.append(res["accuracy"])
                verifier_acc.append(res["verifier"]["held_out_accuracy"])
                skipped_total += len(res["skipped"])
                continue
            why = (", ".join(f"{k} changed" for k in inputs if saved.get(k) != inputs[k]) if isinstance(saved, dict)
                   else "its result records no fingerprint of its inputs (an older version)")
            log.info("%s: episode %d: evaluating again: %s since it was evaluated", exp, t, why)
        classes = extra + seen
        verifier = SpeakerVerifier().fit(*train_gt.select(classes, "ground-truth training"))
        x_ho, y_ho = test_gt.select(classes, "held-out ground-truth")
        ho_acc = verifier.accuracy(x_ho, y_ho)
        if encoder is None:
            encoder = SpeakerEncoder(min_speech=cfg.min_speech)
        synth = _Synthesizer(ep_dir)
        keys, spks, embs, skipped = [], [], [], []
        # the episode's wavs replace those of an earlier evaluation as a whole (a re-derivable cache)
        with replace_dir(out / "wav" / f"episode_{t:02d}", backup=False) as wav_dir:
            for s in seen:
                for j, u in enumerate(test_utts[s]):
                    wav = synth(synth_input(u), s)
                    if j < cfg.wavs_per_speaker:  # the samples embedded below: limited already
                        write_synthesized(id_file(wav_dir, f"{s}__{u}", ".wav", "speaker and utterance id"), wav,
                                          synth.sr, limit=False)
                    e = encoder.embed_batch([wav], synth.sr, [u])[0]
                    if e is None:
                        skipped.append(u)
                        continue
                    keys.append(u)
                    spks.append(s)
                    embs.append(e)
            if skipped:
                log.warning("episode %d: %d synthesized utterances too short for the speaker encoder, skipped: %s",
                            t, len(skipped), ", ".join(skipped[:5]))
            emb = np.stack(embs) if embs else np.zeros((0, 256), np.float32)
            pred = verifier.predict(emb) if len(emb) else np.array([], dtype=str)
            acc = {}
            for s in seen:
                m = np.asarray(spks) == s
                if not m.any():
                    raise DataError(f"episode {t}: every synthesized utterance of speaker '{s}' was too short "
                                    f"for the speaker encoder")
                acc[s] = float(np.mean(pred[m] == s))
        res = {"episode": t, "speaker": spk, "inputs": inputs, "num_utts": cfg.num_utts, "classes": classes,
               "verifier": {"held_out_accuracy": ho_acc, "held_out_utterances": int(len(y_ho)),
                            "training_utterances": int(np.isin(train_gt.speakers, classes).sum())},
               "accuracy": acc, "skipped": skipped,
               "utterances": [{"utt": k, "speaker": s, "predicted": str(p)} for k, s, p in zip(keys, spks, pred)]}
        out.mkdir(parents=True, exist_ok=True)
        with atomic_write(out / f"episode_{t:02d}.npz", "wb") as f:
            np.savez(f, keys=np.array(keys), speakers=np.array(spks), embeddings=emb)
        with atomic_write(res_path) as f:
            json.dump(res, f, indent=1)
        log.info("episode %d (%s): verifier %.1f %% on %d held-out utterances; a_%d = %s", t, spk, 100 * ho_acc,
                 len(y_ho), t, " ".join(f"{s}:{100 * a:.0f}%" for s, a in acc.items()))
        per_episode.append(acc)
        verifier_acc.append(ho_acc)
        skipped_total += len(skipped)

    evaluated = order[:len(done)]
    A = accuracy_matrix(per_episode, evaluated)
    scores = continual_scores(A, evaluated)
    scores.update({"verifier_accuracy": verifier_acc, "skipped": skipped_total, "num_utts": cfg.num_utts,
                   "extra_speakers": extra, "complete": len(done) == len(order)})
    with atomic_write(out / "scores.json") as f:
        json.dump(scores, f, indent=1)
    if cfg.plots:
        t, spk, _ = done[-1]
        last = read_json(out / f"episode_{t:02d}.json", expect=dict)
        true = [r["speaker"] for r in last["utterances"]]
        pred = [r["predicted"] for r in last["utterances"]]
        strategy = read_json(exp / "plan.json", expect=dict).get("strategy", "")
        plot_confusion_matrix(true, pred, out / "confusion_matrix.png", labels=extra + evaluated,
                              title=f"{exp.name} ({strategy}): episode {t}, true vs verified speaker")
        npz = np.load(out / f"episode_{t:02d}.npz")
        x_gt, y_gt = test_gt.select(evaluated, "held-out ground-truth")
        plot_embeddings_2d(x_gt, y_gt.tolist(), npz["embeddings"], npz["speakers"].tolist(),
                           out / "embeddings_2d.png", speakers=evaluated,
                           title=f"{exp.name} ({strategy}), episode {t}: o ground truth, x synthesized")
        _plot_accuracy_matrix(A, evaluated, out / "accuracy_matrix.png", f"{exp.name} ({strategy})")
    return scores


def _plot_accuracy_matrix(A: np.ndarray, order: Sequence[str], path: Path, title: str) -> None:
    """a_{l,i} (rows: after episode l; columns: speaker i) as an annotated heat map."""
    from matplotlib.figure import Figure

    T = len(order)
    fig = Figure(figsize=(1.2 + 0.55 * T, 1.0 + 0.5 * T))
    ax = fig.add_subplot()
    im = ax.imshow(np.ma.masked_invalid(100 * A), vmin=0, vmax=100, cmap="viridis")
    for l in range(A.shape[0]):
        for i in range(l + 1):
            ax.text(i, l, f"{100 * A[l, i]:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if A[l, i] < 0.6 else "black")
    ax.set_xticks(range(T), order, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(A.shape[0]), [f"after {l + 1}" for l in range(A.shape[0])], fontsize=7)
    ax.set_xlabel("speaker (episode order)")
    ax.set_title(f"{title}: verifier accuracy a_l,i (%)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
