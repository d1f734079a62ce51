"""Input reading of the forced aligner: a data dir's phone tokens (``text``), word indices
(``phone_info``) and audio, turned into MFCC + deltas with CMVN (Kaldi's ``compute-mfcc-feats`` +
``add-deltas`` + ``apply-cmvn --norm-vars``)."""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np

from speechkit.align.config import AlignerConfig
from speechkit.data.audio import read_audio
from speechkit.data.datadir import DataDir, iter_audio
from speechkit.features.frontends import build_frontend
from speechkit.utils.fileio import DataError, read_lines


def read_phone_info(path: str | os.PathLike, tokens: dict[str, list[str]]) -> dict[str, list[int]]:
    """Word index of every token from a ``phone_info`` file (``<utt> <stress>:<syllable>:<word> ...``).

    Args:
        path: the ``phone_info`` file.
        tokens: utterance -> tokens of ``text`` (the fields must be 1:1 with them).

    Returns:
        utterance -> word index per token (utterances absent from the file are absent here).

    Raises:
        DataError: a malformed field, a token count that differs from ``text``, a decreasing word
            index, or an utterance not in ``text`` (names file and line).
    """
    out: dict[str, list[int]] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            raise DataError(f"{path}:{lineno}: empty line")
        utt, fields = parts[0], parts[1:]
        if utt not in tokens:
            raise DataError(f"{path}:{lineno}: utterance '{utt}' is not in text")
        if len(fields) != len(tokens[utt]):
            raise DataError(f"{path}:{lineno}: '{utt}' has {len(fields)} fields but text has "
                            f"{len(tokens[utt])} tokens")
        words = []
        for f in fields:
            bits = f.split(":")
            if len(bits) != 3 or not all(b.isdigit() for b in bits):
                raise DataError(f"{path}:{lineno}: '{utt}': field {f!r} is not <stress>:<syllable>:<word>")
            words.append(int(bits[2]))
        if any(b < a for a, b in zip(words, words[1:])):
            raise DataError(f"{path}:{lineno}: '{utt}': word indices decrease")
        out[utt] = words
    return out


def _read_inputs(data_dir: str | os.PathLike) -> tuple[DataDir, dict[str, list[str]], dict[str, list[int]] | None]:
    d = DataDir.load(data_dir)
    if d.text is None:
        raise FileNotFoundError(f"{data_dir}/text: missing (the token sequences to align)")
    if d.wav_scp is None:
        raise FileNotFoundError(f"{data_dir}/wav.scp: missing (the audio to align)")
    tokens = {u: d.text[u].split() for u in d.utts if u in d.text}
    missing = [u for u in d.utts if u not in d.text]
    if missing:
        raise DataError(f"{data_dir}/text: no entry for utterance '{missing[0]}' ({len(missing)} missing)")
    unlisted = [u for u in d.text if u not in d.utt2spk]
    if unlisted:  # it would be dropped without a word (and phone_info blamed for naming it)
        raise DataError(f"{data_dir}/utt2spk: no entry for utterance '{unlisted[0]}' of text "
                        f"({len(unlisted)} missing)")
    if d.segments is not None:
        missing = [u for u in d.utts if u not in d.segments]
        if missing:
            raise DataError(f"{data_dir}/segments: no entry for utterance '{missing[0]}' "
                            f"({len(missing)} of {len(d.utts)} missing)")
    pi = Path(data_dir) / "phone_info"
    words = read_phone_info(pi, tokens) if pi.is_file() else None
    return d, tokens, words


def _read_audio_all(d: DataDir, utts: list[str], sample_rate: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Samples of every utterance; an unreadable one goes to the failures (utt -> message)."""
    out: dict[str, np.ndarray] = {}
    failed: dict[str, str] = {}
    by_rec: dict[str, list[str]] = {}
    for u in utts:
        by_rec.setdefault(d.recording_of(u), []).append(u)
    for rec, rutts in by_rec.items():
        sub = DataDir(wav_scp={rec: d.wav_scp[rec]} if rec in d.wav_scp else {},
                      utt2spk={u: d.utt2spk[u] for u in rutts},
                      segments=None if d.segments is None else {u: d.segments[u] for u in rutts if u in d.segments},
                      path=d.path)
        try:
            for u, x, _ in iter_audio(sub, expected_sr=sample_rate):
                out[u] = x
        except DataError:
            for u in rutts:  # find which ones fail
                if u in out:
                    continue
                try:
                    if d.segments is None:
                        if u not in d.wav_scp:
                            raise DataError(f"{d.path}/wav.scp: no entry for utterance '{u}'")
                        x, _ = read_audio(d.wav_scp[u], key=u, expected_sr=sample_rate,
                                          source=f"{d.path}/wav.scp")
                    else:
                        if u not in d.segments or d.segments[u].recording not in d.wav_scp:
                            raise DataError(f"{d.path}/segments: '{u}' has no recording in wav.scp")
                        s = d.segments[u]
                        x, _ = read_audio(d.wav_scp[s.recording], key=u, start=s.start, end=s.end,
                                          expected_sr=sample_rate, source=f"{d.path}/wav.scp")
                    out[u] = x
                except DataError as e:
                    failed[u] = str(e)
    return out, failed


def _mfcc_worker(args):
    conf, items = args
    fe = build_frontend(conf, source="aligner")
    res = {}
    for u, x in items:
        try:
            res[u] = fe(x)
        except ValueError as e:
            res[u] = str(e)
    return res


def compute_features(d: DataDir, utts: list[str], config: AlignerConfig, nj: int = 1
                     ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, str]]:
    """MFCC + deltas with CMVN for ``utts`` of ``d``.

    Returns:
        ``(feats, durations, failures)``: utt -> float32 ``(T, 3 * n_mfcc)``; utt -> audio
        duration in seconds; utt -> reason for utterances whose audio could not be read.
    """
    audio, failed = _read_audio_all(d, utts, config.sample_rate)
    durs = {u: len(x) / config.sample_rate for u, x in audio.items()}
    items = list(audio.items())
    conf = config.frontend_conf()
    parts = [items[i::nj] for i in range(nj)] if nj > 1 else [items]
    results = _pmap(_mfcc_worker, [(conf, p) for p in parts], nj)
    feats: dict[str, np.ndarray] = {}
    for r in results:
        for u, f in r.items():
            if isinstance(f, str):
                failed[u] = f"unreadable audio: {f}"
            else:
                feats[u] = f
    failed = {u: (m if m.startswith("unreadable") else f"unreadable audio: {m}") for u, m in failed.items()}
    if config.cmvn != "none":
        groups: dict[str, list[str]] = {}
        for u in feats:
            key = d.utt2spk.get(u, u) if config.cmvn == "speaker" else u
            groups.setdefault(key, []).append(u)
        for us in groups.values():
            allf = np.concatenate([feats[u] for u in us]).astype(np.float64)
            mean = allf.mean(0)
            std = np.sqrt(np.maximum(allf.var(0), 1e-20))
            for u in us:
                feats[u] = ((feats[u] - mean) / std).astype(np.float32)
    return feats, durs, failed


def _pmap(fn, args: list, nj: int) -> list:
    if nj <= 1 or len(args) <= 1:
        return [fn(a) for a in args]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(min(nj, len(args))) as pool:
        return pool.map(fn, args)
