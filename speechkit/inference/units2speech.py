"""Discrete units to speech: a trained codebook inverter, then Griffin-Lim (``speechkit-resynthesize``).

:class:`Resynthesizer` loads an inverter experiment (``speechkit-train inverter``; Tjandra et al.
2020, sec. 4) with the spectrogram front end its targets were computed with and turns one
utterance's codes into a linear magnitude spectrogram and, through fast Griffin-Lim
(:func:`speechkit.decode.griffin_lim.griffin_lim`), a waveform. :func:`resynthesize` runs it over a
codes table into a directory written as a whole (``<utt>.wav``, ``<utt>.png``, ``wav.scp``); the
command's docstring (``speechkit-resynthesize --help``) gives the contract.

Example::

    from speechkit.inference.units2speech import Resynthesizer
    r = Resynthesizer("exp/zs/inverter")
    wav, mag = r(codes)            # int codes (T',) -> float32 wav at r.sample_rate, (S, F) magnitude
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import yaml
from tqdm import tqdm

from speechkit.decode.audio_out import write_synthesized
from speechkit.features.codes import read_codes
from speechkit.features.frontends import build_frontend, load_frontend_conf
from speechkit.features.io import FeatureReader, scp_files
from speechkit.scoring.plots import plot_spectrograms
from speechkit.tasks import get_task, load_model
from speechkit.train.checkpoint import resolve_checkpoint
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, id_file, read_lines, read_table, write_table
from speechkit.utils.outputs import check_output_dir, replace_dir

# torch and decode.griffin_lim (torch) are imported where used: the parts are split and merged without torch.

logger = logging.getLogger(__name__)

__all__ = ["frontend_conf", "Resynthesizer", "resynthesize"]


def frontend_conf(inverter_dir: Path, cfg, stft_config: str | None) -> tuple[dict, str]:
    """The spectrogram front-end config the inverter's targets were computed with, and where it came from:
    ``stft_config`` if given, else ``INVERTER_DIR/frontend.yaml``, else the ``feats.yaml`` of its
    ``data.feats_dir``.

    Raises:
        FileNotFoundError: none of them (names where it looked and suggests ``stft_config``).
    """
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
    raise naming_parameters(FileNotFoundError(
        f"no spectrogram front-end config in {' or '.join(map(str, candidates)) or inverter_dir}; pass "
        "`stft_config=conf/spectrogram.yaml`"))


class Resynthesizer:
    """A trained codebook inverter and its front end's STFT: codes -> magnitude -> Griffin-Lim waveform.

    Args:
        inverter_dir: the inverter's experiment dir (or a checkpoint path).
        checkpoint: which checkpoint (:func:`speechkit.train.checkpoint.resolve_checkpoint`).
        stft_config: a spectrogram front-end YAML, used when the experiment records none.
        speaker: the target voice of an inverter trained on several (a name of ``INVERTER_DIR/speakers``);
            a one-voice inverter needs none (a name given is only logged).
        log: where the one-voice note goes.

    Attributes:
        model, cfg: the inverter and its training config.
        stft: the front end's STFT parameters (``n_fft``, ``hop_length``, ...); ``sample_rate``.
        upsample_ratio: spectrogram frames per code.
        speaker_index: a ``(1,)`` tensor of the voice, or None.

    Raises:
        FileNotFoundError: no checkpoint, no front-end config, a multi-voice inverter without its
            speaker table.
        DataError: the front end is not a linear magnitude spectrogram (``type: spectrogram, log: false``).
        ParameterError: ``speaker`` missing for, or not a voice of, a multi-voice inverter.
    """

    def __init__(self, inverter_dir: str | os.PathLike, checkpoint: str | None = None, *,
                 stft_config: str | None = None, speaker: str | None = None, log: logging.Logger = logger):
        import torch

        inverter_dir = Path(inverter_dir)
        task = get_task("inverter")
        task.init_from_vqvae = False  # the trained weights hold the codebook already
        self.model, self.cfg = load_model(resolve_checkpoint(inverter_dir, checkpoint, param="inverter_dir"), task)
        conf, conf_src = frontend_conf(inverter_dir, self.cfg, stft_config)
        frontend = build_frontend(conf, conf_src)
        resolved = frontend.to_dict()  # the values as checked (a YAML 'log: no' is False here)
        if resolved["type"] != "spectrogram" or resolved.get("log", False):
            raise DataError(f"{conf_src}: expected a linear magnitude spectrogram front end (type: spectrogram, "
                            f"log: false)")
        self.stft = frontend.stft_params()
        self.sample_rate = frontend.sample_rate
        self.upsample_ratio = self.cfg.model.upsample_ratio
        self.speaker = speaker
        self.speaker_index = None
        if self.cfg.model.num_speakers > 0:
            table_file = inverter_dir / "speakers"
            if not table_file.is_file():
                raise FileNotFoundError(f"{table_file}: the inverter has {self.cfg.model.num_speakers} voices but no "
                                        f"speaker table")
            table = {k: int(v) for k, v in read_table(table_file).items()}
            if speaker is None:
                raise ParameterError("speaker", f"`speaker` is required: the inverter has several voices "
                                     f"({', '.join(table)})")
            if speaker not in table:
                raise ParameterError("speaker", f"`speaker` {speaker!r}: not a voice of the inverter ({', '.join(table)})")
            self.speaker_index = torch.tensor([table[speaker]])
        elif speaker is not None:
            log.info("the inverter has one voice (that of its training data); --speaker %s only labels the output",
                     speaker)

    def __call__(self, codes: np.ndarray, target_frames: int | None = None, *, n_iter: int = 60,
                 momentum: float = 0.99, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Resynthesize one utterance.

        Args:
            codes: int ``(T',)`` codebook indices.
            target_frames: spectrogram frames to produce (a reference's length), else
                ``T' x upsample_ratio``.
            n_iter, momentum, seed: fast Griffin-Lim's iterations, momentum and seed of its random phases.

        Returns:
            ``(wav, magnitude)``: float32 samples at :attr:`sample_rate` (not peak-limited) and the
            predicted ``(S, F)`` linear magnitude.
        """
        import torch

        from speechkit.decode.griffin_lim import griffin_lim

        with torch.no_grad():
            c = torch.from_numpy(np.asarray(codes))[None]
            lengths = torch.tensor([c.shape[1]])
            target = torch.tensor([target_frames]) if target_frames is not None else None
            mag, _ = self.model(c, lengths, self.speaker_index, target_lengths=target)
            mag = mag[0].float()  # (S, F)
            wav = griffin_lim(mag.T.contiguous(), n_iter=n_iter, momentum=momentum, seed=seed, **self.stft).numpy()
        return wav, mag.numpy()


