"""speechkit-vocode on a log-mel feature dir: Griffin-Lim copy synthesis (the tacotron2 syntheses' vocoder),
its length, its spectral fidelity against the input log-mel, the copied tables, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import yaml

from speechkit.bin.vocode import main
from speechkit.decode.vocode import vocode_feature_dir
from speechkit.features.frontends import build_frontend
from speechkit.features.io import ark_scp_writer
from speechkit.utils.fileio import DataError, read_table, write_table

CONF = {"type": "logmel", "sample_rate": 16000, "n_fft": 512, "hop_length": 128, "n_mels": 40}


def _tone(f0: float, seconds: float, sr: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))).astype(np.float32)


@pytest.fixture
def feats_dir(tmp_path):
    fe = build_frontend(dict(CONF))
    d = tmp_path / "feats"
    d.mkdir()
    wavs = {"s1-u1": _tone(150.0, 0.6), "s2-u1": _tone(230.0, 0.4)}
    mels = {u: fe(w) for u, w in wavs.items()}
    with ark_scp_writer(d / "feats.ark", d / "feats.scp") as w:
        for u in sorted(mels):
            w(u, mels[u])
    write_table(d / "utt2spk", {u: u.split("-")[0] for u in wavs})
    write_table(d / "text", {u: "a b" for u in wavs})
    (d / "feats.yaml").write_text(yaml.safe_dump(CONF))
    return d, mels, fe


def test_griffin_lim_copy_synthesis(feats_dir, tmp_path):
    d, mels, fe = feats_dir
    assert main([str(d), str(tmp_path / "out"), "--griffin-lim-iters", "32"]) == 0
    out = tmp_path / "out"
    scp = read_table(out / "wav.scp")
    assert sorted(scp) == sorted(mels)
    assert read_table(out / "utt2spk") == {"s1-u1": "s1", "s2-u1": "s2"}
    assert read_table(out / "spk2utt") == {"s1": "s1-u1", "s2": "s2-u1"}
    for u, m in mels.items():
        wav, sr = sf.read(scp[u], dtype="float32")
        assert sr == 16000 and len(wav) == CONF["hop_length"] * (len(m) - 1)  # mel_to_waveform's length
        # the vocoded audio's log-mel is close to the input's (Griffin-Lim of a harmonic tone)
        m2 = fe(wav)[: len(m)]
        mask = m > m.max() - 6  # bands within 6 nats of the peak (the partials)
        err = np.abs(m2[1:-1] - m[: len(m2)][1:-1])[mask[1:len(m2) - 1]]
        assert np.median(err) < 0.5, np.median(err)


def test_bad_input(feats_dir, tmp_path):
    d, _, _ = feats_dir
    (d / "feats.yaml").write_text(yaml.safe_dump({**CONF, "type": "mfcc"}))
    with pytest.raises(DataError, match="neither WORLD nor log-mel"):
        vocode_feature_dir(d, tmp_path / "o1")
    (d / "feats.yaml").write_text(yaml.safe_dump({**CONF, "n_mels": 20}))  # wrong width
    with pytest.raises(DataError, match="utterance 's1-u1'.*must be \\(frames, 20\\)"):
        vocode_feature_dir(d, tmp_path / "o2")
    assert main([str(d), str(tmp_path / "o3"), "--griffin-lim-iters", "0"]) == 1


def _tree(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_out_dir_onto_the_feature_dir_is_refused_before_any_work(feats_dir, capsys):
    """Issue 23 item 5: `speechkit-vocode D D` vocoded everything, then failed on 'are the same
    file', leaving wav/ in the feature dir."""
    d, _, _ = feats_dir
    before = _tree(d)
    assert main([str(d), str(d)]) == 1
    assert f"speechkit-vocode: error: OUT_DIR {d} is FEATS_DIR {d}" in capsys.readouterr().err
    assert main([str(d), str(d / "world")]) == 1
    assert f"OUT_DIR {d / 'world'} lies inside FEATS_DIR {d}" in capsys.readouterr().err
    assert _tree(d) == before


def test_a_rerun_replaces_the_output_whole(feats_dir, tmp_path):
    """A re-run on fewer utterances leaves none of the earlier wavs in OUT_DIR (derived data: no
    backup kept), and wav.scp names the wavs where they are after the swap."""
    d, _, _ = feats_dir
    out = tmp_path / "out"
    assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 0
    write_table(d / "feats.scp", {"s1-u1": read_table(d / "feats.scp")["s1-u1"]})
    assert main([str(d), str(out), "--griffin-lim-iters", "2", "--nj", "2"]) == 0
    assert sorted(p.name for p in (out / "wav").iterdir()) == ["s1-u1.wav"]
    assert read_table(out / "wav.scp") == {"s1-u1": str(out / "wav" / "s1-u1.wav")}
    assert not (out / ".backup").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feats", "out"]


