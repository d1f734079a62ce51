"""Text to speech with a trained acoustic model: built once from an exp dir, called per utterance.

ESPnet2's ``Text2Speech`` habit.

:class:`Synthesizer` is built from an experiment dir (``speechkit-train salad | musa_rnn |
tacotron2``) and a checkpoint choice (:func:`speechkit.train.checkpoint.resolve_checkpoint`), and
turns one utterance into acoustic features and, with the vocoder of its training features'
``feats.yaml``, into a waveform:

- salad / musa_rnn (``input == "labels"``): float32 ``(T, D)`` frame-level label vectors (forced
  durations, ``speechkit-make-labels``) -> :func:`speechkit.tasks.acoustic.predict_features`
  (SALAD from position 0, the MUSA-RNN from zero state, the whole utterance at once; denormalised;
  V/UV thresholded to 0/1 at 0.5) -> float32 ``(T, 43)`` WORLD features ``[mcep 40 | lf0 | vuv |
  bap]``, one frame per label frame -> :func:`speechkit.features.world.world_synthesize`;
- tacotron2 (``input == "phones"``): a phone list -> :func:`speechkit.tasks.tacotron2.synthesize`
  (the stop token, at most ``max_frames_per_phone`` frames per phone + 20; phones outside the
  vocabulary become ``<unk>`` as in training, warned) -> float32 ``(T, n_mels)`` natural-log mel ->
  :func:`speechkit.decode.griffin_lim.mel_to_waveform` (``griffin_lim_iters`` iterations, seed 0).

A speaker-conditioned model (trained with ``data.speaker_embeddings``; Hemati & Borth 2021, sec.
2.1) gets the speaker's vector from the scp it was trained with (or the one given); only the
speakers it was trained on (``EXP/speakers``) may be asked for.

Used by ``speechkit-tts-synthesize`` (through :func:`synthesize_label_dir`, a whole
``labels.scp`` into a feature dir and wavs) and the continual evaluation
(:mod:`speechkit.continual.evaluation`)::

    synth = Synthesizer("exp/vctk/salad")
    wav = synth(labels, "p225")            # float waveform at synth.sr Hz, peak at most 0.99
"""
from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from speechkit.data.expdir import trained_speakers, world_conf
from speechkit.data.fingerprint import DataInput, diff_fingerprints, fingerprint_inputs
from speechkit.data.speakers import read_speaker_vectors, utterance_speakers
from speechkit.decode.audio_out import limit_peak, warn_unplotted
from speechkit.decode.vocode import world_vocode
from speechkit.features.io import ScpReader, ark_scp_writer, scp_files
from speechkit.features.world import stream_layout, world_synthesize
from speechkit.inference.parts import run_parts
from speechkit.tasks import load_model
from speechkit.train.checkpoint import DATA_FINGERPRINT, load_checkpoint, resolve_checkpoint
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

# models.tacotron2, tasks.acoustic, tasks.tacotron2 and decode.griffin_lim (torch) are imported where used: the parts
# are split and merged without torch.

__all__ = ["Synthesizer", "synthesize_label_dir"]

log = logging.getLogger(__name__)

_MODELS = {"labels": "salad | musa_rnn", "phones": "tacotron2", None: "salad | musa_rnn | tacotron2"}


