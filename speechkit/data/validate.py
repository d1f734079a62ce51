"""Checking a Kaldi-format data directory, as Kaldi's ``utils/validate_data_dir.sh`` does.

:func:`validate` (``speechkit-validate-data-dir``) reads the raw files of a data dir (or an
in-memory :class:`~speechkit.data.datadir.DataDir`, as it would be written) and returns one line
per problem; :mod:`speechkit.data.fix` repairs what can be repaired (``fix_data_dir.sh``). The
``feats.scp`` entries of arks written by ``speechkit-compute-feats`` are checked against their
manifests by :func:`speechkit.data.feats_manifest.check_feats_scp`.
"""
from __future__ import annotations

import os
from pathlib import Path

from speechkit.data.datadir import GLOBAL_CMVN, PHONE_ALIGNMENTS, TABLES, DataDir, _render_utt_lines, c_sorted
from speechkit.utils.fileio import DataError

# kaldiio, data.audio and data.feats_manifest (numpy, soundfile) are imported where used: the checks that open no
# audio or features run without numpy.

#: Kaldi's other optional files that its validate_data_dir.sh checks (keyed by utterance / recording).
KALDI_OPTIONAL = ("utt2uniq", "reco2dur")
#: Words Kaldi's validate_data_dir.sh refuses in ``text`` (they are reserved in the lexicon / LM).
RESERVED_WORDS = ("<s>", "</s>", "#0")
#: Per-file cap on reported problems (a 100k-line unsorted file gives one line, not 100k).
MAX_PROBLEMS_PER_FILE = 20
_PER_UTT = ("text", "utt2lang", "utt2dur", "feats.scp", "utt2num_frames")
#: The UTF-8 byte-order mark, as bytes.
BOM_BYTES = b"\xef\xbb\xbf"
#: The problem reported for a table that starts with one (fix_data_dir logs it as a warning).
BOM_PROBLEM = ("starts with a UTF-8 byte-order mark (U+FEFF), not part of the first id: speechkit's readers drop "
               "it with a warning, Kaldi's shell tools read it as part of the id (speechkit-fix-data-dir removes "
               "it, or: sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)")


def _strip_bom(label: str, data: bytes, report: "_Report") -> bytes:
    """``data`` without a byte-order mark at its start, which is reported (:data:`BOM_PROBLEM`), as
    :func:`speechkit.utils.fileio.read_lines` drops it with a warning naming the file: the rest of
    the file is then checked as every reader sees it (not as 14 problems of one id)."""
    if data.startswith(BOM_BYTES):
        report.add(label, 1, BOM_PROBLEM)
        return data[len(BOM_BYTES):]
    return data


