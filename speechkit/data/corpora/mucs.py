"""MUCS 2021 (Multilingual and Code-Switching ASR Challenge, sub-task 1) as Kaldi data dirs.

Layout read, per language and split (``train``, ``test``; ``dev`` if the corpus has one)::

    <mucs-root>/<Language>/<split>/transcription.txt    lines '<uttid> <text>'
    <mucs-root>/<Language>/<split>/audio/<uttid>.wav    8 kHz

``<Language>`` is the challenge's folder name (Hindi, Marathi, Odia, Tamil, Telugu, Gujarati, any
case) or already an ISO 639-1 code (``hi``); it becomes the ``utt2lang`` id. Written:
``<out-root>/<lang>/{train,dev,test}`` with ``wav.scp text utt2spk spk2utt utt2lang utt2dur``.

* ``wav.scp``: ``sox -R <wav> -t wav -r 16000 -b 16 -c 1 - |`` (the 8 kHz audio resampled for the
  16 kHz log-mel config; a file already at ``sample_rate`` is listed by its path).
* ``text``: the transcript NFC-normalised, punctuation removed, Latin lowercased
  (:func:`speechkit.data.corpora._common.normalize_text`, as every speechkit preparer).
* speakers: MUCS gives none, so each utterance is its own pseudo-speaker (dev is then utterance-
  disjoint from train only, as ``hindi_noa`` is bulletin-disjoint); with ``speaker_from_id`` the
  part of the MUCS id before its first ``_`` (a recording session in the challenge's ids) is the
  speaker. Ids: speaker ``<lang>-<session or id>``, utterance ``<speaker>_<rest>`` (``_`` in a
  speaker replaced by ``-``), so the speaker is a prefix of the utterance id.
* dev: the corpus's ``dev/`` if present, else a fraction ``dev`` of the training speakers
  (seeded by ``seed``), whole speakers only.

Lines without text, duplicate ids, and missing/empty/undecodable audio are counted, reported (the
first few by name) and skipped; a split with no usable utterance is an error naming it.

:func:`prepare_mucs` writes that tree (``egs/indic_multilingual/local/prepare_mucs.py`` is its
command line); :func:`prepare_mucs_corpus`, registered as ``mucs`` in
:data:`speechkit.data.corpora.CORPORA`, writes the chosen languages and official parts as one data
directory, the form every recipe's ``--corpus NAME`` path splits itself.
"""
from __future__ import annotations

import os
import random
import re
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS,
    SkipLog,
    add_probed,
    check_parts,
    check_sample_rate,
    finish,
    normalize_text,
    read_metadata_lines,
)
from speechkit.data.datadir import DataDir, c_sorted, subset
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError

URL = "https://navana-tech.github.io/MUCS2021/"
#: MUCS 2021 folder names -> ISO 639-1 codes.
LANGUAGE_CODES = {"hindi": "hi", "marathi": "mr", "odia": "or", "oriya": "or", "tamil": "ta", "telugu": "te",
                  "gujarati": "gu", "bengali": "bn", "english": "en"}
SPLITS = ("train", "dev", "test")
# Every id this gives (and so every utt2lang value) is also a valid language id of the units
# (speechkit.text.units.check_language_id: [A-Za-z0-9][A-Za-z0-9_-]*, not 'union').
_ISO = re.compile(r"^[a-z]{2,3}$")


def language_code(folder: str) -> str | None:
    """The ``utt2lang`` id of a language folder, or None if the folder is not a language."""
    name = folder.lower()
    if name in LANGUAGE_CODES:
        return LANGUAGE_CODES[name]
    return name if _ISO.match(name) else None


def _child(parent: Path, name: str) -> Path | None:
    """``parent/name`` matched case-insensitively (``Train``/``train``), or None."""
    exact = parent / name
    if exact.is_dir():
        return exact
    found = [p for p in parent.iterdir() if p.is_dir() and p.name.lower() == name]
    return found[0] if found else None


