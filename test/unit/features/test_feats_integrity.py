"""Feature integrity (issue 12): no stale or foreign features taken as current, repeatable sox pipes,
no silent loss (unlisted utterances, too-short audio, stereo), --skip-bad, --nj capped, global CMVN
stats in a file of their own, non-finite frames refused."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile as sf

from speechkit.bin import compute_cmvn_stats as cmvn_cli
from speechkit.bin import compute_feats
from speechkit.data.corpora._common import wav_entry
from speechkit.data.copy_data_dir import copy_data_dir
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.features import extract
from speechkit.features.cmvn_stats import compute_cmvn_stats
from speechkit.features.extract import compute_part, merge_parts
from speechkit.features.frontends import build_frontend
from speechkit.features.io import FeatureReader, ark_scp_writer, load_global_cmvn_stats
from speechkit.utils.fileio import DataError

LOGMEL = {"type": "logmel", "n_mels": 20}


def _run(data_dir: Path, fe, feat_dir: Path, nj: int = 1) -> list[bool]:
    done = [compute_part(data_dir, fe, feat_dir, j, nj) for j in range(1, nj + 1)]
    merge_parts(data_dir, fe, feat_dir, nj)
    return done


def _load(data_dir: Path) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in kaldiio.load_scp(str(data_dir / "feats.scp")).items()}


def _conf(tmp_path: Path, conf: dict = LOGMEL) -> str:
    p = tmp_path / "fe.yaml"
    p.write_text("".join(f"{k}: {v}\n" for k, v in conf.items()))
    return str(p)


# ---------------------------------------------------------------------------------------- stale / foreign
def test_a_pipe_entry_is_fingerprinted_by_the_files_it_reads(tmp_path, make_data):
    data = make_data(tmp_path, n_per_spk=1)
    d = DataDir.load(data)
    utt = d.utts[0]
    src = Path(d.wav_scp[utt])
    d.wav_scp[utt] = f"cat {src} |"
    d.write(data)
    fe = build_frontend(LOGMEL)
    assert _run(data, fe, tmp_path / "f") == [True]
    before = _load(data)[utt]
    x, sr = sf.read(src, dtype="float32")
    sf.write(src, np.roll(x, 400)[: len(x) - 160], sr)    # another recording behind the same command
    assert _run(data, fe, tmp_path / "f") == [True]      # recomputed, not "complete and current"
    after = _load(data)[utt]
    assert after.shape[0] != before.shape[0]


def test_same_named_data_dirs_sharing_a_feat_dir_do_not_collide(tmp_path, make_data):
    a = make_data(tmp_path / "a", n_per_spk=2, speakers=("x",))
    b = make_data(tmp_path / "b", n_per_spk=3, speakers=("y",))
    fe = build_frontend(LOGMEL)
    _run(a, fe, tmp_path / "feats")
    _run(b, fe, tmp_path / "feats")
    assert validate(a, no_text=True) == [] and validate(b, no_text=True) == []
    ra = FeatureReader(a)
    assert all(ra[u].shape[0] == ra.num_frames(u) for u in ra)
    assert len(list((tmp_path / "feats").glob("*.ark"))) == 2


def test_validate_and_merge_catch_an_ark_rewritten_for_another_dir(tmp_path, make_data, monkeypatch):
    monkeypatch.setattr(extract, "data_tag", lambda data_dir: "train")   # the old naming: a/train == b/train,
    of = extract.PartPaths.of.__func__                                   # with no fingerprint in the names
    monkeypatch.setattr(extract.PartPaths, "of",
                        classmethod(lambda cls, fd, t, n, j, fp: of(cls, fd, t, n, j, "0" * 64)))
    a = make_data(tmp_path / "a", n_per_spk=2, speakers=("x",))
    b = make_data(tmp_path / "b", n_per_spk=3, speakers=("y",))
    fe = build_frontend(LOGMEL)
    _run(a, fe, tmp_path / "feats")
    _run(b, fe, tmp_path / "feats")                      # overwrites a's ark
    problems = validate(a, no_text=True)
    assert any("feats.scp" in p and str(b) in p for p in problems), problems
    with pytest.raises(DataError, match="written for"):
        merge_parts(a, fe, tmp_path / "feats", 1)


def test_validate_reports_stale_features(tmp_path, data_dir):
    fe = build_frontend(LOGMEL)
    _run(data_dir, fe, tmp_path / "f")
    assert validate(data_dir, no_text=True) == []
    d = DataDir.load(data_dir)
    x, sr = sf.read(d.wav_scp[d.utts[0]], dtype="float32")
    sf.write(d.wav_scp[d.utts[0]], x[:-1600], sr)
    problems = validate(data_dir, no_text=True)
    assert any("stale" in p for p in problems), problems


def test_a_failed_run_on_a_copied_dir_leaves_no_feats_scp(tmp_path, data_dir, repo_root):
    _run(data_dir, build_frontend({"type": "mfcc"}), tmp_path / "mfcc")
    copy = tmp_path / "copy"
    copy_data_dir(data_dir, copy)
    assert (copy / "feats.scp").exists() and (copy / "feats.yaml").exists()
    d = DataDir.load(copy)
    Path(d.wav_scp[d.utts[-1]]).write_bytes(b"RIFF")      # broken audio
    conf = _conf(tmp_path)
    assert compute_feats.main(["--config", conf, "--job", "1", str(copy), str(tmp_path / "log"),
                               str(tmp_path / "fb")]) == 1
    assert compute_feats.main(["--config", conf, "--merge-only", str(copy), str(tmp_path / "log"),
                               str(tmp_path / "fb")]) == 1
    assert not (copy / "feats.scp").exists() and not (copy / "feats.yaml").exists()
    assert list((copy / ".backup").glob("*/feats.scp"))
    assert validate(copy, no_text=True) != []


# ---------------------------------------------------------------------------------------- repeatable
@pytest.mark.skipif(shutil.which("sox") is None, reason="sox not installed")
def test_sox_pipes_are_repeatable(tmp_path):
    rng = np.random.default_rng(3)
    wav = tmp_path / "r.wav"
    sf.write(wav, (0.1 * rng.standard_normal(22050 // 2)).astype(np.float32), 22050, subtype="PCM_16")
    entry = wav_entry(wav, 22050, 16000)
    assert entry.startswith("sox -R ")
    data = DataDir(wav_scp={"s-u": entry}, utt2spk={"s-u": "s"}).write(tmp_path / "d")
    fe = build_frontend(LOGMEL)
    _run(data, fe, tmp_path / "f1")
    first = _load(data)["s-u"]
    compute_part(data, fe, tmp_path / "f2", 1, 1, force=True)
    merge_parts(data, fe, tmp_path / "f2", 1)
    assert first.tobytes() == _load(data)["s-u"].tobytes()


# ---------------------------------------------------------------------------------------- silent loss
def test_utterances_missing_from_utt2spk_are_named(tmp_path, data_dir, caplog):
    d = DataDir.load(data_dir)
    dropped = d.utts[2]
    del d.utt2spk[dropped]
    d.write(data_dir)
    (data_dir / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in sorted(d.wav_scp.items())))
    with caplog.at_level(logging.WARNING):
        _run(data_dir, build_frontend(LOGMEL), tmp_path / "f")
    assert any(r.levelno == logging.WARNING and dropped in r.getMessage() and "1 utterance" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("conf", [{"type": "mfcc"}, LOGMEL, {"type": "spectrogram"}, {"type": "fbank"}])
def test_too_short_audio_is_one_error_for_every_frontend(tmp_path, make_data, conf):
    data = make_data(tmp_path, n_per_spk=2, speakers=("s",))
    d = DataDir.load(data)
    sf.write(d.wav_scp["s-utt1"], np.zeros(10, np.float32), 16000)
    with pytest.raises(DataError, match=r"'s-utt1'.*too short"):
        compute_part(data, build_frontend(conf), tmp_path / "f", 1, 1)


def test_stereo_is_reported_once(tmp_path, make_data, caplog, monkeypatch):
    from speechkit.data import audio

    monkeypatch.setattr(audio, "_said_multichannel", [])
    data = make_data(tmp_path, n_per_spk=2, speakers=("s",))
    d = DataDir.load(data)
    for u in d.utts:
        x, sr = sf.read(d.wav_scp[u], dtype="float32")
        sf.write(d.wav_scp[u], np.stack([x, -x], axis=1), sr)
    with caplog.at_level(logging.INFO):
        compute_part(data, build_frontend(LOGMEL), tmp_path / "f", 1, 1)
    msgs = [r.getMessage() for r in caplog.records if "channel" in r.getMessage()]
    assert len(msgs) == 1 and "first" in msgs[0], msgs


def test_skip_bad_counts_lists_and_removes(tmp_path, data_dir, capsys):
    d = DataDir.load(data_dir)
    bad = [d.utts[1], d.utts[4]]
    Path(d.wav_scp[bad[0]]).write_bytes(b"")
    sf.write(d.wav_scp[bad[1]], np.zeros(10, np.float32), 16000)
    conf, log = _conf(tmp_path), tmp_path / "log"
    # default: stop at the first
    assert compute_feats.main(["--config", conf, "--nj", "2", "--job", "1", str(data_dir), str(log),
                               str(tmp_path / "f")]) == 1
    capsys.readouterr()
    for j in (1, 2):
        assert compute_feats.main(["--config", conf, "--nj", "2", "--job", str(j), "--skip-bad",
                                   str(data_dir), str(log), str(tmp_path / "f")]) == 0
    job_log = capsys.readouterr().out                     # a job logs to stdout (run.pl's log file)
    assert all(f"skipping '{u}'" in job_log for u in bad) and "skipped 1 of 3 utterances" in job_log
    assert compute_feats.main(["--config", conf, "--nj", "2", "--merge-only", str(data_dir), str(log),
                               str(tmp_path / "f")]) == 1          # merging needs --skip-bad too
    assert "utterances were skipped by parts computed with --skip-bad (" in capsys.readouterr().err
    assert compute_feats.main(["--config", conf, "--nj", "2", "--merge-only", "--skip-bad", str(data_dir),
                               str(log), str(tmp_path / "f")]) == 0
    listed = (log / "bad_utts").read_text().splitlines()
    assert [ln.split()[0] for ln in listed] == bad and "empty" in listed[0] and "too short" in listed[1]
    after = DataDir.load(data_dir)
    assert len(after) == 4 and not set(bad) & set(after.utts) and not set(bad) & set(after.wav_scp)
    assert validate(data_dir, no_text=True) == []
    args = compute_feats.build_parser().parse_args(["--config", conf, "--skip-bad", str(data_dir)])
    args.log_dir, args.feat_dir = str(log), str(tmp_path / "f")
    assert "--skip-bad" in compute_feats._child_argv(args, 1)


def test_nj_is_capped_at_the_number_of_utterances(tmp_path, make_data, monkeypatch, capsys):
    data = make_data(tmp_path, n_per_spk=1)        # 2 utterances
    conf = _conf(tmp_path)
    started = []
    monkeypatch.setattr(compute_feats, "run_local_jobs", lambda jobs, *a, **k: started.extend(jobs) or [])
    assert compute_feats.main(["--config", conf, "--nj", "50", str(data)]) == 1   # (faked jobs: merge fails)
    assert started == [1, 2]
    assert compute_feats.main(["--config", conf, "--nj", "50", "--job", "7", str(data)]) == 0
    for j in (1, 2):
        assert compute_feats.main(["--config", conf, "--nj", "50", "--job", str(j), str(data)]) == 0
    assert compute_feats.main(["--config", conf, "--nj", "50", "--merge-only", str(data)]) == 0
    assert "capped at 2" in capsys.readouterr().err
    assert len(DataDir.load(data).feats_scp) == 2


def test_set_errors_name_the_option(tmp_path, data_dir, repo_root, capsys):
    conf = str(repo_root / "conf" / "mfcc.yaml")
    assert compute_feats.main(["--config", conf, "--set", "n_ftt=512", "--job", "1", str(data_dir)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("speechkit-compute-feats: error: --set n_ftt=512: unknown key 'n_ftt'"), err
    assert "mfcc.yaml" not in err.split("(")[0]


# ---------------------------------------------------------------------------------------- CMVN
def _feature_dir(root: Path, mats: dict[str, np.ndarray]) -> Path:
    path = DataDir(utt2spk={u: u.split("-")[0] for u in mats}).write(root / "data")
    with ark_scp_writer(root / "feats.ark", path / "feats.scp") as w:
        for u in sorted(mats):
            w(u, mats[u])
    return path


def test_cmvn_refuses_non_finite_frames(tmp_path, capsys):
    rng = np.random.default_rng(0)
    mats = {f"a-{i}": rng.normal(size=(8, 3)).astype(np.float32) for i in range(3)}
    mats["a-1"][5, 2] = np.inf
    path = _feature_dir(tmp_path, mats)
    with pytest.raises(DataError, match=r"'a-1'.*frame 5"):
        compute_cmvn_stats(path)
    assert cmvn_cli.main([str(path)]) == 1 and "'a-1'" in capsys.readouterr().err
    assert not (path / "cmvn_global.ark").exists() and not (path / "cmvn.scp").exists()


def test_global_cmvn_lives_outside_cmvn_scp(tmp_path):
    rng = np.random.default_rng(1)
    mats = {f"{s}-{i}": rng.normal(i, 2.0, size=(9 + i, 3)).astype(np.float32) for s in "ab" for i in range(2)}
    path = _feature_dir(tmp_path, mats)
    (path / "cmvn.scp").write_text("global /nowhere.ark:1\n")       # a legacy entry is moved aside
    out = compute_cmvn_stats(path)
    assert out == path / "cmvn_global.ark" and not (path / "cmvn.scp").exists()
    stats = kaldiio.load_mat(str(out))
    assert stats.shape == (2, 4) and stats[0, 3] == sum(m.shape[0] for m in mats.values())
    np.testing.assert_array_equal(load_global_cmvn_stats(path), stats)  # what the RNN-T task trains and decodes with
    allf = np.concatenate(list(mats.values())).astype(np.float64)
    np.testing.assert_allclose(FeatureReader(path, cmvn="global")["a-1"],
                               (mats["a-1"] - allf.mean(0)) / allf.std(0), rtol=1e-4, atol=1e-5)
    assert validate(path, no_text=True, no_wav=True) == []
    compute_cmvn_stats(path, per_speaker=True)                     # both kinds side by side
    assert set(DataDir.load(path).cmvn_scp) == {"a", "b"}
    assert validate(path, no_text=True, no_wav=True) == []
    np.testing.assert_array_equal(load_global_cmvn_stats(path), stats)
    # a legacy cmvn.scp holding 'global' is still read (old data dirs keep loading)
    (path / "cmvn_global.ark").unlink()
    with ark_scp_writer(tmp_path / "old.ark", path / "cmvn.scp") as w:
        w("global", stats)
    np.testing.assert_array_equal(load_global_cmvn_stats(path / "cmvn.scp"), stats)
    np.testing.assert_allclose(FeatureReader(path, cmvn="global")["a-1"],
                               (mats["a-1"] - allf.mean(0)) / allf.std(0), rtol=1e-4, atol=1e-5)
