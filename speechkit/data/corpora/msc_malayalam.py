"""Malayalam Speech Corpus (Swathanthra Malayalam Computing, https://gitlab.com/smc/msc), CC BY-SA.

Two subsets (``subset=``):

``crowd`` (default)
    Crowd-sourced read sentences. ``speech.tsv`` (columns ``id sentence user fileName ... vote``)
    joined on ``sentence`` to ``sentences.tsv`` (``id sentence category``). Speaker = the
    contributor's ``user`` id (any ``_`` replaced by ``-``, so the speaker is the utterance id's
    prefix before its first ``_``); utterance ``<user>_<speech id>``. ``vote`` is the community's
    judgement of the recording; rows with ``vote < min_vote`` (default 0) are dropped before the
    audio is looked at. A vote of ``default`` means nobody has voted yet and counts as 0 (so it is
    kept at ``min_vote=0`` and dropped at ``min_vote=1``); ``min_vote=None`` keeps every row.
    The listed audio may be missing, empty or undecodable (11 of the 2098 rows of the shipped
    copy): each is reported and skipped. ``users.tsv`` gives a gender for only some contributors,
    so no ``spk2gender`` is written unless every kept speaker has one.
``story``
    One female reader, ``story/Vasanavikruthi-{i}.flac`` (22.05 kHz); line ``i`` of
    ``story/Vasanavikruthi.txt`` is the transcript of file ``i`` (1-based; line 1 is the title,
    read as file 1). Speaker ``storyreader``, utterance ``storyreader_{i:03d}``. Lines without a
    file are reported as missing recordings.

Text: NFC, punctuation stripped (``normalize_text``); ``utt2lang`` ``ml``.
"""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, read_metadata_lines, finish, normalize_text, probe_or_skip, wav_entry,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)

URL = "https://gitlab.com/smc/msc"
STORY_SPEAKER = "storyreader"
SUBSETS = ("crowd", "story")


def download_msc_malayalam(target_dir: str | os.PathLike) -> Path:
    """Clone the Malayalam Speech Corpus repository (needs ``git`` and internet) into ``target_dir``.

    Source: https://gitlab.com/smc/msc . Does nothing if ``target_dir/speech.tsv`` exists.
    Note the upstream audio is WebM/Opus; libsndfile cannot decode it, so convert it first
    (``ffmpeg -i x.webm x.ogg``) and point ``fileName`` at the converted files.
    """
    target = Path(target_dir)
    if (target / "speech.tsv").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--depth", "1", URL, str(target)], check=True)
    return target