def prepare_split(split_dir: Path, lang: str, *, sample_rate: int | None = 16000,
                  speaker_from_id: bool = False, keep_punctuation: bool = False) -> DataDir:
    """One language's split (``transcription.txt`` + ``audio/``) as an in-memory :class:`DataDir`.

    Raises:
        FileNotFoundError: no ``transcription.txt``.
        DataError: no usable utterance (everything skipped), a non-UTF-8 transcription file.
    """
    trans = split_dir / "transcription.txt"
    if not trans.is_file():
        raise FileNotFoundError(f"{trans}: no such file (MUCS layout: <lang>/<split>/transcription.txt)")
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("lines", corpus=f"mucs {lang}/{split_dir.name}")
    lines = read_metadata_lines(trans)
    for lineno, line in enumerate(lines, 1):
        parts = line.split(maxsplit=1)
        if not parts:
            skips.skip("malformed", f"{trans}:{lineno}: empty line")
            continue
        mucs_id = parts[0]
        text = normalize_text(parts[1], keep_punctuation) if len(parts) > 1 else ""
        if not text:
            skips.skip("no-text", f"{trans}:{lineno}: utterance '{mucs_id}' has no text")
            continue
        if speaker_from_id and "_" in mucs_id:
            session, rest = mucs_id.split("_", 1)
            spk, utt = f"{lang}-{session}", f"{lang}-{session}_{rest}"
        else:
            spk = f"{lang}-{mucs_id.replace('_', '-')}"
            utt = spk
        if utt in d.utt2spk:
            skips.skip("malformed", f"{trans}:{lineno}: duplicate utterance '{mucs_id}'")
            continue
        if not add_probed(d, utt, split_dir / "audio" / f"{mucs_id}.wav", text, spk, skips, sample_rate, key=mucs_id):
            continue
        d.utt2lang[utt] = lang
    skips.summary(len(lines), ("malformed", "no-text") + AUDIO_REASONS)
    if len(d) == 0:
        raise DataError(f"{split_dir}: no usable utterance (see the skip report above)")
    return d


