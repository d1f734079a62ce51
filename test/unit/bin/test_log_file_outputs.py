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

    def path(a):
        for k, v in (("DATA", data), ("OUT", tmp_path / "out"), ("T", tmp_path)):
            if a == k or a.startswith(k + "/"):
                return str(v) + a[len(k):]
        return a

    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    for log in logs:
        assert main([path(a) for a in argv] + ["--log-file", path(log)]) == 1, log
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: --log-file {path(log)} " in err, err
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before
    assert not (tmp_path / "out").exists()
