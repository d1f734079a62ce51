"""Mozilla Common Voice (https://commonvoice.mozilla.org), or any corpus in its layout.

Layout: a locale folder ``<corpus>/validated.tsv`` + ``<corpus>/clips/<path>``, or a release root
``<corpus>/<locale>/validated.tsv`` + ``<corpus>/<locale>/clips/<path>`` (every locale folder, or
``locales``). The table is tab-separated with a header line; the columns read are ``client_id``,
``path`` and ``sentence`` (required), ``locale`` and ``gender`` (when present); others are ignored,
in any order. No quoting: a field ends at the next tab (Common Voice's own loaders read it so).
Clips are MP3 in the releases, any format libsndfile reads (WAV, FLAC, ...) otherwise.

* Speaker: ``client_id``'s first :data:`SPEAKER_CHARS` characters (the whole id for the clients
  that share those), characters other than ``[A-Za-z0-9-]`` replaced by ``-``.
* Utterance: ``<speaker>_<clip file name without its extension>``.
* ``text``: ``sentence`` normalised as every preparer does (``don't`` becomes ``dont``).
* ``utt2lang``: the ``locale`` column's language subtag, lowercased (``en``, ``zh-CN`` -> ``zh``);
  without the column, ``lang`` or else the locale folder's name when it looks like a locale code;
  without any, no ``utt2lang``.
* ``spk2gender``: ``m``/``f`` from ``gender`` (``male``, ``male_masculine``, ``female``, ...) when
  every speaker has one (Kaldi's rule); else none.
* Rows without a sentence, with fewer fields than the header, repeated clips, and missing, empty or
  undecodable clips are counted, reported and skipped.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, add_probed, check_sample_rate, finish, normalize_text, read_metadata_lines,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError

URL = "https://commonvoice.mozilla.org/datasets"
#: Characters of ``client_id`` (a 128-hex-digit hash in the releases) kept as the speaker id.
SPEAKER_CHARS = 12
REQUIRED = ("client_id", "path", "sentence")
REASONS = AUDIO_REASONS + ("malformed", "no-text", "duplicate")
_LOCALE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]+)*$")
_NOT_ID = re.compile(r"[^A-Za-z0-9-]")


def download_commonvoice(target_dir: str | os.PathLike) -> None:
    """Not automated: Common Voice is downloaded by hand after accepting its terms.

    Get a locale's archive from https://commonvoice.mozilla.org/datasets and unpack it so that
    ``target_dir/<locale>/validated.tsv`` and ``clips/`` exist.

    Raises:
        NotImplementedError: always, with these instructions.
    """
    raise NotImplementedError(f"download a Common Voice locale from {URL} (after accepting its terms) and "
                              f"unpack it into {target_dir}")


def _locale_folders(root: Path, table: str, locales: list[str] | None) -> list[Path]:
    if (root / table).is_file() and not locales:
        return [root]
    found = {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and (p / table).is_file()} \
        if root.is_dir() else {}
    if not found:
        raise FileNotFoundError(f"{root}: no {table} (Common Voice layout: {table} and clips/ in the folder or in "
                                f"each locale folder under it)")
    missing = [loc for loc in locales or () if loc not in found]
    if missing:
        raise naming_parameters(DataError(f"`locales`: '{missing[0]}' has no {table} under {root} (found: "
                                          f"{', '.join(found)})"))
    return [found[loc] for loc in locales] if locales else list(found.values())


def _language(locale: str) -> str:
    return locale.split("-", 1)[0].lower()


def _gender(value: str) -> str | None:
    value = value.strip().lower()
    return "f" if value.startswith("female") else "m" if value.startswith("male") else None


def prepare_commonvoice(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                        keep_punctuation: bool = False, table: str = "validated.tsv",
                        locales: list[str] | None = None, lang: str | None = None) -> DataDir:
    """Prepare a Common Voice locale folder (or several of a release root) as one Kaldi data directory.

    Args:
        corpus_dir: a locale folder (``validated.tsv``, ``clips/``) or a release root holding locale folders.
        out_dir: data directory to write.
        sample_rate: resample to this rate (Hz) in ``wav.scp``: a ``sox`` pipe, or for MP3 and Opus
            (which Debian's sox cannot read) a ``speechkit-resample`` pipe, also at the native rate.
        keep_punctuation: keep the sentences' punctuation and case.
        table: the table read in each locale folder (``validated.tsv``, ``train.tsv``, ``dev.tsv``, ...).
        locales: the locale folders of a release root to read (default: every one with ``table``).
        lang: ``utt2lang`` of the rows of a table without a ``locale`` column.

    Raises:
        FileNotFoundError: no ``table`` in ``corpus_dir`` nor in a folder under it.
        DataError: a table without a header naming ``client_id``, ``path`` and ``sentence``
            (file:1); non-UTF-8 text (file:line); an unknown locale; no usable utterance.
        ValueError: a bad ``sample_rate``.
    """
    check_sample_rate(sample_rate)
    root = Path(corpus_dir)
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("rows", corpus="commonvoice")
    rows: list[tuple[Path, int, dict[str, str]]] = []
    n_rows = 0
    for folder in _locale_folders(root, table, locales):
        path = folder / table
        lines = read_metadata_lines(path)
        header = lines[0].split("\t") if lines else []
        absent = [c for c in REQUIRED if c not in header]
        if absent:
            raise DataError(f"{path}:1: the header names no {', '.join(absent)} column (found: {' '.join(header)})")
        folder_lang = lang or (folder.name if _LOCALE.match(folder.name) else None)
        for lineno, line in enumerate(lines[1:], 2):
            fields = line.split("\t")
            if not line.strip():
                continue
            n_rows += 1
            if len(fields) < len(header):
                skips.skip("malformed", f"{path}:{lineno}: {len(fields)} fields, the header has {len(header)}")
                continue
            row = dict(zip(header, fields))
            if not row.get("locale", "").strip():
                row["locale"] = folder_lang or ""
            rows.append((folder, lineno, row))
    # speakers: a prefix of the client id, the whole id for clients that share it
    clients = {r["client_id"].strip() for _, _, r in rows}
    prefixes: dict[str, set[str]] = {}
    for c in clients:
        prefixes.setdefault(c[:SPEAKER_CHARS], set()).add(c)
    speaker = {c: _NOT_ID.sub("-", c if len(prefixes[c[:SPEAKER_CHARS]]) > 1 else c[:SPEAKER_CHARS])
               for c in clients}
    genders: dict[str, str | None] = {}
    for folder, lineno, row in rows:
        where = f"{folder / table}:{lineno}"
        client, clip = row["client_id"].strip(), row["path"].strip()
        if not client or not clip:
            skips.skip("malformed", f"{where}: empty client_id or path")
            continue
        spk = speaker[client]
        utt = f"{spk}_{Path(clip).stem}"
        text = normalize_text(row["sentence"], keep_punctuation)
        if not text:
            skips.skip("no-text", f"{where}: clip '{clip}' has no sentence")
            continue
        if utt in d.utt2spk:
            skips.skip("duplicate", f"{where}: clip '{clip}' listed again")
            continue
        if not add_probed(d, utt, folder / "clips" / clip, text, spk, skips, sample_rate):
            continue
        if row["locale"].strip():
            d.utt2lang[utt] = _language(row["locale"].strip())
        g = _gender(row.get("gender", ""))
        genders[spk] = g if genders.get(spk, g) == g else None  # a speaker's rows disagree: unknown
    skips.summary(n_rows, REASONS)
    if d.utt2lang and len(d.utt2lang) < len(d.utt2spk):
        unknown = sorted(set(d.utt2spk) - set(d.utt2lang))
        raise naming_parameters(DataError(f"{root}: no locale for {len(unknown)} utterance(s), e.g. '{unknown[0]}' "
                                          "(give `lang`, or a locale column in every table)"))
    if not d.utt2lang:
        d.utt2lang = None
    spk2gender = {s: g for s, g in genders.items() if g is not None}
    return finish(d, out_dir, spk2gender=spk2gender, corpus="commonvoice")


__all__ = ["SPEAKER_CHARS", "download_commonvoice", "prepare_commonvoice"]