class Synthesizer:
    """A trained acoustic model with its vocoder config and speakers, ready to synthesize.

    Args:
        model_dir: the experiment dir ``exp/<tag>`` (or a checkpoint file; see ``resolve_checkpoint``).
        checkpoint: ``None`` (best.pt, else the latest), ``"best"``, ``"latest"``, ``"avgN"``, a
            checkpoint name or path.
        speaker_embeddings: the speaker -> vector scp of a conditioned model (default: the
            ``data.speaker_embeddings`` it was trained with); ignored for an unconditioned one. Its
            vectors must be those the model was trained with, by content (:attr:`vectors_changed`).
        input: ``"labels"`` or ``"phones"`` to accept only the models synthesizing from that; None: any.
        device: where to put the model.

    Attributes:
        model_dir, checkpoint: the experiment dir and the checkpoint file loaded.
        model, cfg: the model in eval mode and its task config.
        input: ``"labels"`` (salad, musa_rnn) or ``"phones"`` (tacotron2).
        conf, conf_src: the front-end config of its training features and its file
            (``EXP/feats.yaml``, else ``data.train_dir/feats.yaml``); ``(None, "")`` without one.
        sr: the vocoder's sample rate in Hz (the config's ``sample_rate``, default 16000).
        speaker_embeddings: the scp the speaker vectors come from (None: an unconditioned model).
        max_frames_per_phone, griffin_lim_iters: tacotron2's frame cap per phone, Griffin-Lim iterations.

    Raises:
        FileNotFoundError: no such experiment or checkpoint (``resolve_checkpoint``).
        CheckpointError, ConfigError: an unreadable checkpoint or config (:func:`speechkit.tasks.load_model`).
        ValueError: not an acoustic model checkpoint (of the ``input`` asked for).
    """

    max_frames_per_phone = 25
    griffin_lim_iters = 60

    def __init__(self, model_dir: str | os.PathLike, checkpoint: str | None = None, *,
                 speaker_embeddings: str | os.PathLike | None = None, input: str | None = None,
                 device: str = "cpu"):
        from speechkit.models.tacotron2 import Tacotron2

        self.model_dir = Path(model_dir)
        self.checkpoint = resolve_checkpoint(self.model_dir, checkpoint, param="model_dir")
        expect = {"labels": ("salad", "musa_rnn"), "phones": ("tacotron2",)}.get(input, ("salad", "musa_rnn", "tacotron2"))
        self.model, self.cfg = load_model(self.checkpoint, device=device, expect=expect)
        if isinstance(self.model, Tacotron2):
            kind = "phones"
        elif hasattr(self.model, "infer") and hasattr(self.model, "normalizer"):
            kind = "labels"
        else:
            kind = None
        if kind is None or (input is not None and kind != input):
            raise ValueError(f"{self.checkpoint}: not an acoustic model checkpoint (speechkit-train {_MODELS[input]})")
        self.input = kind
        self.conf, self.conf_src = world_conf(self.model_dir, self.cfg)
        self.sr = int(self.conf.get("sample_rate", 16000)) if self.conf else 16000
        self.speaker_embeddings = (speaker_embeddings or self.cfg.data.speaker_embeddings) if self.conditioned else None

    @property
    def tacotron2(self) -> bool:
        """True for a tacotron2 model (phones -> log-mel -> Griffin-Lim)."""
        return self.input == "phones"

    @property
    def conditioned(self) -> bool:
        """True for a speaker-conditioned model (trained with ``data.speaker_embeddings``)."""
        return bool(getattr(self.cfg.data, "speaker_embeddings", ""))

    @property
    def vuv_index(self) -> int | None:
        """The V/UV column of the WORLD features (from the config's ``mcep_dim``, default 40); None for tacotron2."""
        if self.tacotron2:
            return None
        return stream_layout(int(self.conf.get("mcep_dim", 40)) if self.conf else 40)["vuv"].start

    @functools.cached_property
    def vectors(self) -> dict[str, np.ndarray]:
        """speaker -> ``(E,)`` vector of :attr:`speaker_embeddings` (read once; ``{}`` unconditioned).

        Raises:
            FileNotFoundError, DataError: the scp (:func:`speechkit.data.speakers.read_speaker_vectors`).
        """
        return read_speaker_vectors(self.speaker_embeddings) if self.conditioned else {}

    @functools.cached_property
    def speakers(self) -> list[str]:
        """The speakers the model was trained on (:func:`speechkit.data.expdir.trained_speakers`).

        Raises:
            FileNotFoundError: neither ``EXP/speakers`` nor the training data's utt2spk.
        """
        return trained_speakers(self.model_dir, self.cfg)

    def speaker_vector(self, speaker: str) -> np.ndarray:
        """The ``(E,)`` vector of a trained speaker.

        Raises:
            ValueError: the model is not speaker-conditioned.
            DataError: a speaker the model was never trained on, or one without a vector (named);
                vectors other than those the model was trained with (:attr:`vectors_changed`: names
                the scp, what changed and the speaker).
        """
        vector = self._known_vector(speaker)
        self._check_trained_vectors([speaker])
        return vector

    def _known_vector(self, speaker: str) -> np.ndarray:
        """The vector of a trained speaker, not yet checked against training (:meth:`speaker_vector`)."""
        if not self.conditioned:
            raise ValueError(f"{self.model_dir}: the model is not speaker-conditioned (trained without "
                             f"data.speaker_embeddings)")
        vectors, known = self.vectors, self.speakers
        if speaker not in known:
            raise DataError(f"speaker '{speaker}' was never trained by the model in {self.model_dir} "
                            f"(trained: {', '.join(sorted(known)[:10])}{' ...' if len(known) > 10 else ''})")
        if speaker not in vectors:
            raise DataError(f"{self.speaker_embeddings}: no vector for speaker '{speaker}'")
        return vectors[speaker]

    def _check_trained_vectors(self, speakers: Sequence[str]) -> None:
        """Raise DataError naming the scp, what changed and ``speakers`` if :attr:`vectors_changed`."""
        if self.vectors_changed:
            many = len(speakers) > 1
            who = ", ".join(f"'{s}'" for s in speakers[:5]) + (" ..." if len(speakers) > 5 else "")
            raise DataError(f"{self.speaker_embeddings}: {self.vectors_changed}: {'speakers' if many else 'speaker'} "
                            f"{who} would be conditioned on {'vectors' if many else 'a vector'} the model in "
                            f"{self.model_dir} was not trained with (restore the vectors it was trained with -- "
                            "speechkit-embed-speakers keeps the previous ones in OUT/.backup/N -- or retrain on these)")

    @functools.cached_property
    def vectors_changed(self) -> str | None:
        """Why the speaker vectors read (:attr:`speaker_embeddings`) are not those the model was trained
        with, or None when they are (or cannot be told: an unconditioned model, or a checkpoint saved
        without a fingerprint of its data, warned).

        By content, as ``train-continual`` and a resumed training check their data
        (:func:`speechkit.train.trainer.check_data_fingerprint`): the checkpoint records the
        fingerprint of ``data.speaker_embeddings`` at training time (the scp's lines and the SHA-256 of
        the arks it reads; :mod:`speechkit.data.fingerprint`), compared with the scp read now -- so a
        copy of the same vectors elsewhere passes, and vectors rewritten in place (``speechkit-embed-speakers``
        run again) or another scp do not.
        """
        if not self.conditioned:
            return None
        key = "data.speaker_embeddings"
        saved = (load_checkpoint(self.checkpoint).get(DATA_FINGERPRINT) or {}).get(key)
        if saved is None:
            log.warning("%s: saved without a fingerprint of its speaker vectors (an older checkpoint): cannot check "
                        "that %s holds the vectors the model was trained with", self.checkpoint,
                        self.speaker_embeddings)
            return None
        now = fingerprint_inputs({key: DataInput(str(self.speaker_embeddings))})
        changes, _ = diff_fingerprints({key: saved}, now)
        if not changes:
            return None
        same = Path(saved.get("path", "")) == Path(self.speaker_embeddings)
        where = "" if same else f" (trained with {saved.get('path')})"
        return f"{changes[0].what} since the model was trained{where}, recorded in {self.checkpoint}"

    def speaker_vectors(self, utts: Sequence[str], data_dir: str | os.PathLike | None = None,
                        speaker: str | None = None) -> list[np.ndarray] | None:
        """Each utterance's speaker vector: ``speaker``'s for all, else each one's own (``data_dir/utt2spk``).

        Every speaker is checked before any vector is returned. None for an unconditioned model.

        Raises:
            FileNotFoundError: no scp, no ``data_dir/utt2spk`` (without ``speaker``), no ``EXP/speakers``.
            DataError: a speaker never trained, or without a vector (named); an utterance not in utt2spk;
                vectors other than those the model was trained with (:attr:`vectors_changed`; names the
                speakers).
        """
        if not self.conditioned:
            return None
        vectors = self.vectors
        speakers = [speaker] * len(utts) if speaker is not None else utterance_speakers(data_dir, utts, None)
        unique = list(dict.fromkeys(speakers))
        for spk in unique:  # every speaker known and with a vector, then the vectors checked once
            self._known_vector(spk)
        self._check_trained_vectors(unique)
        return [vectors[s] for s in speakers]

    def features(self, inputs: np.ndarray | Iterable[str], vector: np.ndarray | None = None) -> np.ndarray:
        """One utterance's acoustic features.

        Args:
            inputs: float32 ``(T, D)`` label vectors without the speaker vector (``input ==
                "labels"``), or a phone list (``"phones"``).
            vector: the ``(E,)`` speaker vector of a conditioned model (:meth:`speaker_vector`), else None.

        Returns:
            float32 ``(T, 43)`` WORLD features (labels; one frame per label frame, V/UV 0/1), or
            float32 ``(T, n_mels)`` natural-log mel (phones; ``T`` set by the stop token).

        Raises:
            DataError: an empty phone sequence.
        """
        if not self.tacotron2:
            from speechkit.tasks.acoustic import predict_features

            return predict_features(self.model, inputs, vector, self.vuv_index)
        from speechkit.tasks.tacotron2 import UNK, synthesize

        token_list = list(self.cfg.data.token_list)
        vocab = set(token_list)
        phones = list(inputs)
        unknown = sorted({p for p in phones if p not in vocab})
        if unknown:
            log.warning("%s: phone(s) outside the model's vocabulary synthesized as %s: %s", self.model_dir, UNK,
                        " ".join(unknown[:10]))
            phones = [p if p in vocab else UNK for p in phones]
        return synthesize(self.model, token_list, phones, vector,
                          max_frames=self.max_frames_per_phone * len(phones) + 20, seed=0)

    def require_vocoder(self) -> None:
        """Check that the model's features can be vocoded.

        Raises:
            FileNotFoundError: no feats.yaml (WORLD or log-mel config) to vocode with.
            ValueError: a tacotron2 model whose feats.yaml is not a ``logmel`` front end.
        """
        if self.conf is None:
            raise FileNotFoundError(f"{self.model_dir}: no {'log-mel' if self.tacotron2 else 'WORLD'} config "
                                    f"(feats.yaml) to vocode with")
        if self.tacotron2 and self.conf.get("type") != "logmel":
            raise ValueError(f"{self.conf_src}: tacotron2 output needs a 'logmel' front end for Griffin-Lim, got type "
                             f"{self.conf.get('type')!r}")

    def vocode(self, feats: np.ndarray) -> np.ndarray:
        """The waveform of :meth:`features`' output, at :attr:`sr` Hz, not peak-limited.

        Returns:
            float ``(samples,)``: WORLD synthesis (float32, about ``T * frame_period`` ms), or
            Griffin-Lim (float64, ``hop_length * (T - 1)`` samples).

        Raises:
            FileNotFoundError, ValueError: :meth:`require_vocoder`; features the vocoder rejects.
        """
        self.require_vocoder()
        if self.tacotron2:
            from speechkit.decode.griffin_lim import mel_to_waveform

            return mel_to_waveform(feats, self.conf, n_iter=self.griffin_lim_iters).astype(np.float64)
        return world_synthesize(feats.astype(np.float64), self.sr, self.conf)

    def __call__(self, inputs: np.ndarray | Iterable[str], speaker: str | None = None) -> np.ndarray:
        """One utterance to a waveform: :meth:`features`, then :meth:`vocode`, peak-limited.

        Args:
            inputs: ``(T, D)`` labels or a phone list (see :meth:`features`).
            speaker: a trained speaker (a conditioned model), else None.

        Returns:
            float ``(samples,)`` waveform at :attr:`sr` Hz, peak at most 0.99
            (:func:`speechkit.decode.audio_out.limit_peak`). A tacotron2 output of one frame (the
            stop token fired at once) is repeated once: ``hop_length`` samples (warned).

        Raises:
            DataError: a speaker never trained or without a vector.
            FileNotFoundError, ValueError: :meth:`require_vocoder`.
        """
        vector = self.speaker_vector(speaker) if speaker is not None else None
        feats = self.features(inputs, vector)
        if self.tacotron2 and len(feats) < 2:  # the stop token fired at once: one hop of audio
            log.warning("%s: speaker '%s': the stop token fired after %d frame; a one-hop waveform", self.model_dir,
                        speaker, len(feats))
            feats = np.concatenate([feats, feats[-1:]])
        return limit_peak(self.vocode(feats))