def resynthesize(inverter_dir: str | os.PathLike, codes: str | os.PathLike, out_dir: str | os.PathLike, *,
                 checkpoint: str | None = None, speaker: str | None = None,
                 reference_dir: str | os.PathLike | None = None, utt_list: str | os.PathLike | None = None,
                 max_utts: int = 0, n_iter: int = 60, momentum: float = 0.99, seed: int = 0,
                 stft_config: str | None = None, png: bool = True, log: logging.Logger = logger) -> dict[str, str]:
    """Resynthesize the utterances of a codes table into ``out_dir`` (``speechkit-resynthesize``).

    Args:
        codes: a ``'<utt> <code> ...'`` table (``speechkit-extract-units`` OUT_DIR/codes).
        reference_dir: a data dir with the same utterances' linear spectrograms: each output gets
            the reference's frame count, and its PNG the reference above it.
        utt_list: only these utterances (first field of each line); else the first ``max_utts``
            in C order (0: all).
        png: draw ``<utt>.png`` spectrograms.
        log: where the progress lines go (the CLI passes its own logger).
        checkpoint, speaker, stft_config, n_iter, momentum, seed: as :class:`Resynthesizer` takes them.

    Returns:
        ``utt -> wav path`` as ``out_dir/wav.scp`` lists them.

    Raises:
        ParameterError: a negative ``n_iter`` or ``max_utts``.
        OutputOverlapError: ``out_dir`` overlaps an input (checked before any work).
        DataError: codes missing for an utterance of ``utt_list``, no utterance, a reference that
            is not a linear spectrogram or whose frame count does not match the codes; and the
            errors of :class:`Resynthesizer`.
    """
    import torch

    if n_iter < 0:
        raise ParameterError("n_iter", f"`n_iter` must be >= 0, got {n_iter}")
    if max_utts < 0:
        raise ParameterError("max_utts", f"`max_utts` must be >= 0, got {max_utts}")
    inverter_dir = Path(inverter_dir)
    out_dir = Path(out_dir)
    inputs = {"`codes`": codes, "`reference_dir`": reference_dir, "`utt_list`": utt_list,
              "`stft_config`": stft_config}
    if inverter_dir.is_dir():
        check_output_dir(out_dir, inputs=inputs, experiment_dirs={"`inverter_dir`": inverter_dir}, option="`out_dir`")
    else:
        check_output_dir(out_dir, inputs={**inputs, "`inverter_dir`": inverter_dir}, option="`out_dir`")
    resynth = Resynthesizer(inverter_dir, checkpoint, stft_config=stft_config, speaker=speaker, log=log)
    sr, r = resynth.sample_rate, resynth.upsample_ratio

    table = read_codes(codes, resynth.cfg.model.codebook_size)
    utts = sorted(table, key=lambda u: u.encode("utf-8"))
    if utt_list:
        wanted = [ln.split()[0] for ln in read_lines(utt_list) if ln.strip()]
        missing = [u for u in wanted if u not in table]
        if missing:
            raise DataError(f"{utt_list}: '{missing[0]}' has no codes in {codes}")
        utts = wanted
    elif max_utts:
        utts = utts[:max_utts]
    if not utts:
        raise DataError(f"{codes}: no utterances to resynthesize")

    ref = None
    if reference_dir:
        ref = FeatureReader(reference_dir)
        ref_conf = ref.conf
        if ref_conf is not None and (ref_conf.get("type") != "spectrogram" or ref_conf.get("log", False)):
            raise naming_parameters(DataError(f"{reference_dir}/feats.yaml: `reference_dir` needs linear magnitude "
                                              "spectrograms"))
        ref_scp = Path(reference_dir) / "feats.scp"
        check_output_dir(out_dir, inputs=[(f"a spectrogram file of {ref_scp}", f) for f in scp_files(ref_scp)],
                         option="`out_dir`")

    final = Path(os.path.abspath(out_dir))  # where the wavs will be once the temporary dir is swapped in
    wavs = {}
    t0 = time.time()
    seconds = 0.0
    with torch.no_grad(), replace_dir(out_dir) as tmp:
        for utt in tqdm(utts, desc="resynthesizing", unit="utt", disable=None):
            c = table[utt]
            target = None
            ref_mag = None
            if ref is not None and utt in ref:
                ref_mag = ref[utt]
                target = len(ref_mag)
                if not (len(c) - 1) * r <= len(ref_mag) <= (len(c) + 1) * r:
                    raise DataError(f"{reference_dir}/feats.scp: '{utt}': {len(ref_mag)} frames do not match its "
                                    f"{len(c)} codes x upsample_ratio {r}")
            elif ref is not None:
                log.warning("%s: no reference spectrogram for '%s'", reference_dir, utt)
            wav, mag = resynth(c, target, n_iter=n_iter, momentum=momentum, seed=seed)
            seconds += write_synthesized(id_file(tmp, utt, ".wav"), wav, sr)[0]  # peak-limited; PNG below
            wavs[utt] = str(final / f"{utt}.wav")
            if png:
                panels = []
                if ref_mag is not None:
                    panels.append((f"{utt}: input", ref_mag))
                voice = f" ({speaker})" if speaker else ""
                panels.append((f"{utt}: resynthesized from {len(c)} codes{voice}", mag))
                plot_spectrograms(tmp / f"{utt}.png", panels, sr, resynth.stft["hop_length"])
        write_table(tmp / "wav.scp", wavs)
    log.info("wrote %d wavs (%.1f s of audio) to %s in %.1f s", len(wavs), seconds, out_dir, time.time() - t0)
    return wavs