class _Report:
    """Collects ``<file>:<line>: <message>`` lines, at most MAX_PROBLEMS_PER_FILE per file."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count: dict[str, int] = {}

    def add(self, label: str, lineno: int | None, msg: str) -> None:
        n = self.count[label] = self.count.get(label, 0) + 1
        if n <= MAX_PROBLEMS_PER_FILE:
            self.lines.append(f"{label}:{lineno}: {msg}" if lineno else f"{label}: {msg}")

    def result(self) -> list[str]:
        more = [f"{label}: ... and {n - MAX_PROBLEMS_PER_FILE} more problems in this file"
                for label, n in self.count.items() if n > MAX_PROBLEMS_PER_FILE]
        return self.lines + more


def _scan(label: str, data: bytes, report: _Report, allow_empty_value: bool = False
          ) -> dict[str, tuple[int, str]]:
    """Parse raw table bytes, reporting every format problem; returns id -> (line, value).

    Checks: trailing newline, empty lines, carriage returns, UTF-8, leading whitespace, ids
    unique and in C-locale order, a value after the id, no byte-order mark (one starting the file
    is reported once and dropped, as every reader drops it; one starting a later id is reported).
    Duplicates keep their first line.
    """
    out: dict[str, tuple[int, str]] = {}
    data = _strip_bom(label, data, report)
    if not data:
        return out
    no_final_newline = not data.endswith(b"\n")
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:  # slow path: find the bad lines
        lines = []
        for lineno, raw in enumerate(data.split(b"\n"), 1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                report.add(label, lineno, f"not valid UTF-8 ({e.reason} at byte {e.start} of the line)")
                lines.append(raw.decode("utf-8", "replace"))
    if not no_final_newline:
        lines.pop()
    # (code-point order of str == byte order of their UTF-8 encoding == LC_ALL=C order)
    prev: str | None = None
    unsorted = 0
    for lineno, line in enumerate(lines, 1):
        if "\r" in line:
            report.add(label, lineno, "carriage return in line (DOS line endings?)")
            line = line.replace("\r", "")
        parts = line.split(maxsplit=1)
        if not parts:
            report.add(label, lineno, "empty line")
            continue
        if line[0].isspace():
            report.add(label, lineno, "line starts with whitespace")
        key = parts[0]
        if key.startswith("\ufeff"):
            report.add(label, lineno, f"id {key!r} starts with a UTF-8 byte-order mark (U+FEFF; files "
                       "concatenated with their marks?); remove it")
        value = parts[1].rstrip() if len(parts) > 1 else ""
        if not value and not allow_empty_value:
            report.add(label, lineno, f"id '{key}' has no value")
        if key in out:
            report.add(label, lineno, f"duplicate id '{key}' (first on line {out[key][0]})")
            continue
        if prev is not None and key < prev:
            unsorted += 1
            if unsorted == 1:
                report.add(label, lineno, f"not sorted in C-locale order: '{key}' after '{prev}' "
                           "(sort with LC_ALL=C, or run fix_data_dir.sh)")
        if prev is None or key > prev:
            prev = key
        out[key] = (lineno, value)
    if no_final_newline:
        report.add(label, len(lines), "no newline at end of file")
    return out


def _compare_ids(report: _Report, a_label: str, a: dict, b_label: str, b: dict, what: str = "utterance") -> None:
    """Report ids of ``a`` missing from ``b`` (at their ``a`` line) and vice versa."""
    for k, (ln, _) in a.items():
        if k not in b:
            report.add(a_label, ln, f"{what} '{k}' has no entry in {Path(b_label).name}")
    for k, (ln, _) in b.items():
        if k not in a:
            report.add(b_label, ln, f"{what} '{k}' is not in {Path(a_label).name}")


def validate(d_or_path: "DataDir | str | os.PathLike", no_feats: bool = False, no_text: bool = False,
             no_wav: bool = False, no_spk_sort: bool = False, check_audio: bool = False,
             expected_sr: int | None = None) -> list[str]:
    """Check a data directory the way Kaldi's ``utils/validate_data_dir.sh`` does.

    Works on the raw files (so it can report line numbers, sort order, duplicates, missing final
    newlines, non-UTF-8 bytes) and keeps going after a bad file. An in-memory :class:`DataDir` is
    checked as it would be written (its tables, rendered).

    Checks: every file sorted (C locale), unique ids, ends with a newline, no empty lines, valid
    UTF-8; ``utt2spk`` present and non-empty; ``spk2utt`` present and consistent with ``utt2spk``;
    speaker ids are prefixes of utterance ids and ``utt2spk`` sorts the same by speaker as by
    utterance (skipped with ``no_spk_sort``, Kaldi's ``--no-spk-sort``); ``text`` ids == ``utt2spk``
    ids (unless ``no_text``); ``wav.scp`` present (unless ``no_wav``) with exactly the recordings
    used; ``segments`` lines with 4 fields, ``end > start >= 0`` and recordings in ``wav.scp``;
    ``utt2lang``/``utt2dur`` covering the utterances (durations positive); ``feats.scp`` present
    and ``utt2num_frames`` covering the same utterances with positive integer counts (unless
    ``no_feats``), each entry pointing at an ark that exists and, for arks written by
    ``speechkit-compute-feats``, holds that utterance at that offset for this data dir and is
    not stale (:func:`speechkit.data.feats_manifest.check_feats_scp`); ``cmvn.scp`` keyed by exactly
    the speakers (a ``global`` key is an error: global stats go in ``cmvn_global.ark``);
    ``spk2gender`` keyed by exactly the speakers, values ``m``/``f``; ``utt2uniq`` covering the
    utterances, ``reco2dur`` the recordings (positive); ``phone_alignments`` sorted, 4 fields,
    ``end >= start``, of utterances in ``utt2spk``; no ``<s>``, ``</s>``, ``#0`` word in ``text``.

    With ``check_audio`` (not in Kaldi) every ``wav.scp`` entry is also opened (commands are run)
    with :func:`speechkit.data.audio.probe_audio`: missing, empty, truncated or non-audio files,
    a sample rate other than ``expected_sr``, and segments ending past the audio are reported.

    Returns:
        One ``"<file>:<line>: <message>"`` (or ``"<file>: <message>"``) string per problem,
        empty if the directory is valid. At most :data:`MAX_PROBLEMS_PER_FILE` per file, plus a
        count of the rest.
    """
    report = _Report()
    files: dict[str, bytes | None] = {}
    if isinstance(d_or_path, DataDir):
        base = str(d_or_path.path) if d_or_path.path is not None else "<DataDir>"
        for fname, table in d_or_path.tables().items():
            files[fname] = "".join(f"{k} {v}\n" if v != "" else f"{k}\n"
                                   for k, v in ((k, table[k]) for k in c_sorted(table))).encode("utf-8")
        if d_or_path.phone_alignments is not None:
            files[PHONE_ALIGNMENTS] = _render_utt_lines(d_or_path.phone_alignments).encode("utf-8")
    else:
        base = str(d_or_path)
        p = Path(d_or_path)
        if not p.is_dir():
            return [f"{base}: no such data directory"]
        for fname in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *KALDI_OPTIONAL):
            f = p / fname
            if f.is_file():
                try:
                    files[fname] = f.read_bytes()
                except OSError as e:
                    report.add(f"{base}/{fname}", None, f"cannot read ({e.strerror})")
            elif f.exists():
                report.add(f"{base}/{fname}", None, "is not a regular file")

    def lab(fname: str) -> str:
        return f"{base}/{fname}"

    tabs: dict[str, dict[str, tuple[int, str]]] = {}
    ali_ids: dict[str, int] | None = None
    for fname, data in files.items():
        if data is not None:
            if fname == PHONE_ALIGNMENTS:
                ali_ids = _scan_alignments(lab(fname), data, report)
            else:
                tabs[fname] = _scan(lab(fname), data, report, allow_empty_value=(fname == "text"))
            if not data.removeprefix(BOM_BYTES):
                report.add(lab(fname), None, "file is empty")

    # -------------------------------------------------- utt2spk / spk2utt
    u2s = tabs.get("utt2spk")
    if u2s is None:
        report.add(lab("utt2spk"), None, "missing (every data directory needs one)")
        return report.result()
    spk2utt: dict[str, list[str]] = {}
    for utt, (ln, spk) in u2s.items():
        if len(spk.split()) != 1:
            report.add(lab("utt2spk"), ln, f"speaker of '{utt}' must be one id, got {spk!r}")
            continue
        spk2utt.setdefault(spk, []).append(utt)
        if not no_spk_sort and not utt.startswith(spk):
            report.add(lab("utt2spk"), ln, f"speaker id '{spk}' is not a prefix of utterance id '{utt}' "
                       "(Kaldi needs speaker-id prefixes so that files sort the same by speaker and "
                       "by utterance; --no-spk-sort skips this check)")
    if not no_spk_sort:
        by_utt = c_sorted(k for k, (_, v) in u2s.items() if len(v.split()) == 1)
        by_spk = sorted(by_utt, key=lambda u: (u2s[u][1], u))
        for a, b in zip(by_utt, by_spk):
            if a != b:
                report.add(lab("utt2spk"), u2s[a][0], f"not in the same order when sorted by speaker as by "
                           f"utterance (first difference: '{a}' vs '{b}'); make speaker ids prefixes of "
                           "utterance ids")
                break
    s2u = tabs.get("spk2utt")
    if s2u is None:
        report.add(lab("spk2utt"), None, "missing (run utils/utt2spk_to_spk2utt.pl or fix_data_dir.sh)")
    else:
        for spk, (ln, value) in s2u.items():
            got = value.split()
            want = c_sorted(spk2utt.get(spk, []))
            if spk not in spk2utt:
                report.add(lab("spk2utt"), ln, f"speaker '{spk}' is not in utt2spk")
            elif got != want:
                missing = [u for u in want if u not in got][:3]
                extra = [u for u in got if u not in want][:3]
                detail = ("missing " + ", ".join(missing) if missing else "") + \
                         ("; " if missing and extra else "") + ("extra " + ", ".join(extra) if extra else "")
                report.add(lab("spk2utt"), ln, f"utterances of speaker '{spk}' disagree with utt2spk "
                           f"({detail or 'order differs'})")
        for spk, utts in spk2utt.items():
            if spk not in s2u:
                report.add(lab("utt2spk"), u2s[utts[0]][0], f"speaker '{spk}' has no entry in spk2utt")

    # -------------------------------------------------- text
    if not no_text:
        if "text" not in tabs:
            report.add(lab("text"), None, "missing (use --no-text if the data has no transcripts)")
        else:
            _compare_ids(report, lab("utt2spk"), u2s, lab("text"), tabs["text"])
            for utt, (ln, value) in tabs["text"].items():
                bad = [w for w in RESERVED_WORDS if w in value.split()]
                if bad:
                    report.add(lab("text"), ln, f"transcript of '{utt}' contains the reserved word '{bad[0]}' "
                               f"(Kaldi refuses {', '.join(RESERVED_WORDS)} in text)")

    # -------------------------------------------------- wav.scp / segments
    if not no_wav:
        wav = tabs.get("wav.scp")
        seg = tabs.get("segments")
        if wav is None:
            report.add(lab("wav.scp"), None, "missing (use --no-wav if the data has no audio)")
        if seg is not None:
            _compare_ids(report, lab("utt2spk"), u2s, lab("segments"), seg)
            used: dict[str, int] = {}
            for utt, (ln, value) in seg.items():
                parts = value.split()
                if len(parts) != 3:
                    report.add(lab("segments"), ln, f"'{utt}': needs 4 fields "
                               f"(<utt> <recording> <start> <end>), got {len(parts) + 1}")
                    continue
                rec = parts[0]
                used.setdefault(rec, ln)
                try:
                    start, end = float(parts[1]), float(parts[2])
                except ValueError:
                    report.add(lab("segments"), ln, f"'{utt}': start/end are not numbers: {value!r}")
                else:
                    if start < 0:
                        report.add(lab("segments"), ln, f"'{utt}': start {parts[1]} is negative")
                    if end <= start:
                        report.add(lab("segments"), ln, f"'{utt}': end {parts[2]} is not after start {parts[1]}")
                if wav is not None and rec not in wav:
                    report.add(lab("segments"), ln, f"'{utt}': recording '{rec}' is not in wav.scp")
            if wav is not None:
                for rec, (ln, _) in wav.items():
                    if rec not in used:
                        report.add(lab("wav.scp"), ln, f"recording '{rec}' is not used by any segment")
        elif wav is not None:
            _compare_ids(report, lab("utt2spk"), u2s, lab("wav.scp"), wav)

    # -------------------------------------------------- utt2lang / utt2dur
    if "utt2lang" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2lang"), tabs["utt2lang"])
        for utt, (ln, v) in tabs["utt2lang"].items():
            if len(v.split()) > 1:
                report.add(lab("utt2lang"), ln, f"language of '{utt}' must be one id, got {v!r}")
    if "utt2dur" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2dur"), tabs["utt2dur"])
        for utt, (ln, v) in tabs["utt2dur"].items():
            try:
                ok = float(v) > 0
            except ValueError:
                ok = False
            if not ok and v:
                report.add(lab("utt2dur"), ln, f"duration of '{utt}' must be a positive number of seconds, got {v!r}")

    # -------------------------------------------------- features
    if not no_feats:
        feats = tabs.get("feats.scp")
        if feats is None:
            report.add(lab("feats.scp"), None, "missing (use --no-feats before features are computed)")
        else:
            _compare_ids(report, lab("utt2spk"), u2s, lab("feats.scp"), feats)
        if "utt2num_frames" in tabs:
            nf = tabs["utt2num_frames"]
            if feats is not None:
                _compare_ids(report, lab("feats.scp"), feats, lab("utt2num_frames"), nf)
            else:
                _compare_ids(report, lab("utt2spk"), u2s, lab("utt2num_frames"), nf)
            for utt, (ln, v) in nf.items():
                if not (v.isdigit() and int(v) > 0) and v:
                    report.add(lab("utt2num_frames"), ln, f"frame count of '{utt}' must be a positive integer, got {v!r}")
        if feats is not None and not isinstance(d_or_path, DataDir):
            from speechkit.data.feats_manifest import check_feats_scp

            for ln, msg in check_feats_scp(Path(d_or_path), feats, tabs.get("utt2num_frames")):
                report.add(lab("feats.scp"), ln, msg)
    spk_tab = {s: u2s[u[0]] for s, u in spk2utt.items()}
    if "cmvn.scp" in tabs:
        cmvn = tabs["cmvn.scp"]
        if "global" in cmvn and "global" not in spk2utt:
            report.add(lab("cmvn.scp"), cmvn["global"][0], "key 'global' is not a speaker: Kaldi requires the keys "
                       f"of cmvn.scp to be exactly the speakers; global stats go in {GLOBAL_CMVN} "
                       "(re-run speechkit-compute-cmvn-stats, or speechkit-fix-data-dir to move them)")
            cmvn = {k: v for k, v in cmvn.items() if k != "global"}
        if cmvn:
            _compare_ids(report, lab("utt2spk"), spk_tab, lab("cmvn.scp"), cmvn, what="speaker")
        if not isinstance(d_or_path, DataDir):
            for ln, msg in _check_cmvn_arks(tabs["cmvn.scp"]):
                report.add(lab("cmvn.scp"), ln, msg)
    if "spk2gender" in tabs:
        _compare_ids(report, lab("utt2spk"), spk_tab, lab("spk2gender"), tabs["spk2gender"], what="speaker")
        for spk, (ln, v) in tabs["spk2gender"].items():
            if v not in ("m", "f"):
                report.add(lab("spk2gender"), ln, f"gender of '{spk}' must be m or f, got {v!r}")
    if "utt2uniq" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2uniq"), tabs["utt2uniq"])
    if "reco2dur" in tabs and "wav.scp" in tabs:
        _compare_ids(report, lab("wav.scp"), tabs["wav.scp"], lab("reco2dur"), tabs["reco2dur"], what="recording")
        for rec, (ln, v) in tabs["reco2dur"].items():
            try:
                ok = float(v) > 0
            except ValueError:
                ok = False
            if not ok:
                report.add(lab("reco2dur"), ln, f"duration of '{rec}' must be a positive number of seconds, got {v!r}")
    if ali_ids is not None:
        for utt, ln in ali_ids.items():
            if utt not in u2s:
                report.add(lab(PHONE_ALIGNMENTS), ln, f"utterance '{utt}' is not in utt2spk")
    if check_audio and not no_wav and "wav.scp" in tabs:
        _check_audio(report, lab, tabs, expected_sr)
    return report.result()


def _check_cmvn_arks(cmvn: dict[str, tuple[int, str]]) -> list[tuple[int, str]]:
    """Every ``cmvn.scp`` entry ``ARK:OFFSET`` reads a statistics matrix (not in Kaldi's script, whose
    ``validate_data_dir.sh`` only checks the keys): its ark exists (one problem per missing ark), the
    offset lies inside it, and a ``(2, dim + 1)`` matrix is read there. A ``cmvn.scp`` whose arks were moved
    or deleted (``cmvnX/`` replaced by another tool) passed validation, then failed the tool applying CMVN.
    Commands (``... |``) and ``ark:`` specifiers are not opened. Paths are as Kaldi reads them (relative
    to the current directory).

    Returns:
        ``(line, message)`` per problem.
    """
    import kaldiio

    from speechkit.data.audio import is_command

    problems: list[tuple[int, str]] = []
    missing: dict[str, list[tuple[str, int]]] = {}
    for spk, (ln, loc) in cmvn.items():
        if not loc or is_command(loc) or loc.startswith("ark:") or ":" not in loc:
            continue
        ark, off = loc.rsplit(":", 1)
        if not off.isdigit():
            continue
        if not os.path.isfile(ark):
            missing.setdefault(ark, []).append((spk, ln))
            continue
        if int(off) >= os.path.getsize(ark):
            problems.append((ln, f"'{spk}': {loc} lies past the end of {ark} ({os.path.getsize(ark)} bytes: "
                                 "cut short?); recompute the CMVN stats"))
            continue
        try:
            mat = kaldiio.load_mat(loc)
            ok = getattr(mat, "ndim", 0) == 2 and mat.shape[0] == 2 and mat.shape[1] >= 2
        except Exception:  # noqa: BLE001 - kaldiio raises many types on a bad ark
            ok = False
        if not ok:
            problems.append((ln, f"'{spk}': {loc} does not hold CMVN statistics (a 2 x (dim + 1) matrix); "
                                 "recompute the CMVN stats"))
    for ark, entries in missing.items():
        problems.append((entries[0][1], f"'{entries[0][0]}': ark {ark} does not exist ({len(entries)} entries point "
                                        "into it); recompute the CMVN stats (speechkit-compute-cmvn-stats)"))
    return sorted(problems)


def _scan_alignments(label: str, data: bytes, report: _Report) -> dict[str, int]:
    """Check ``phone_alignments`` (``<utt> <start> <end> <phone>``, grouped by utterance in C order);
    returns utt -> first line."""
    first: dict[str, int] = {}
    prev = None
    data = _strip_bom(label, data, report)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        report.add(label, data[: e.start].count(b"\n") + 1, "not valid UTF-8")
        return first
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if len(parts) != 4:
            report.add(label, lineno, f"expected '<utt> <start> <end> <phone>', got {line!r}")
            continue
        utt = parts[0]
        if prev is not None and utt != prev and (utt < prev or utt in first):
            report.add(label, lineno, f"not grouped by utterance in C-locale order: '{utt}' after '{prev}'")
        first.setdefault(utt, lineno)
        prev = utt
        try:
            start, end = float(parts[1]), float(parts[2])
        except ValueError:
            report.add(label, lineno, f"'{utt}': times are not numbers: {line!r}")
            continue
        if start < 0 or end < start:
            report.add(label, lineno, f"'{utt}': bad interval {parts[1]}-{parts[2]} s")
    return first


def _check_audio(report: _Report, lab, tabs: dict, expected_sr: int | None) -> None:
    """Open every wav.scp entry; check sample rates and that segments lie inside the audio."""
    from speechkit.data.audio import MAX_OVERSHOOT, probe_audio

    wav_label = lab("wav.scp")
    durations: dict[str, float] = {}
    for rec, (ln, spec) in tabs["wav.scp"].items():
        try:
            n, sr = probe_audio(spec, key=rec, source=wav_label)
        except DataError as e:
            report.add(wav_label, ln, str(e).removeprefix(f"{wav_label}: "))
            continue
        if expected_sr is not None and sr != expected_sr:
            report.add(wav_label, ln, f"'{rec}': has {sr} Hz, config expects {expected_sr} Hz")
        durations[rec] = n / sr
    for utt, (ln, value) in tabs.get("segments", {}).items():
        parts = value.split()
        if len(parts) == 3 and parts[0] in durations:
            try:
                end = float(parts[2])
            except ValueError:
                continue
            if end > durations[parts[0]] + MAX_OVERSHOOT:
                report.add(lab("segments"), ln, f"'{utt}': ends at {end:.3f} s, beyond the end of recording "
                           f"'{parts[0]}' ({durations[parts[0]]:.3f} s)")