def _read_tsv(path: Path, required: tuple[str, ...], skips: SkipLog) -> list[tuple[int, dict[str, str]]]:
    """Rows of a headed TSV as ``(lineno, {column: value})``; short rows are skipped as malformed."""
    lines = read_metadata_lines(path)  # non-UTF-8 -> DataError naming file and line
    if not lines:
        raise DataError(f"{path}: empty file (expected a header line)")
    header = lines[0].split("\t")
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(f"{path}:1: header lacks column(s) {', '.join(missing)} (has {', '.join(header)})")
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            skips.skip("malformed", f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
            continue
        rows.append((lineno, dict(zip(header, fields))))
    return rows


def _vote(value: str) -> int | None:
    if value.strip().lower() in ("default", ""):
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def _prepare_crowd(corpus_dir: Path, d: DataDir, sample_rate, keep_punctuation, min_vote) -> dict[str, str]:
    meta_skips = SkipLog("rows of speech.tsv", corpus="msc_malayalam")
    sentences: dict[str, str] = {}
    for lineno, row in _read_tsv(corpus_dir / "sentences.tsv", ("id", "sentence"), meta_skips):
        sentences[row["id"]] = row["sentence"]
    spk2gender: dict[str, str] = {}
    if (corpus_dir / "users.tsv").is_file():
        for lineno, row in _read_tsv(corpus_dir / "users.tsv", ("id",), SkipLog("rows of users.tsv", corpus="msc_malayalam")):
            g = row.get("gender", "").strip().lower()
            if g in ("male", "female"):
                spk2gender[row["id"].strip().replace("_", "-")] = g[0]
    speech_tsv = corpus_dir / "speech.tsv"
    rows = _read_tsv(speech_tsv, ("id", "sentence", "user", "fileName", "vote"), meta_skips)
    n_rows = len(rows) + meta_skips.total
    kept = []
    dropped_vote = 0
    for lineno, row in rows:
        where = f"{speech_tsv}:{lineno}"
        vote = _vote(row["vote"])
        if vote is None:
            meta_skips.skip("malformed", f"{where}: vote {row['vote']!r} is not an integer")
            continue
        if row["sentence"] not in sentences:
            meta_skips.skip("malformed", f"{where}: sentence id '{row['sentence']}' not in sentences.tsv")
            continue
        user, sid = row["user"].strip().replace("_", "-"), row["id"].strip()  # no '_' in speaker ids
        if not user or not sid or any(c.isspace() for c in user + sid):
            meta_skips.skip("malformed", f"{where}: user {user!r} / id {sid!r} unusable as Kaldi ids")
            continue
        if min_vote is not None and vote < min_vote:
            dropped_vote += 1
            continue
        kept.append((lineno, user, sid, row))
    meta_skips.summary(n_rows, ("malformed",))
    if min_vote is not None:
        logger.info("msc_malayalam: kept %d of %d usable rows with vote >= %d ('default' counts as 0); %d dropped "
                    "by the vote filter", len(kept), len(kept) + dropped_vote, min_vote, dropped_vote)
    audio_skips = SkipLog("recordings", corpus="msc_malayalam")
    for lineno, user, sid, row in kept:
        utt = f"{user}_{sid}"
        if utt in d.utt2spk:
            audio_skips.skip("duplicate", f"{speech_tsv}:{lineno}: utterance '{utt}' listed twice")
            continue
        path = corpus_dir / row["fileName"]
        probed = probe_or_skip(path, utt, audio_skips)
        if probed is None:
            continue
        n, sr = probed
        text = normalize_text(sentences[row["sentence"]], keep_punctuation)
        if not text:
            audio_skips.skip("empty transcript", f"{speech_tsv}:{lineno}: sentence '{row['sentence']}' is empty")
            continue
        d.wav_scp[utt] = wav_entry(path, sr, sample_rate)
        d.text[utt] = text
        d.utt2spk[utt] = user
        d.utt2lang[utt] = "ml"
        d.utt2dur[utt] = n / sr
    audio_skips.summary(len(kept), AUDIO_REASONS)
    return spk2gender


def _prepare_story(corpus_dir: Path, d: DataDir, sample_rate, keep_punctuation) -> dict[str, str]:
    story = corpus_dir / "story"
    txt = story / "Vasanavikruthi.txt"
    lines = read_metadata_lines(txt)
    skips = SkipLog("recordings", corpus="msc_malayalam")
    for i, line in enumerate(lines, 1):
        utt = f"{STORY_SPEAKER}_{i:03d}"
        text = normalize_text(line, keep_punctuation)
        if not text:
            skips.skip("empty transcript", f"{txt}:{i}: empty line")
            continue
        path = next((p for p in (story / f"Vasanavikruthi-{i}.{ext}" for ext in ("flac", "wav", "ogg")) if p.exists()),
                    story / f"Vasanavikruthi-{i}.flac")
        probed = probe_or_skip(path, utt, skips)
        if probed is None:
            continue
        n, sr = probed
        d.wav_scp[utt] = wav_entry(path, sr, sample_rate)
        d.text[utt] = text
        d.utt2spk[utt] = STORY_SPEAKER
        d.utt2lang[utt] = "ml"
        d.utt2dur[utt] = n / sr
    extra = sorted(p.name for p in story.glob("Vasanavikruthi-*.*")
                   if p.stem.split("-")[-1].isdigit() and int(p.stem.split("-")[-1]) > len(lines))
    if extra:
        logger.warning("msc_malayalam: %d audio files have no line in %s (e.g. %s); ignored", len(extra), txt, extra[0])
    skips.summary(len(lines), AUDIO_REASONS)
    return {STORY_SPEAKER: "f"}


def prepare_msc_malayalam(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                          keep_punctuation: bool = False, subset: str = "crowd", min_vote: int | None = 0) -> DataDir:
    """Prepare one subset of the Malayalam Speech Corpus as a Kaldi data directory.

    Args:
        corpus_dir: the corpus root (``speech.tsv``, ``sentences.tsv``, ``audio/``, ``story/``).
        out_dir: data directory to write (``wav.scp text utt2spk spk2utt utt2lang utt2dur spk2gender``).
        sample_rate: if given and not the native rate (16 kHz crowd, 22.05 kHz story), ``wav.scp``
            entries become ``sox`` pipes.
        keep_punctuation: keep the sentences' punctuation.
        subset: ``crowd`` or ``story`` (see the module docstring).
        min_vote: crowd only: keep rows with ``vote >= min_vote`` (``default`` counts as 0);
            ``None`` keeps all rows.

    Returns:
        The written :class:`DataDir`.

    Raises:
        FileNotFoundError: a metadata file is missing.
        DataError: non-UTF-8 metadata (file and line named), a TSV header without the needed
            columns, or no usable utterance. Malformed rows and bad audio are reported and skipped.
    """
    check_sample_rate(sample_rate)
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {', '.join(SUBSETS)}, got {subset!r}")
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise FileNotFoundError(f"{corpus_dir}: no such directory")
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    if subset == "crowd":
        spk2gender = _prepare_crowd(corpus_dir, d, sample_rate, keep_punctuation, min_vote)
    else:
        spk2gender = _prepare_story(corpus_dir, d, sample_rate, keep_punctuation)
    return finish(d, out_dir, spk2gender=spk2gender, corpus=f"msc_malayalam ({subset})")
