"""``mini``: speechkit's own small multilingual corpus, synthesized with espeak-ng, with phone alignments.

Every recipe's embedded default and the data of CI. Nothing is downloaded: :func:`download_mini`
composes short sentences from small per-language word lists and synthesizes them with several
espeak-ng voices through the C library (:mod:`speechkit.data.corpora._espeak`); the phone
alignments are espeak's own phoneme events (the output sample at which each phoneme starts), so
they are exact for this audio by construction, not estimated.

Content
    Languages ``en hi ta gu`` (English, Hindi, Tamil, Gujarati; native script). Every speaker
    speaks every language. Sentences follow three templates over a real vocabulary (numbers
    0-10, colours, common nouns, imperative verbs): a count ("bring three red apples" /
    "तीन लाल सेब लाओ"), a digit string ("four seven two nine") and a description ("the tree is
    green" / "पेड़ लाल है"). The Indic sentences are telegraphic but use real words in their
    usual order (object-verb). Each (speaker, language) draws ``sentences_per_language``
    sentences of its own from a seeded generator, so speakers mostly say different sentences.
Speakers
    espeak-ng voice variants with their own pitch and rate (:data:`SPEAKERS`): ``sp01`` ... ``sp08``;
    genders as the variants declare them (``spk2gender``).
Audio
    espeak's 22050 Hz output resampled to 16 kHz (soxr, high quality), 16-bit mono WAV.
Phones
    ``phone_alignments``: ``<utt> <start-s> <end-s> <phone>`` with espeak's phoneme mnemonics
    (ASCII, e.g. ``t`` ``i:`` ``n.`` ``t.#``; defined per language in espeak-ng's phoneme tables,
    so one symbol can differ slightly between languages: use ``utt2lang`` to keep them apart).
    espeak's pauses (mnemonics starting with ``_``), and the stretch before the first phoneme,
    are ``sil``; consecutive ``sil`` are merged. A phone runs from its event to the next event
    (the last to the end of the audio). IPA names are not offered: espeak-ng 1.51 reports some
    real phonemes (the palatalisation ``;``) with an empty IPA name, which cannot be told apart
    from a pause.
Determinism
    The same parameters give the same bytes. espeak-ng keeps state between utterances in
    globals, so each speaker is synthesized in a fresh worker process running a fixed sequence of
    calls (and libc's ``rand``, used for breath noise, is re-seeded per utterance); the number of
    parallel workers (``nj``) does not change the output. Different espeak-ng versions may.

Layout written by :func:`download_mini`::

    <dir>/wav/<speaker>/<utt>.wav
    <dir>/metadata.tsv     utt  speaker  language  num_samples  wav  text   (header line first)
    <dir>/alignments.tsv   utt  start  end  phone                             (header line first)
    <dir>/speakers.tsv     speaker  gender  voice  pitch  range  rate         (header line first)
    <dir>/.complete        JSON of the parameters; written last

Re-running with the marker present and the same parameters does nothing; with different
parameters it is an error (the existing corpus is never silently replaced; pass
``overwrite=True`` to regenerate). A directory without the marker (an interrupted run) is
regenerated; a non-empty directory holding anything else is refused, so a wrong path never
loses data.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, finish, normalize_text, probe_or_skip, read_metadata_lines, wav_entry,
)
from speechkit.data.corpora._espeak import Espeak
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError, atomic_write

logger = logging.getLogger(__name__)

#: Sample rate of the written audio (Hz).
MINI_SAMPLE_RATE = 16000
LANGUAGES = ("en", "hi", "ta", "gu")
MARKER = ".complete"
# What download_mini writes (besides dot-files); anything else in the target means it is not ours.
_OWN_FILES = {"wav", "metadata.tsv", "alignments.tsv", "speakers.tsv"}
#: Version of the generator (vocabulary, templates, speakers); part of the marker.
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class Speaker:
    """One synthetic speaker: an espeak-ng voice variant with its own pitch (0-100), range and rate (wpm)."""

    id: str
    variant: str
    gender: str
    pitch: int
    range: int
    rate: int


#: Speakers in the order they are used (``num_speakers`` takes the first N). Variants from
#: espeak-ng-data/voices/!v; klatt variants are avoided (their noise source is less stable).
SPEAKERS: tuple[Speaker, ...] = (
    Speaker("sp01", "m1", "m", 40, 50, 160),
    Speaker("sp02", "f2", "f", 60, 55, 150),
    Speaker("sp03", "m3", "m", 30, 40, 180),
    Speaker("sp04", "f4", "f", 70, 60, 165),
    Speaker("sp05", "m7", "m", 50, 45, 145),
    Speaker("sp06", "f1", "f", 55, 50, 175),
    Speaker("sp07", "m2", "m", 45, 55, 190),
    Speaker("sp08", "f5", "f", 65, 45, 140),
)

# Per-language vocabulary. numbers[i] is the word for i (0-10); nouns are (singular, form used
# after a number > 1); count/describe are the templates (English verb-object, Indic object-verb).
LEXICON: dict[str, dict] = {
    "en": {
        "numbers": ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
        "colours": ("red", "blue", "green", "yellow", "black", "white"),
        "nouns": (("apple", "apples"), ("book", "books"), ("house", "houses"), ("tree", "trees"),
                  ("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("flower", "flowers"),
                  ("stone", "stones"), ("car", "cars")),
        "verbs": ("bring", "see", "count", "buy", "take", "find"),
        "count": "{verb} {number} {colour} {noun}",
        "describe": "the {noun} is {colour}",
    },
    "hi": {
        "numbers": ("शून्य", "एक", "दो", "तीन", "चार", "पाँच", "छह", "सात", "आठ", "नौ", "दस"),
        # colours that do not inflect for gender/number
        "colours": ("लाल", "सफ़ेद", "गुलाबी", "नारंगी", "बैंगनी"),
        # masculine nouns whose direct plural equals the singular
        "nouns": tuple((w, w) for w in ("घर", "पेड़", "फूल", "सेब", "आम", "पत्थर", "हाथी", "बंदर")),
        "verbs": ("लाओ", "देखो", "गिनो", "खरीदो", "उठाओ", "ढूँढो"),
        "count": "{number} {colour} {noun} {verb}",
        "describe": "{noun} {colour} है",
    },
    "ta": {
        "numbers": ("பூஜ்ஜியம்", "ஒன்று", "இரண்டு", "மூன்று", "நான்கு", "ஐந்து", "ஆறு", "ஏழு", "எட்டு", "ஒன்பது",
                    "பத்து"),
        "colours": ("சிவப்பு", "நீலம்", "பச்சை", "மஞ்சள்", "கருப்பு", "வெள்ளை"),
        "nouns": tuple((w, w) for w in ("வீடு", "மரம்", "பூ", "பழம்", "நாய்", "பூனை", "புத்தகம்", "கல்",
                                         "பறவை", "யானை")),
        "verbs": ("பார்", "எண்ணு", "வாங்கு", "எடு", "தேடு", "கொடு"),
        "count": "{number} {colour} {noun} {verb}",
        "describe": "{noun} {colour}",
    },
    "gu": {
        "numbers": ("શૂન્ય", "એક", "બે", "ત્રણ", "ચાર", "પાંચ", "છ", "સાત", "આઠ", "નવ", "દસ"),
        "colours": ("લાલ", "વાદળી", "સફેદ", "ગુલાબી", "નારંગી", "જાંબલી"),
        "nouns": tuple((w, w) for w in ("ઘર", "ઝાડ", "ફૂલ", "ફળ", "પથ્થર", "પુસ્તક", "હાથી", "પક્ષી")),
        "verbs": ("લાવો", "જુઓ", "ગણો", "ખરીદો", "ઉપાડો", "શોધો"),
        "count": "{number} {colour} {noun} {verb}",
        "describe": "{noun} {colour} છે",
    },
}


def compose_sentence(lang: str, rng: random.Random) -> str:
    """One sentence in ``lang`` from :data:`LEXICON`: a count (1/2), a digit string (1/4) or a description (1/4)."""
    lex = LEXICON[lang]
    kind = rng.choice(("count", "count", "digits", "describe"))
    if kind == "digits":
        return " ".join(lex["numbers"][rng.randrange(10)] for _ in range(rng.randint(3, 5)))
    noun_sg, noun_pl = rng.choice(lex["nouns"])
    colour = rng.choice(lex["colours"])
    if kind == "describe":
        return lex["describe"].format(noun=noun_sg, colour=colour)
    n = rng.randint(1, 10)
    return lex["count"].format(verb=rng.choice(lex["verbs"]), number=lex["numbers"][n], colour=colour,
                               noun=noun_sg if n == 1 else noun_pl)


def compose_sentences(lang: str, n: int, seed: int, speaker: str) -> list[str]:
    """``n`` sentences for (``speaker``, ``lang``), deterministic in ``seed`` (Python's string-seeded RNG)."""
    rng = random.Random(f"speechkit-mini:{GENERATOR_VERSION}:{seed}:{speaker}:{lang}")
    return [compose_sentence(lang, rng) for _ in range(n)]


def phone_segments(phonemes: Sequence[tuple[int, str]], num_samples: int, sample_rate: int,
                   max_end: float | None = None) -> list[tuple[float, float, str]]:
    """Turn espeak phoneme events into contiguous labelled intervals in seconds.

    Each phoneme runs from its start sample to the next event's (the last one to ``num_samples``);
    audio before the first phoneme and espeak's pauses (names ``''`` or starting with ``_``)
    become ``sil``; consecutive ``sil`` are merged; empty intervals are dropped.

    Args:
        phonemes: ``[(start_sample, name), ...]`` in synthesis order.
        num_samples: length of the synthesized audio, in samples at ``sample_rate``.
        sample_rate: rate of the sample indices (Hz).
        max_end: clip every time to this many seconds (the resampled file's duration).

    Returns:
        ``[(start_s, end_s, label), ...]``, contiguous from 0 to the end of the audio.

    Raises:
        ValueError: event positions that go backwards or lie outside ``[0, num_samples]``.
    """
    marks = []
    prev = 0
    for pos, name in phonemes:
        if pos < prev or pos > num_samples:
            raise ValueError(f"phoneme event '{name}' at sample {pos} is out of order or past the end "
                             f"(previous {prev}, length {num_samples})")
        prev = pos
        marks.append((pos, "sil" if not name or name.startswith("_") else name))
    if not marks or marks[0][0] > 0:
        marks.insert(0, (0, "sil"))
    out: list[tuple[float, float, str]] = []
    for i, (pos, label) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else num_samples
        if end <= pos:
            continue
        if out and label == "sil" and out[-1][2] == "sil":
            out[-1] = (out[-1][0], end, "sil")
        else:
            out.append((pos, end, label))
    segs = [(b / sample_rate, e / sample_rate, lab) for b, e, lab in out]
    if max_end is not None:
        segs = [(min(b, max_end), min(e, max_end), lab) for b, e, lab in segs]
        segs = [s for s in segs if s[1] > s[0]]
    return segs


# ------------------------------------------------------------------------------------- synthesis
def _params(seed, num_speakers, sentences_per_language, languages) -> dict:
    return {
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "num_speakers": int(num_speakers),
        "sentences_per_language": int(sentences_per_language),
        "languages": list(languages),
        "sample_rate": MINI_SAMPLE_RATE,
    }


def _check_params(seed, num_speakers, sentences_per_language, languages, nj) -> None:
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not 1 <= num_speakers <= len(SPEAKERS):
        raise ValueError(f"num_speakers must be 1..{len(SPEAKERS)}, got {num_speakers}")
    if sentences_per_language < 1:
        raise ValueError(f"sentences_per_language must be >= 1, got {sentences_per_language}")
    if not languages:
        raise ValueError("languages must not be empty")
    bad = [lang for lang in languages if lang not in LEXICON]
    if bad or len(set(languages)) != len(languages):
        raise ValueError(f"languages must be distinct codes among {', '.join(LANGUAGES)}, got {', '.join(languages)}")
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")


def is_complete(target_dir: str | os.PathLike) -> bool:
    """True if ``target_dir`` holds a finished mini corpus (its ``.complete`` marker exists)."""
    return (Path(target_dir) / MARKER).is_file()


def _run_workers(jobs: list[dict], nj: int, workdir: Path) -> list[dict]:
    """Run one ``_mini_worker`` process per job (at most ``nj`` at once); return their result rows.

    Each job goes through files in ``workdir``: ``.worker-<spk>.json`` (the job),
    ``.worker-<spk>.out.json`` (its result), ``.worker-<spk>.log`` (its stderr); all are removed
    after a successful run and the log is quoted on failure.
    """
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pkg_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    pending = list(jobs)
    running: list[tuple[subprocess.Popen, dict, dict]] = []
    results: list[dict] = []
    bar = tqdm(total=len(jobs), desc="synthesizing mini", unit="speaker", file=sys.stderr, disable=None)
    try:
        while pending or running:
            while pending and len(running) < nj:
                job = pending.pop(0)
                stem = workdir / f".worker-{job['speaker']['id']}"
                files = {"job": stem.with_suffix(".json"), "out": stem.with_suffix(".out.json"),
                         "log": stem.with_suffix(".log")}
                with atomic_write(files["job"]) as f:
                    json.dump(job, f, ensure_ascii=False)
                with open(files["log"], "w", encoding="utf-8") as errf:
                    p = subprocess.Popen([sys.executable, "-m", "speechkit.data.corpora._mini_worker", str(files["job"]),
                                          str(files["out"])], stdin=subprocess.DEVNULL, stdout=errf,
                                         stderr=subprocess.STDOUT, env=env)
                running.append((p, job, files))
            time.sleep(0.02)
            for item in list(running):
                p, job, files = item
                rc = p.poll()
                if rc is None:
                    continue
                running.remove(item)
                if rc != 0 or not files["out"].is_file():
                    tail = files["log"].read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
                    raise RuntimeError(f"mini: synthesis worker for speaker {job['speaker']['id']} failed "
                                       f"(exit {rc}; log {files['log']}): " + " | ".join(tail))
                results.extend(json.loads(files["out"].read_text(encoding="utf-8")))
                for f in files.values():
                    f.unlink()
                bar.update(1)
    finally:
        bar.close()
        for p, _, _ in running:
            p.kill()
            p.wait()
    return results


def download_mini(target_dir: str | os.PathLike, seed: int = 1, num_speakers: int = 6, sentences_per_language: int = 20,
                  languages: Sequence[str] = LANGUAGES, *, nj: int = 2, overwrite: bool = False) -> Path:
    """Synthesize the mini corpus into ``target_dir`` (nothing is downloaded; the name keeps the
    lhotse-style ``download_<corpus>``/``prepare_<corpus>`` pair).

    Args:
        target_dir: corpus directory (created). See the module docstring for the layout.
        seed: sentence-drawing seed; same parameters -> same bytes.
        num_speakers: first N of :data:`SPEAKERS` (1-8, default 6).
        sentences_per_language: sentences per (speaker, language); utterances = speakers x
            languages x this (default 6 x 4 x 20 = 480, about 10 minutes of audio).
        languages: subset of ``en hi ta gu``.
        nj: worker processes run at once (does not change the output).
        overwrite: regenerate even if a finished corpus with other parameters is there.

    Returns:
        ``Path(target_dir)``.

    Raises:
        ValueError: bad parameters; a finished corpus with different parameters is present
            (and ``overwrite`` is false); ``target_dir`` holds files that are not a mini corpus.
        RuntimeError: espeak-ng missing or a synthesis worker failed (its last log lines quoted).
    """
    languages = list(languages)
    _check_params(seed, num_speakers, sentences_per_language, languages, nj)
    target = Path(target_dir)
    params = _params(seed, num_speakers, sentences_per_language, languages)
    marker = target / MARKER
    if marker.is_file():
        try:
            old = json.loads(marker.read_text(encoding="utf-8"))["params"]
        except (ValueError, KeyError):
            old = None
        if old == params:
            logger.info("mini: %s is complete with these parameters; nothing to do", target)
            return target
        if not overwrite:
            if isinstance(old, dict):
                diff = ", ".join(f"{k}={old.get(k)!r} (asked {v!r})" for k, v in params.items() if old.get(k) != v)
            else:
                diff = "unreadable marker"
            raise ValueError(f"{marker}: a mini corpus with other parameters is already there ({diff}); "
                             "use another directory, delete this one, or pass overwrite=True")
        logger.warning("mini: regenerating %s with new parameters", target)
        marker.unlink()
    t0 = time.time()
    if target.is_dir():
        foreign = sorted(p.name for p in target.iterdir() if p.name not in _OWN_FILES and not p.name.startswith("."))
        if foreign:
            raise ValueError(f"{target}: not empty and not a mini corpus (has {', '.join(foreign[:5])}); "
                             "refusing to synthesize into it")
    if (target / "wav").exists():  # left by an interrupted run (no marker)
        shutil.rmtree(target / "wav")
    target.mkdir(parents=True, exist_ok=True)
    speakers = SPEAKERS[:num_speakers]
    jobs, meta = [], []
    for spk in speakers:
        utts = []
        for lang in languages:
            for i, text in enumerate(compose_sentences(lang, sentences_per_language, seed, spk.id), 1):
                utt = f"{spk.id}_{lang}_{i:04d}"
                wav = target / "wav" / spk.id / f"{utt}.wav"
                utts.append({"utt": utt, "lang": lang, "text": text, "wav": str(wav)})
                meta.append((utt, spk.id, lang, f"wav/{spk.id}/{utt}.wav", text))
        jobs.append({"speaker": asdict(spk), "utterances": utts, "sample_rate": MINI_SAMPLE_RATE,
                     "seed": int(seed)})
    rows = {r["utt"]: r for r in _run_workers(jobs, nj, target)}
    missing = [m[0] for m in meta if m[0] not in rows]
    if missing:
        raise RuntimeError(f"mini: workers returned no result for {len(missing)} utterances (e.g. {missing[0]})")
    with atomic_write(target / "speakers.tsv") as f:
        f.write("speaker\tgender\tvoice\tpitch\trange\trate\n")
        for s in speakers:
            f.write(f"{s.id}\t{s.gender}\t{s.variant}\t{s.pitch}\t{s.range}\t{s.rate}\n")
    with atomic_write(target / "metadata.tsv") as f:
        f.write("utt\tspeaker\tlanguage\tnum_samples\twav\ttext\n")
        for utt, spk, lang, wav, text in meta:
            f.write(f"{utt}\t{spk}\t{lang}\t{rows[utt]['num_samples']}\t{wav}\t{text}\n")
    with atomic_write(target / "alignments.tsv") as f:
        f.write("utt\tstart\tend\tphone\n")
        for utt, *_ in meta:
            for b, e, ph in rows[utt]["phones"]:
                f.write(f"{utt}\t{b:.4f}\t{e:.4f}\t{ph}\n")
    with atomic_write(marker) as f:
        json.dump({"params": params, "espeak_ng": Espeak.version(), "utterances": len(meta)}, f, indent=1)
        f.write("\n")
    hours = sum(r["num_samples"] for r in rows.values()) / MINI_SAMPLE_RATE / 3600
    logger.info("mini: synthesized %d utterances (%d speakers x %d languages x %d), %.2f h, in %.1f s into %s",
                len(meta), len(speakers), len(languages), sentences_per_language, hours, time.time() - t0, target)
    return target


# ------------------------------------------------------------------------------------- prepare
def _read_headed_tsv(path: Path, columns: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    lines = read_metadata_lines(path)
    if not lines or lines[0].split("\t") != list(columns):
        raise DataError(f"{path}:1: expected header {' '.join(columns)!r}")
    out = []
    for lineno, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise DataError(f"{path}:{lineno}: expected {len(columns)} tab-separated fields, got {len(fields)}")
        out.append((lineno, fields))
    return out


def prepare_mini(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                 keep_punctuation: bool = False) -> DataDir:
    """Prepare a synthesized mini corpus as a Kaldi data directory.

    Args:
        corpus_dir: a directory written by :func:`download_mini` (its ``.complete`` marker present).
        out_dir: data directory to write (``wav.scp text utt2spk spk2utt utt2lang utt2dur
            spk2gender phone_alignments``).
        sample_rate: if given and not 16000, ``wav.scp`` entries become ``sox`` pipes.
        keep_punctuation: accepted for a uniform interface (the sentences have no punctuation).

    Returns:
        The written :class:`DataDir`.

    Raises:
        DataError: the corpus is incomplete (no marker) or its metadata is malformed (file:line).
    """
    check_sample_rate(sample_rate)
    corpus = Path(corpus_dir)
    if not is_complete(corpus):
        raise DataError(f"{corpus}: no finished mini corpus here ({MARKER} missing); run download_mini() or "
                        "speechkit-prepare-corpus mini DB OUT first")
    spk2gender = {f[0]: f[1] for _, f in _read_headed_tsv(corpus / "speakers.tsv",
                                                            ("speaker", "gender", "voice", "pitch", "range", "rate"))}
    meta = _read_headed_tsv(corpus / "metadata.tsv", ("utt", "speaker", "language", "num_samples", "wav", "text"))
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("recordings", corpus="mini")
    for lineno, (utt, spk, lang, _, wav, text) in meta:
        if not utt.startswith(spk + "_"):
            raise DataError(f"{corpus / 'metadata.tsv'}:{lineno}: utterance '{utt}' does not start with its speaker '{spk}_'")
        probed = probe_or_skip(corpus / wav, utt, skips)
        if probed is None:
            continue
        n, sr = probed
        d.wav_scp[utt] = wav_entry(corpus / wav, sr, sample_rate)
        d.text[utt] = normalize_text(text, keep_punctuation)
        d.utt2spk[utt] = spk
        d.utt2lang[utt] = lang
        d.utt2dur[utt] = n / sr
    skips.summary(len(meta), AUDIO_REASONS)
    alignments = []
    for lineno, (utt, b, e, ph) in _read_headed_tsv(corpus / "alignments.tsv", ("utt", "start", "end", "phone")):
        try:
            alignments.append((utt, float(b), float(e), ph))
        except ValueError:
            raise DataError(f"{corpus / 'alignments.tsv'}:{lineno}: times are not numbers") from None
    return finish(d, out_dir, spk2gender=spk2gender, phone_alignments=alignments, corpus="mini")


def synthesize_and_prepare_mini(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, seed: int = 1,
                                num_speakers: int = 6, sentences_per_language: int = 20,
                                languages: Sequence[str] = LANGUAGES, nj: int = 2,
                                sample_rate: int | None = None, keep_punctuation: bool = False) -> DataDir:
    """:func:`download_mini` into ``corpus_dir`` unless it is already complete with these
    parameters, then :func:`prepare_mini` into ``out_dir`` (what ``speechkit-prepare-corpus mini`` runs)."""
    download_mini(corpus_dir, seed, num_speakers, sentences_per_language, languages, nj=nj)
    return prepare_mini(corpus_dir, out_dir, sample_rate=sample_rate, keep_punctuation=keep_punctuation)
