"""--log-file is an output like any other (issue 38 case 3): every CLI that has one refuses, before it opens it
and before any work, a log file that is a table of the data dir it reads, a file those tables read (an ark of
feats.scp, an audio file of wav.scp), or an input file; the file is left as it was (score-mcd, score-abx,
score-bitrate and split-corpus: test_scoring_outputs)."""
from __future__ import annotations

import importlib

import pytest


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (tmp_path / "arks").mkdir()
    (tmp_path / "arks" / "raw.ark").write_bytes(b"not read")
    (tmp_path / "a.wav").write_bytes(b"RIFF")
    (d / "wav.scp").write_text(f"s_1 {tmp_path / 'a.wav'}\n")
    (d / "text").write_text("s_1 a b\n")
    (d / "utt2spk").write_text("s_1 s\n")
    (d / "spk2utt").write_text("s s_1\n")
    (d / "feats.scp").write_text(f"s_1 {tmp_path / 'arks' / 'raw.ark'}:4\n")
    (tmp_path / "ali").write_text("s_1 0.0 0.1 a\n")
    (tmp_path / "codes").write_text("s_1 1 2\n")
    return d


def _resolver(data, tmp_path):
    """``path(a)``: an argv entry with its leading ``DATA``, ``OUT`` or ``T`` replaced by the data dir, the
    output ``<tmp>/out`` or the tmp dir; anything else as it is."""
    def path(a):
        for k, v in (("DATA", data), ("OUT", tmp_path / "out"), ("T", tmp_path)):
            if a == k or a.startswith(k + "/"):
                return str(v) + a[len(k):]
        return a

    return path


def _contents(tmp_path):
    """Every file under ``tmp_path`` with its bytes (the test's before/after snapshot)."""
    return {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}


CASES = [  # module, argv (DATA, OUT, T = the tmp dir), the log files it refuses
    ("embed_speakers", ["DATA", "OUT"], ["DATA/text", "DATA/wav.scp", "T/a.wav"]),
    ("g2p", ["DATA", "OUT"], ["DATA/text", "T/arks/raw.ark"]),
    ("vocode", ["DATA", "OUT"], ["DATA/feats.scp", "T/arks/raw.ark"]),
    ("make_labels", ["DATA", "T/ali", "OUT", "--frontend-dir", "T/fe"], ["T/ali", "DATA/utt2spk"]),
    ("extract_units", ["--model-dir", "T/exp", "DATA", "OUT"], ["DATA/text", "T/arks/raw.ark"]),
    ("align", ["DATA", "OUT"], ["DATA/text", "T/a.wav", "OUT/phone_alignments"]),
    ("tts_synthesize", ["--model-dir", "T/exp", "DATA", "OUT"], ["DATA/utt2spk"]),
    ("resynthesize", ["--inverter-dir", "T/exp", "--codes", "T/codes", "--out-dir", "OUT"], ["T/codes"]),
    ("prepare_corpus", ["mini", "T/corpus", "OUT"], ["DATA/text"]),
]


@pytest.mark.parametrize("module, argv, logs", CASES, ids=[c[0] for c in CASES])
def test_a_log_file_onto_what_is_read_is_refused(module, argv, logs, data, tmp_path, capsys):
    main = importlib.import_module(f"speechkit.bin.{module}").main
    path = _resolver(data, tmp_path)
    before = _contents(tmp_path)
    for log in logs:
        assert main([path(a) for a in argv] + ["--log-file", path(log)]) == 1, log
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: --log-file {path(log)} " in err, err
    assert _contents(tmp_path) == before
    assert not (tmp_path / "out").exists()


INSIDE_OUT = [  # module, argv, a log file inside what the tool writes
    ("vocode", ["DATA", "OUT"], "OUT/vocode.log"),             # written whole: the log went into OUT/.backup/1,
    ("embed_speakers", ["DATA", "OUT"], "OUT/embed.log"),      # or was deleted with an earlier output of the tool
    ("make_labels", ["DATA", "T/ali", "OUT", "--frontend-dir", "T/fe"], "OUT/labels.log"),
    ("extract_units", ["--model-dir", "T/exp", "DATA", "OUT"], "OUT/log/units.log"),
    ("tts_synthesize", ["--model-dir", "T/exp", "DATA", "OUT"], "OUT/synth.log"),
    ("resynthesize", ["--inverter-dir", "T/exp", "--codes", "T/codes", "--out-dir", "OUT"], "OUT/resynth.log"),
    ("split_corpus", ["DATA", "OUT", "--dev", "0.3", "--test", "0.3"], "OUT/train/text"),  # a table of a part:
    ("prepare_corpus", ["mini", "T/corpus", "OUT"], "OUT/text"),  # the log replaced by the transcripts, exit 0
    ("g2p", ["DATA", "OUT"], "OUT/utt2spk"),
]


@pytest.mark.parametrize("module, argv, log", INSIDE_OUT, ids=[c[0] for c in INSIDE_OUT])
def test_a_log_file_inside_what_the_tool_writes_is_refused(module, argv, log, data, tmp_path, capsys):
    main = importlib.import_module(f"speechkit.bin.{module}").main
    path = _resolver(data, tmp_path)
    before = _contents(tmp_path)
    assert main([path(a) for a in argv] + ["--log-file", path(log)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: --log-file {path(log)} " in err and ("written whole" in err or "would be replaced by" in err), err
    assert _contents(tmp_path) == before
    assert not (tmp_path / "out").exists()


def test_a_log_file_that_cannot_be_written_is_said_once(tmp_path, capsys):
    """On a full disk every log record printed logging's 'Logging error' traceback (27 stderr lines for one
    score-abx run, exit 0): now one line naming the file; the log goes on on stderr."""
    import errno
    import logging

    from speechkit.utils.cli import setup_logging

    class Full:
        def write(self, s):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    log = tmp_path / "run.log"
    setup_logging(log)
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "baseFilename", None) == str(log))
    handler.stream = Full()
    for i in range(3):
        logging.getLogger("x").info("record %d", i)
    err = capsys.readouterr().err.splitlines()
    assert [ln for ln in err if "record" not in ln] == [
        f"WARNING: cannot write --log-file {log}: No space left on device; the log goes on on stderr only"]
    assert sum("record" in ln for ln in err) == 3
    logging.getLogger().handlers.clear()