@pytest.mark.parametrize("text, message", [
    ("garbage\n", "feats.yaml: top level must be a mapping of keys to values, got str"),
    ("type: world\nsample_rate: abc\n", "feats.yaml: key 'sample_rate' must be an integer, got str ('abc')"),
    ("sample_rate: abc\n", "feats.yaml: key 'sample_rate': expected a positive integer (Hz), got 'abc'"),
    ("type: world\nmcep_dim: [1\n", "feats.yaml:3:1: invalid YAML"),
])
def test_a_bad_feats_yaml_is_an_error_naming_the_file_and_key(feats_dir, tmp_path, capsys, text, message):
    d, _, _ = feats_dir
    (d / "feats.yaml").write_text(text)
    assert main([str(d), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_folder_no_vocode_run_wrote_is_kept_not_deleted(feats_dir, tmp_path):
    """OUT_DIR naming a user's folder by mistake: its files end up in OUT_DIR/.backup/1, never deleted;
    the next run (its own output now) replaces the output without another backup."""
    d, _, _ = feats_dir
    out = tmp_path / "mywork"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("precious")
    assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 0
    assert (out / ".backup" / "1" / "notes.txt").read_text() == "precious"
    assert (out / ".backup" / "1" / "sub").is_dir() and (out / "wav.scp").is_file()
    assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 0
    assert sorted(p.name for p in (out / ".backup").iterdir()) == ["1"]


def test_a_failing_rerun_leaves_the_previous_output(feats_dir, tmp_path, monkeypatch):
    """A run that dies after its first wav (here an error; a kill -9 leaves the same) must not
    leave the previous wav.scp next to a mixture of old and new wavs."""
    import speechkit.decode.vocode as vocode_mod

    d, _, _ = feats_dir
    out = tmp_path / "out"
    assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 0
    before = _tree(out)
    real, calls = vocode_mod.griffin_lim_vocode, []

    def dies_on_the_second(*a, **k):
        calls.append(a[0])
        if len(calls) == 2:
            raise DataError(f"utterance '{a[0]}': killed")
        return real(*a, **k)

    monkeypatch.setattr(vocode_mod, "griffin_lim_vocode", dies_on_the_second)
    assert main([str(d), str(out), "--griffin-lim-iters", "5"]) == 1
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feats", "out"]


def test_negative_spectrograms_is_rejected_by_name(feats_dir, tmp_path, capsys):
    d, _, _ = feats_dir
    assert main([str(d), str(tmp_path / "out"), "--spectrograms", "-1"]) == 1
    assert "--spectrograms must be >= 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_utterance_too_short_for_a_spectrogram_gets_its_wav_and_a_warning(feats_dir, tmp_path, capsys):
    """Issue 23 item 17: a wav shorter than the 25 ms window failed with 'noverlap must be less than
    nperseg.' naming no utterance, wav/ half written. Its wav is still written; its PNG is skipped
    with a warning naming it."""
    d, mels, _ = feats_dir
    with ark_scp_writer(d / "feats.ark", d / "feats.scp") as w:
        w("s1-u1", mels["s1-u1"])
        w("s2-u1", mels["s2-u1"][:2])  # 2 frames -> 128 samples < 400
    out = tmp_path / "out"
    assert main([str(d), str(out), "--spectrograms", "2", "--griffin-lim-iters", "2"]) == 0
    err = capsys.readouterr().err
    assert "no spectrogram PNG for 1 utterance(s) shorter than the 25 ms analysis window: s2-u1" in err
    assert sorted(p.name for p in (out / "wav").iterdir()) == ["s1-u1.png", "s1-u1.wav", "s2-u1.wav"]


@pytest.mark.parametrize("bad", ["../escaped", "/abs/victim", "..", "a/b"])
def test_an_utterance_id_that_would_leave_out_dir_is_refused(feats_dir, tmp_path, capsys, bad):
    """An id is a file name in OUT_DIR/wav: an absolute or ../ id wrote over files outside the output (e.g.
    the input audio) with exit 0."""
    d, _, _ = feats_dir
    scp = read_table(d / "feats.scp")
    scp[bad] = scp.pop("s2-u1")
    write_table(d / "feats.scp", scp)
    assert main([str(d), str(tmp_path / "out"), "--griffin-lim-iters", "2"]) == 1
    assert f"utterance id {bad!r} cannot be a file name of the output" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feats"]  # no out, nothing beside it


def test_a_full_disk_or_an_immutable_out_dir_is_one_line_naming_the_path(feats_dir, tmp_path, monkeypatch, capsys):
    """Issue 38 case 18: on a full disk vocode printed five soundfile tracebacks (its cffi write callback) before
    an AssertionError traceback; with an immutable OUT_DIR the error named an internal temporary path
    (OUT/../.out.old-PID-x) and the .out.tmp-*/.out.old-* dirs were left behind. Now one line naming OUT's own
    path, nothing left beside OUT, the previous output kept."""
    import errno
    import os

    from speechkit.utils import fileio, outputs

    d, mels, _ = feats_dir
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep\n")
    real_fdopen, real_replace = os.fdopen, os.replace

    class Full:  # a file on a full disk: write raises ENOSPC naming no file, as the OS does
        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(fileio.os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
        assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"speechkit-vocode: error: cannot write {out}/wav/s1-u1.wav: "
                                        "No space left on device"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feats", "out"]
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]

    def immutable(src, dst, *a, **k):  # chattr +i OUT: it cannot be renamed (root is not stopped by chmod)
        if os.path.abspath(src) == str(out):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src), None, str(dst))
        return real_replace(src, dst, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(outputs, "exchange_paths", lambda a, b: False)
        m.setattr(outputs.os, "replace", immutable)
        for _ in range(2):
            assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 1
            assert capsys.readouterr().err.strip().splitlines()[-1] == (
                f"speechkit-vocode: error: cannot write {out}: Operation not permitted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feats", "out"]
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert main([str(d), str(out), "--griffin-lim-iters", "2"]) == 0  # once writable, the run goes through
    assert (out / ".backup" / "1" / "mine.txt").read_text() == "keep\n"
