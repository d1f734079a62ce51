"""Corpus preparers, one module per corpus (lhotse style), registered by name.

Each module ``speechkit/data/corpora/<name>.py`` has

* ``download_<name>(target_dir, ...)``: fetch (or, for ``mini``, synthesize) the corpus; never
  called by tests;
* ``prepare_<name>(corpus_dir, out_dir, *, sample_rate=None, keep_punctuation=False, **options)
  -> DataDir``: write a Kaldi data directory (see :mod:`speechkit.data.corpora._common` for the
  conventions every preparer follows).

:data:`CORPORA` maps a name to a :class:`Corpus` record that ``speechkit-prepare-corpus`` turns into
a sub-command with one ``--option`` per :class:`Option`, and that every recipe takes as
``./run.sh --corpus NAME --db_root DIR`` (the recipe makes the sets it needs from the one data
directory). To add a corpus, write the module and add one entry here: nothing else lists corpora
(``docs/adding_a_corpus.md`` walks through an example).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from speechkit.data.corpora.commonvoice import download_commonvoice, prepare_commonvoice
from speechkit.data.corpora.fsdd import download_fsdd, prepare_fsdd
from speechkit.data.corpora.hindi_noa import download_hindi_noa, prepare_hindi_noa
from speechkit.data.corpora.ljspeech import download_ljspeech, prepare_ljspeech
from speechkit.data.corpora.mini import download_mini, prepare_mini, synthesize_and_prepare_mini
from speechkit.data.corpora.msc_malayalam import download_msc_malayalam, prepare_msc_malayalam
from speechkit.data.corpora.mucs import download_mucs, prepare_mucs_corpus
from speechkit.data.corpora.timit import download_timit, prepare_timit
from speechkit.data.corpora.vctk import download_vctk, prepare_vctk
from speechkit.data.corpora.zerospeech2019 import download_zerospeech2019, prepare_zerospeech2019_corpus


@dataclass(frozen=True)
class Option:
    """One corpus-specific keyword argument of a ``prepare`` function, exposed as ``--<name>`` on the CLI.

    ``type`` is ``int``, ``str``, ``bool`` (a ``--flag`` / ``--no-flag`` pair) or ``list`` (a
    comma-separated value); ``default`` ``None`` means "not set". With ``nullable`` the CLI also
    accepts ``none`` (passed as ``None``).
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Corpus:
    """A registered corpus: its preparer (called as ``prepare(corpus_dir, out_dir, **options)``),
    its downloader, a one-line description and its options beyond ``sample_rate`` and
    ``keep_punctuation``, which every preparer takes."""

    name: str
    description: str
    prepare: Callable
    download: Callable
    options: tuple[Option, ...] = field(default_factory=tuple)