def synthesize_label_dir(model_dir: str | os.PathLike, data_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                         checkpoint: str | None = None,
                         speaker_embeddings: str | os.PathLike | None = None, speaker: str | None = None,
                         num_wavs: int = 0, nj: int = 1, vocoder=None, log: logging.Logger = log) -> dict[str, int]:
    """Every utterance of ``data_dir/labels.scp`` through a salad / musa_rnn :class:`Synthesizer`
    into the feature dir ``out_dir`` (``speechkit-tts-synthesize``; its docstring gives the files).

    ``out_dir`` is written as a whole (the previous one kept as ``out_dir/.backup/N``) and checked
    against every input before any work. The first ``num_wavs`` utterances (C order) are vocoded in
    ``nj`` worker processes (:func:`speechkit.inference.parts.run_parts`).

    Args:
        model_dir, checkpoint, speaker_embeddings: as :class:`Synthesizer` takes them.
        speaker: every utterance in this trained speaker's voice (else each one's own, from
            ``data_dir/utt2spk``); conditioned models only.
        vocoder: the per-utterance job (default :func:`speechkit.decode.vocode.world_vocode`).
        log: where the progress lines go (the CLI passes its own logger).

    Returns:
        ``utt -> frames`` of the predicted features (``out_dir/utt2num_frames``).

    Raises:
        ParameterError: a negative ``num_wavs``, ``nj < 1``; ``speaker`` or ``speaker_embeddings`` for an
            unconditioned model (each naming the parameter). ValueError: not a salad / musa_rnn checkpoint.
        OutputOverlapError: ``out_dir`` overlaps an input or the experiment dir.
        FileNotFoundError: no labels.scp; no WORLD config when ``num_wavs`` asks for wavs.
        DataError: an empty or unreadable labels.scp, labels of the wrong dimension or with NaN/Inf
            (the utterance named), a speaker never trained or without a vector.
    """
    if vocoder is None:
        vocoder = world_vocode
    if num_wavs < 0:
        raise ParameterError("num_wavs", f"`num_wavs` must be >= 0, got {num_wavs}")
    if nj < 1:
        raise ParameterError("nj", f"`nj` must be >= 1, got {nj}")
    model_dir, data_dir, out_dir = Path(model_dir), Path(data_dir), Path(out_dir)
    check_output_dir(out_dir, inputs={"`data_dir`": data_dir}, experiment_dirs={"`model_dir`": model_dir},
                     option="`out_dir`")
    synth = Synthesizer(model_dir, checkpoint, speaker_embeddings=speaker_embeddings, input="labels")
    cfg, conf = synth.cfg, synth.conf
    if conf is None:
        if num_wavs:
            raise naming_parameters(FileNotFoundError(
                f"no WORLD config in {model_dir}/feats.yaml or {cfg.data.train_dir}/feats.yaml: needed to vocode "
                "(`num_wavs`)"))
        log.warning("no WORLD config (feats.yaml) found for %s; OUT_DIR gets none", model_dir)
    frame_shift = float(conf.get("frame_period", 5.0)) / 1000.0 if conf else 0.005

    scp = data_dir / "labels.scp"
    labels = ScpReader(scp, what="label vectors", missing="no label vectors (run speechkit-make-labels)")
    utts = labels.keys()
    if not utts:
        raise DataError(f"{scp}: empty")
    if not synth.conditioned and (speaker or speaker_embeddings):
        raise ParameterError("speaker", f"{model_dir}: the model is not speaker-conditioned (trained without "
                             "data.speaker_embeddings); drop `speaker` / `speaker_embeddings`")
    spk_vectors = synth.speaker_vectors(utts, data_dir, speaker)
    dim = cfg.model.input_dim - (len(spk_vectors[0]) if spk_vectors is not None else 0)
    inputs = [("the checkpoint", synth.checkpoint)] + [(f"a label file of {scp}", f) for f in scp_files(scp)]
    if spk_vectors is not None:
        inputs.append(("the speaker vectors", synth.speaker_embeddings))
    check_output_dir(out_dir, inputs=inputs, option="`out_dir`")

    final = Path(os.path.abspath(out_dir))  # where the files will be once the temporary dir is swapped in
    num_frames: dict[str, int] = {}
    to_vocode: list[tuple[str, np.ndarray]] = []
    t0 = time.time()
    with replace_dir(out_dir) as tmp:
        with ark_scp_writer(tmp / "feats.ark", tmp / "feats.scp", scp_ark=final / "feats.ark") as write:
            for i, utt in enumerate(utts):
                x = np.array(labels.read(utt), dtype=np.float32)
                if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != dim:
                    minus = " minus the speaker vector" if spk_vectors is not None else ""
                    raise DataError(f"{scp}: '{utt}': expected a (frames, {dim}) label matrix (the model's input_dim"
                                    f"{minus}), got shape {x.shape}")
                if not np.isfinite(x).all():
                    raise DataError(f"{scp}: '{utt}': NaN or infinite label values")
                y = synth.features(x, spk_vectors[i] if spk_vectors is not None else None)
                write(utt, y)
                num_frames[utt] = len(y)
                if len(to_vocode) < num_wavs:
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
            results = run_parts(vocoder, [(j, job, {}) for j, job in enumerate(jobs, 1)], workers=nj)
            warn_unplotted(results, {u for u, _ in to_vocode}, log)
            write_table(wav_dir / "wav.scp", {u: str(final / "wav" / Path(p).name) for u, p, _, _ in results})
            log.info("vocoded %d wavs (%.1f s of audio) with their spectrograms", len(results),
                     sum(sec for _, _, sec, _ in results))
    log.info("wrote %s (feats.scp%s)", out_dir, ", wav/" if to_vocode else "")
    return num_frames