def draw_dev(d: DataDir, fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """``(train_utts, dev_utts)``: whole speakers, shuffled by ``seed``, until ``fraction`` of the utterances.

    Raises:
        ParameterError: ``fraction`` outside (0, 1) (named as ``dev``, :func:`prepare_mucs`' parameter).
        DataError: fewer than two speakers (train or dev would be empty).
    """
    if not 0.0 < fraction < 1.0:
        raise ParameterError("dev", f"`dev` must be a fraction in (0, 1), got {fraction}")
    spk_utts: dict[str, list[str]] = {}
    for utt in d.utts:
        spk_utts.setdefault(d.utt2spk[utt], []).append(utt)
    speakers = c_sorted(spk_utts)
    if len(speakers) < 2:
        raise DataError(f"{len(speakers)} speaker(s) in train: cannot draw a speaker-disjoint dev set")
    random.Random(seed).shuffle(speakers)
    target = max(1, round(fraction * len(d)))
    dev: list[str] = []
    for spk in speakers[:-1]:  # the last speaker always trains
        if len(dev) >= target:
            break
        dev.extend(spk_utts[spk])
    dev_set = set(dev)
    return [u for u in d.utts if u not in dev_set], c_sorted(dev)


def prepare_mucs(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, languages: list[str] | None = None,
                 dev: float = 0.1, seed: int = 0, sample_rate: int | None = 16000,
                 speaker_from_id: bool = False) -> dict[str, dict[str, int]]:
    """Write ``out_dir/<lang>/{train,dev,test}`` for every language folder of ``corpus_dir``.

    Args:
        corpus_dir: the MUCS root (``<Language>/<split>/...``).
        out_dir: where the per-language data directories go.
        languages: ISO codes to prepare (default: every language folder).
        dev: fraction of the training utterances drawn as dev (whole speakers) when there is no ``dev/``.
        seed: seed of that draw.
        sample_rate: ``wav.scp`` rate in Hz (other rates become ``sox`` pipes); None: native.
        speaker_from_id: speaker = the MUCS id's part before its first ``_`` (default: one per utterance).

    Returns:
        ``{lang: {split: utterances}}``.

    Raises:
        FileNotFoundError: ``corpus_dir`` is not a directory.
        DataError: no language folder, a language of ``languages`` not found, a language without
            ``train/`` or ``test/``, an empty split.
        ValueError: ``dev`` outside (0, 1) when a dev set must be drawn.
    """
    root, out = Path(corpus_dir), Path(out_dir)
    found = _language_folders(root)
    wanted = languages or sorted(found)
    missing = [lang for lang in wanted if lang not in found]
    if missing:
        raise naming_parameters(DataError(f"`languages`: '{missing[0]}' is not under {root} (found: "
                                          f"{', '.join(sorted(found))})"))
    counts: dict[str, dict[str, int]] = {}
    for lang in wanted:
        dirs = {s: _child(found[lang], s) for s in SPLITS}
        for s in ("train", "test"):
            if dirs[s] is None:
                raise DataError(f"{found[lang]}: no {s}/ folder (MUCS layout: <lang>/{{train,test}}/transcription.txt)")
        parts = {s: prepare_split(dirs[s], lang, sample_rate=sample_rate, speaker_from_id=speaker_from_id)
                 for s in SPLITS if dirs[s] is not None}
        if "dev" not in parts:
            train_utts, dev_utts = draw_dev(parts["train"], dev, seed)
            parts["train"], parts["dev"] = subset(parts["train"], train_utts), subset(parts["train"], dev_utts)
        for s in SPLITS:
            finish(parts[s], out / lang / s, corpus=f"mucs {lang}/{s}")
        counts[lang] = {s: len(parts[s]) for s in SPLITS}
    return counts


def _language_folders(root: Path) -> dict[str, Path]:
    """``{ISO code: folder}`` of the language folders of a MUCS root.

    Raises:
        FileNotFoundError: ``root`` is not a directory.
        DataError: no language folder, or two folders of one language.
    """
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory")
    found = {}
    for p in sorted(root.iterdir()):
        code = language_code(p.name) if p.is_dir() else None
        if code is not None:
            if code in found:
                raise DataError(f"{root}: {found[code].name}/ and {p.name}/ are both language '{code}'")
            found[code] = p
    if not found:
        raise DataError(f"{root}: no language folder (expected e.g. Hindi/, Marathi/ or hi/; "
                        f"known names: {', '.join(sorted(LANGUAGE_CODES))})")
    return found


def download_mucs(target_dir: str | os.PathLike) -> None:
    """Not automated: MUCS 2021 is distributed after registering for the challenge.

    Get sub-task 1's data (https://navana-tech.github.io/MUCS2021/data.html) and unpack it so that
    ``target_dir/<Language>/{train,test}/transcription.txt`` and ``audio/`` exist.

    Raises:
        NotImplementedError: always, with these instructions.
    """
    raise NotImplementedError(f"MUCS 2021 is distributed after registration ({URL}); unpack it into {target_dir}")


def prepare_mucs_corpus(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                        keep_punctuation: bool = False, languages: list[str] | None = None,
                        parts: list[str] | None = None, speaker_from_id: bool = False) -> DataDir:
    """Write the ``parts`` (official splits) of the ``languages`` of a MUCS root as one data directory.

    The registry's form of :func:`prepare_mucs` (``speechkit-prepare-corpus mucs``; a recipe's
    ``--corpus mucs`` then makes its own sets). Ids, speakers, text, ``utt2lang`` and skips as
    :func:`prepare_split`; no dev is drawn (a language without ``dev/`` contributes train and test).

    Args:
        corpus_dir: the MUCS root (``<Language>/<split>/...``).
        out_dir: data directory to write.
        sample_rate: ``wav.scp`` rate in Hz (other rates become ``sox`` pipes); None: native (8 kHz).
        keep_punctuation: keep the transcripts' punctuation and case.
        languages: ISO codes to read (default: every language folder).
        parts: official splits to read, of ``train dev test`` (default: all three; dev where present).
        speaker_from_id: speaker = the MUCS id's part before its first ``_`` (default: one per utterance).

    Raises:
        FileNotFoundError: ``corpus_dir`` is not a directory.
        DataError: no language folder; a language of ``languages`` or a part of ``parts`` not found
            (a named part other than dev is required of every language); an utterance id in two parts;
            no usable utterance.
        ValueError: a part that is not train, dev or test; a bad ``sample_rate``.
    """
    check_sample_rate(sample_rate)
    root = Path(corpus_dir)
    wanted_parts = check_parts(parts, SPLITS)
    found = _language_folders(root)
    wanted = languages or sorted(found)
    missing = [lang for lang in wanted if lang not in found]
    if missing:
        raise naming_parameters(DataError(f"`languages`: '{missing[0]}' is not under {root} (found: "
                                          f"{', '.join(sorted(found))})"))
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    origin: dict[str, str] = {}
    for lang in wanted:
        for part in wanted_parts:
            folder = _child(found[lang], part)
            if folder is None:
                if part == "dev" and parts is None:
                    continue
                raise DataError(f"{found[lang]}: no {part}/ folder (MUCS layout: <lang>/{{train,test}}/transcription.txt)")
            one = prepare_split(folder, lang, sample_rate=sample_rate, speaker_from_id=speaker_from_id,
                                keep_punctuation=keep_punctuation)
            for utt in one.utts:
                if utt in origin:
                    raise DataError(f"{root}: utterance '{utt}' is in {origin[utt]} and in {lang}/{part}")
                origin[utt] = f"{lang}/{part}"
                for table in ("wav_scp", "text", "utt2spk", "utt2lang", "utt2dur"):
                    getattr(d, table)[utt] = getattr(one, table)[utt]
    return finish(d, out_dir, corpus="mucs")


__all__ = ["LANGUAGE_CODES", "SPLITS", "language_code", "prepare_split", "draw_dev", "prepare_mucs",
           "prepare_mucs_corpus", "download_mucs"]