CORPORA: dict[str, Corpus] = {
    "timit": Corpus(
        "timit", "TIMIT (LDC93S1) or its NLTK sample; English, 16 kHz; phone alignments from .phn",
        prepare_timit, download_timit,
        (Option("part", str, "all", "official split to keep (TRAIN/TEST folders, or spkrinfo.txt's Use column)",
                ("all", "train", "test")),
         Option("include_sa", bool, True, "keep the sa1/sa2 dialect sentences read by every speaker"))),
    "fsdd": Corpus(
        "fsdd", "Free Spoken Digit Dataset; English digits, 8 kHz", prepare_fsdd, download_fsdd),
    "msc_malayalam": Corpus(
        "msc_malayalam", "Malayalam Speech Corpus (SMC): crowd-sourced sentences or one story reader",
        prepare_msc_malayalam, download_msc_malayalam,
        (Option("subset", str, "crowd", "crowd (speech.tsv x sentences.tsv) or story (one reader)", ("crowd", "story")),
         Option("min_vote", int, 0, "crowd: keep rows with vote >= this ('default' = no vote = 0); "
                "'none' keeps every row", nullable=True))),
    "hindi_noa": Corpus(
        "hindi_noa", "Hindi All India Radio news sentences (fairseq manifest); speaker = bulletin folder",
        prepare_hindi_noa, download_hindi_noa,
        (Option("split", str, "train", "manifest name: manifest/<split>.tsv and .wrd"),
         Option("audio_root", str, None, "audio root overriding the manifest's first line"))),
    "ljspeech": Corpus(
        "ljspeech", "LJ Speech 1.1 (or any corpus in its layout: metadata.csv id|raw|normalized, wavs/<id>.wav); "
        "one English reader, 22.05 kHz",
        prepare_ljspeech, download_ljspeech,
        (Option("text_column", str, "normalized", "which transcript column to use", ("normalized", "raw")),)),
    "vctk": Corpus(
        "vctk", "CSTR VCTK (0.92 wav48_silence_trimmed FLAC or 0.80 wav48 WAV): ~110 English speakers, 48 kHz",
        prepare_vctk, download_vctk,
        (Option("mic", str, "mic1", "0.92: which microphone's recordings", ("mic1", "mic2")),
         Option("speakers", list, None, "comma-separated speakers to keep (default: all)"))),
    "mini": Corpus(
        "mini", "speechkit's espeak-ng-synthesized corpus (en hi ta gu), phone alignments from espeak; "
        "synthesized into CORPUS_DIR first unless already complete",
        synthesize_and_prepare_mini, download_mini,
        (Option("seed", int, 1, "sentence-drawing seed (same parameters -> same bytes)"),
         Option("num_speakers", int, 6, "number of synthetic speakers (1-8)"),
         Option("sentences_per_language", int, 20, "sentences per speaker and language"),
         Option("languages", list, ["en", "hi", "ta", "gu"], "comma-separated subset of en,hi,ta,gu"),
         Option("nj", int, 2, "synthesis worker processes (output does not depend on it)"))),
    "commonvoice": Corpus(
        "commonvoice", "Mozilla Common Voice (or any corpus in its layout: validated.tsv with client_id, path, "
        "sentence[, locale, gender] columns, clips/<path> in MP3 or any format libsndfile reads); a locale folder "
        "or a release root of locale folders",
        prepare_commonvoice, download_commonvoice,
        (Option("table", str, "validated.tsv", "the table of each locale folder (validated.tsv, train.tsv, ...)"),
         Option("locales", list, None, "comma-separated locale folders of a release root; None: every one"),
         Option("lang", str, None, "utt2lang of rows without a locale column; None: the folder name if it is "
                "a locale code"))),
    "mucs": Corpus(
        "mucs", "MUCS 2021 sub-task 1 (hi mr or ta te gu; 8 kHz): <Language>/<split>/transcription.txt + audio/, "
        "the chosen languages and official splits as one data dir",
        prepare_mucs_corpus, download_mucs,
        (Option("languages", list, None, "comma-separated ISO codes; None: every language folder"),
         Option("parts", list, None, "comma-separated official splits of train,dev,test; None: every one present"),
         Option("speaker_from_id", bool, False, "speaker = the id's part before its first '_' (else one "
                "pseudo-speaker per utterance)"))),
    "zerospeech2019": Corpus(
        "zerospeech2019", "ZeroSpeech 2019 (english/ or surprise/): the audio of train/unit, train/voice, test "
        "as one data dir, no transcripts",
        prepare_zerospeech2019_corpus, download_zerospeech2019,
        (Option("parts", list, None, "comma-separated parts of unit,voice,test; None: all three"),)),
}


def get_corpus(name: str) -> Corpus:
    """The registered :class:`Corpus` called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return CORPORA[name]
    except KeyError:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(sorted(CORPORA))}") from None


__all__ = [
    "CORPORA", "Corpus", "Option", "get_corpus",
    "prepare_timit", "prepare_fsdd", "prepare_msc_malayalam", "prepare_hindi_noa", "prepare_mini", "prepare_ljspeech",
    "download_timit", "download_fsdd", "download_msc_malayalam", "download_hindi_noa", "download_mini",
    "download_ljspeech", "prepare_vctk", "download_vctk", "prepare_commonvoice", "download_commonvoice",
    "prepare_mucs_corpus", "download_mucs", "prepare_zerospeech2019_corpus", "download_zerospeech2019",
]
