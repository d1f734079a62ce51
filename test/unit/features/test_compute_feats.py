"""speechkit-compute-feats: parts, merge, idempotence, failures, ark/scp readable by kaldiio."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile as sf

from speechkit.bin import compute_feats
from speechkit.data.datadir import DataDir
from speechkit.features.extract import (
    PartPaths, compute_part, data_tag, merge_parts, part_fingerprint, part_status, split_utts,
)
from speechkit.features.frontends import build_frontend, frontend_from_file
from speechkit.utils.fileio import DataError


def _run_all(data_dir: Path, fe, feat_dir: Path, nj: int, **kw) -> list[bool]:
    done = [compute_part(data_dir, fe, feat_dir, j, nj, **kw) for j in range(1, nj + 1)]
    merge_parts(data_dir, fe, feat_dir, nj, compress=kw.get("compress", False))
    return done


def _load(data_dir: Path, scp: str = "feats.scp") -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in kaldiio.load_scp(str(data_dir / scp)).items()}


def _paths(data_dir: Path, fe, feat_dir: Path, job: int, nj: int, compress: bool = False) -> PartPaths:
    """The files of part ``job`` of ``nj`` for the data dir's current inputs (named by their fingerprint)."""
    d = DataDir.load(data_dir)
    fp = part_fingerprint(d, split_utts(d.utts, nj)[job - 1], fe.to_dict(), compress)
    return PartPaths.of(feat_dir, fe.name, data_tag(data_dir), job, fp)


def _snapshot(feat_dir: Path) -> dict[str, tuple[int, bytes]]:
    """name -> (mtime, bytes) of every file in ``feat_dir``."""
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(feat_dir.iterdir())}


def test_split_utts_is_kaldi_like():
    assert split_utts(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
    assert split_utts(list("ab"), 3) == [["a"], ["b"], []]
    with pytest.raises(ValueError):
        split_utts(["a"], 0)


def test_features_equal_frontend_and_nj_does_not_matter(tmp_path, data_dir, repo_root):
    fe = frontend_from_file(repo_root / "conf" / "mfcc.yaml")
    _run_all(data_dir, fe, tmp_path / "mfcc1", nj=1)
    one = _load(data_dir)
    n2f_one = (data_dir / "utt2num_frames").read_bytes()
    d = DataDir.load(data_dir)
    assert sorted(one) == d.utts
    for utt, m in one.items():  # what was stored is exactly the frontend's output
        x, _ = sf.read(d.wav_scp[utt], dtype="float32")
        assert m.dtype == np.float32 and m.shape == (fe.num_frames(len(x)), 39)
        np.testing.assert_allclose(m, fe(x), rtol=1e-6, atol=1e-6)
    assert (data_dir / "frame_shift").read_text() == "0.01\n"
    conf = (data_dir / "feats.yaml").read_text()
    assert "type: mfcc" in conf and "# dim: 39" in conf
    assert build_frontend(__import__("yaml").safe_load(conf)).to_dict() == fe.to_dict()

    _run_all(data_dir, fe, tmp_path / "mfcc3", nj=3)
    three = _load(data_dir)
    assert (data_dir / "utt2num_frames").read_bytes() == n2f_one
    assert all(one[u].tobytes() == three[u].tobytes() for u in one)  # byte for byte
    assert len({loc.rsplit(":", 1)[0] for loc in DataDir.load(data_dir).feats_scp.values()}) == 3
    assert DataDir.load(data_dir).feats_scp == dict(sorted(DataDir.load(data_dir).feats_scp.items()))


def test_cli_pool_nj2_matches_in_process(tmp_path, data_dir, repo_root):
    fe = frontend_from_file(repo_root / "conf" / "logmel.yaml")
    _run_all(data_dir, fe, tmp_path / "a", nj=1)
    ref = _load(data_dir)
    rc = compute_feats.main(["--config", str(repo_root / "conf" / "logmel.yaml"), "--nj", "2",
                             str(data_dir), str(tmp_path / "log"), str(tmp_path / "b")])
    assert rc == 0
    got = _load(data_dir)
    assert all(ref[u].tobytes() == got[u].tobytes() for u in ref)
    log = (tmp_path / "log" / "compute_feats.2.log").read_text()
    assert "part 2/2" in log and "# Ended (code 0)" in log
    # up to date: nothing is recomputed, and merge rewrites nothing
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "b").iterdir()}
    before_scp = (data_dir / "feats.scp").stat().st_mtime_ns
    assert compute_feats.main(["--config", str(repo_root / "conf" / "logmel.yaml"), "--nj", "2",
                               str(data_dir), str(tmp_path / "log"), str(tmp_path / "b")]) == 0
    assert before == {p: p.stat().st_mtime_ns for p in (tmp_path / "b").iterdir()}
    assert (data_dir / "feats.scp").stat().st_mtime_ns == before_scp


def test_idempotent_and_recomputes_what_changed(tmp_path, data_dir):
    fe = build_frontend({"type": "logmel", "n_mels": 40})
    feat_dir = tmp_path / "f"
    assert _run_all(data_dir, fe, feat_dir, nj=2) == [True, True]
    assert _run_all(data_dir, fe, feat_dir, nj=2) == [False, False]
    # rewrite one utterance's audio (part 2): only part 2 is recomputed
    d = DataDir.load(data_dir)
    path = d.wav_scp[d.utts[-1]]
    x, sr = sf.read(path, dtype="float32")
    time.sleep(0.01)
    sf.write(path, x[: len(x) // 2], sr)
    assert _run_all(data_dir, fe, feat_dir, nj=2) == [False, True]
    assert DataDir.load(data_dir).utt2num_frames[d.utts[-1]] == fe.num_frames(len(x) // 2)
    # another config recomputes everything; so does compress
    fe2 = build_frontend({"type": "logmel", "n_mels": 41})
    assert _run_all(data_dir, fe2, feat_dir, nj=2) == [True, True]
    assert _run_all(data_dir, fe2, feat_dir, nj=2, compress=True) == [True, True]
    comp = _load(data_dir)
    assert comp[d.utts[0]].shape[1] == 41
    # merging with settings never computed refuses (the jobs' parts exist only for other settings)
    fe3 = build_frontend({"type": "logmel", "n_mels": 42})
    with pytest.raises(DataError, match=r"2 of 2 parts not complete and current.*"
                                        r"part 1 stale \(inputs or config changed\)"):
        merge_parts(data_dir, fe3, feat_dir, 2)
    assert part_status(_paths(data_dir, fe3, feat_dir, 2, 2), "0" * 64, data_dir) == \
        "stale (inputs or config changed)"
    assert part_status(_paths(data_dir, fe3, tmp_path / "empty", 2, 2), "0" * 64, data_dir) == "missing"
    # the uncompressed n_mels=41 parts were kept: merging them again needs no recompute
    assert _run_all(data_dir, fe2, feat_dir, nj=2, compress=False) == [False, False]
    assert _load(data_dir)[d.utts[0]].shape[1] == 41


def test_compress_is_readable_and_close(tmp_path, data_dir):
    fe = build_frontend({"type": "fbank"})
    _run_all(data_dir, fe, tmp_path / "raw", nj=1)
    raw = _load(data_dir)
    _run_all(data_dir, fe, tmp_path / "comp", nj=1, compress=True)
    comp = _load(data_dir)
    raw_ark, comp_ark = _paths(data_dir, fe, tmp_path / "raw", 1, 1).ark, _paths(data_dir, fe, tmp_path / "comp", 1, 1,
                                                                                  compress=True).ark
    assert raw_ark.name.startswith(f"raw_fbank_{data_tag(data_dir)}.1.") and raw_ark.name != comp_ark.name
    assert comp_ark.stat().st_size < 0.7 * raw_ark.stat().st_size
    for u in raw:
        span = raw[u].max() - raw[u].min()
        assert np.abs(raw[u] - comp[u]).max() < 0.01 * span


def test_segments(tmp_path, make_data):
    d = DataDir.load(make_data(tmp_path, n_per_spk=3, speakers=("spk",)))
    rec = d.utts[-1]  # 0.5 s long
    seg = DataDir(wav_scp={rec: d.wav_scp[rec]}, utt2spk={"spk-a": "spk", "spk-b": "spk"},
                  segments={"spk-a": (rec, 0.0, 0.25), "spk-b": (rec, 0.2, 0.5)})
    from speechkit.data.datadir import Segment
    seg.segments = {k: Segment(*v) for k, v in seg.segments.items()}
    path = seg.write(tmp_path / "seg")
    fe = build_frontend({"type": "mfcc"})
    _run_all(path, fe, tmp_path / "f", nj=2)
    got = _load(path)
    x, _ = sf.read(d.wav_scp[rec], dtype="float32")
    np.testing.assert_allclose(got["spk-b"], fe(x[3200:8000]), atol=1e-5)
    assert got["spk-a"].shape[0] == fe.num_frames(4000)


def test_bad_audio_fails_naming_the_utterance_and_no_feats_scp(tmp_path, data_dir, repo_root):
    d = DataDir.load(data_dir)
    bad = d.utts[-1]  # in the last part
    Path(d.wav_scp[bad]).write_bytes(b"")
    fe = build_frontend({"type": "mfcc"})
    compute_part(data_dir, fe, tmp_path / "f", 1, 2)
    with pytest.raises(DataError, match=f"'{bad}'.*empty"):
        compute_part(data_dir, fe, tmp_path / "f", 2, 2)
    paths = _paths(data_dir, fe, tmp_path / "f", 2, 2)
    assert not paths.manifest.exists() and not paths.ark.exists() and not Path(f"{paths.ark}.tmp").exists()
    with pytest.raises(DataError, match="part 2 missing"):
        merge_parts(data_dir, fe, tmp_path / "f", 2)
    assert not (data_dir / "feats.scp").exists()
    # through the CLI: exit 1, the error names the job, its log names the utterance
    rc = compute_feats.main(["--config", str(repo_root / "conf" / "mfcc.yaml"), "--nj", "2", str(data_dir),
                             str(tmp_path / "log"), str(tmp_path / "f")])
    assert rc == 1 and not (data_dir / "feats.scp").exists()
    assert f"'{bad}'" in (tmp_path / "log" / "compute_feats.2.log").read_text()
    assert compute_feats.main(["--merge-only", "--config", str(repo_root / "conf" / "mfcc.yaml"), "--nj", "2",
                               str(data_dir), str(tmp_path / "log"), str(tmp_path / "f")]) == 1
    assert not (data_dir / "feats.scp").exists()


def test_wrong_sample_rate_names_the_key(tmp_path, make_data):
    data = make_data(tmp_path, sr=8000)
    fe = build_frontend({"type": "logmel"})
    with pytest.raises(DataError, match=r"'spkA-utt0'.*8000 Hz, config expects 16000 Hz"):
        compute_part(data, fe, tmp_path / "f", 1, 1)


def test_too_short_for_fbank_names_the_key(tmp_path, make_data):
    data = make_data(tmp_path, n_per_spk=1, speakers=("s",))
    d = DataDir.load(data)
    sf.write(d.wav_scp["s-utt0"], np.zeros(200, np.float32), 16000)
    with pytest.raises(DataError, match=r"wav.scp: 's-utt0': 200 samples \(12.5 ms\) are too short for one 25 ms"):
        compute_part(data, build_frontend({"type": "fbank"}), tmp_path / "f", 1, 1)


def test_recomputing_moves_stale_feats_scp_to_backup(tmp_path, data_dir):
    fe = build_frontend({"type": "logmel"})
    _run_all(data_dir, fe, tmp_path / "f", nj=1)
    (data_dir / "cmvn.scp").write_text("global x.ark:1\n")
    compute_part(data_dir, fe, tmp_path / "f", 1, 1, force=True)
    assert not (data_dir / "feats.scp").exists() and (data_dir / ".backup" / "1" / "feats.scp").exists()
    assert (data_dir / ".backup" / "1" / "cmvn.scp").exists()


def test_killed_job_leaves_nothing_that_looks_complete(tmp_path, data_dir, repo_root):
    fe = build_frontend({"type": "mfcc"})
    # reference: an uninterrupted run on a copy of the data dir
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    for f in data_dir.iterdir():
        if f.is_file():
            (ref_dir / f.name).write_bytes(f.read_bytes())
    _run_all(ref_dir, fe, tmp_path / "ref_f", 1)
    # the last utterance's audio comes from a command that hangs, so the job is killed mid-part
    d = DataDir.load(data_dir)
    good_entry = d.wav_scp[d.utts[-1]]
    d.wav_scp[d.utts[-1]] = f"sleep 60; cat {good_entry} |"
    d.write(data_dir)
    argv = [sys.executable, "-m", "speechkit.bin.compute_feats", "--config", str(repo_root / "conf" / "mfcc.yaml"),
            "--nj", "1", "--job", "1", str(data_dir), str(tmp_path / "log"), str(tmp_path / "f")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    tmp_ark = _paths(data_dir, fe, tmp_path / "f", 1, 1).ark.with_suffix(".ark.tmp")
    deadline = time.time() + 60
    while time.time() < deadline and not tmp_ark.exists() and proc.poll() is None:
        time.sleep(0.05)
    assert tmp_ark.exists(), "the job never started writing"
    time.sleep(0.3)  # now blocked in the hanging command
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    paths = _paths(data_dir, fe, tmp_path / "f", 1, 1)
    assert not paths.ark.exists() and not paths.scp.exists() and not paths.manifest.exists()
    with pytest.raises(DataError, match="part 1 missing"):
        merge_parts(data_dir, fe, tmp_path / "f", 1)
    assert not (data_dir / "feats.scp").exists()
    # re-run (the hanging command replaced by the plain file again): same features as uninterrupted
    d.wav_scp[d.utts[-1]] = good_entry
    d.write(data_dir)
    _run_all(data_dir, fe, tmp_path / "f", 1)
    got, want = _load(data_dir), _load(ref_dir)
    assert sorted(got) == sorted(want)
    for utt in want:
        np.testing.assert_array_equal(got[utt], want[utt])


def test_cli_argument_errors(tmp_path, data_dir, repo_root, capsys):
    conf = str(repo_root / "conf" / "mfcc.yaml")
    assert compute_feats.main(["--config", conf, "--nj", "2", "--job", "3", str(data_dir)]) == 1
    assert "--job must be in 1..2" in capsys.readouterr().err
    assert compute_feats.main(["--config", conf, "--set", "n_mel=3", "--job", "1", str(data_dir)]) == 1
    assert "unknown key 'n_mel'" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: mfcc\nhop_length: ten\n")
    assert compute_feats.main(["--config", str(bad), str(data_dir)]) == 1
    assert "bad.yaml: key 'hop_length' must be an integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compute_feats.main(["--config", conf, "--job", "1", "--merge-only", str(data_dir)])


def test_manifest_records_frames(tmp_path, data_dir):
    fe = build_frontend({"type": "spectrogram"})
    compute_part(data_dir, fe, tmp_path / "f", 1, 1, compress=False)
    m = json.loads(_paths(data_dir, fe, tmp_path / "f", 1, 1).manifest.read_text())
    assert m["dim"] == 257 and m["num_utts"] == 6 and m["conf"] == fe.to_dict()
    assert sum(m["utt2num_frames"].values()) > 0


def test_make_feats_sh_with_run_pl(tmp_path, data_dir, repo_root, run_cli_main):
    if not (repo_root / "utils" / "run.pl").exists():
        pytest.skip("utils/run.pl not available")
    fe = build_frontend({"type": "mfcc"})
    _run_all(data_dir, fe, tmp_path / "ref", nj=1)
    ref = _load(data_dir)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    r = subprocess.run(["bash", str(repo_root / "utils" / "make_feats.sh"), "--nj", "2", "--config",
                        str(repo_root / "conf" / "mfcc.yaml"), str(data_dir), str(tmp_path / "log"),
                        str(tmp_path / "mfcc")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "Successfully validated" in r.stdout
    got = _load(data_dir)
    assert all(ref[u].tobytes() == got[u].tobytes() for u in ref)
    assert (tmp_path / "log" / "compute_feats.1.log").exists()
    # the merge step (a process of its own in make_feats.sh) does not import torch (1.2 s a process)
    scp = (data_dir / "feats.scp").read_text()
    (data_dir / "feats.scp").unlink()
    m = run_cli_main("speechkit.bin.compute_feats", ["--merge-only", "--config", str(repo_root / "conf" / "mfcc.yaml"),
                                                      "--nj", "2", str(data_dir), str(tmp_path / "log"),
                                                      str(tmp_path / "mfcc")], env=env)
    assert m.returncode == 0 and m.stdout.strip().endswith("no torch"), m.stdout + m.stderr
    assert (data_dir / "feats.scp").read_text() == scp
    r = subprocess.run(["bash", str(repo_root / "utils" / "make_feats.sh"), str(data_dir)],
                       capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "--config <frontend.yaml> is required" in r.stderr


@pytest.mark.parametrize("mod", ["compute_feats", "compute_cmvn_stats"])
def test_help(mod, capsys):
    import importlib

    with pytest.raises(SystemExit) as e:
        importlib.import_module(f"speechkit.bin.{mod}").main(["--help"])
    assert e.value.code == 0 and "DATA_DIR" in capsys.readouterr().out


def test_more_jobs_than_utterances(tmp_path, make_data):
    data = make_data(tmp_path, n_per_spk=1)  # 2 utterances, 4 parts: parts 3 and 4 are empty
    fe = build_frontend({"type": "logmel"})
    _run_all(data, fe, tmp_path / "f", nj=4)
    assert sorted(_load(data)) == DataDir.load(data).utts
    assert _paths(data, fe, tmp_path / "f", 4, 4).ark.stat().st_size == 0


def test_feat_and_log_dir_may_lie_inside_the_data_dir_but_not_be_or_contain_it(tmp_path, data_dir, repo_root, capsys):
    """Issue 23 sweep: FEAT_DIR = DATA_DIR put the arks and part manifests among the data dir's
    tables, FEAT_DIR = the data dir's parent spread them beside the data dirs."""
    conf = str(repo_root / "conf" / "logmel.yaml")
    before = sorted(p.name for p in data_dir.iterdir())
    for args, msg in [([str(data_dir), str(tmp_path / "log"), str(data_dir)], f"FEAT_DIR {data_dir} is DATA_DIR"),
                      ([str(data_dir), str(tmp_path / "log"), str(data_dir.parent)], "contains DATA_DIR"),
                      ([str(data_dir), str(data_dir)], f"LOG_DIR {data_dir} is DATA_DIR")]:
        assert compute_feats.main(["--config", conf, *args]) == 1
        assert msg in capsys.readouterr().err
    assert sorted(p.name for p in data_dir.iterdir()) == before


def test_feat_dir_holding_the_config_and_an_empty_data_dir_are_refused(tmp_path, data_dir, repo_root, capsys):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "logmel.yaml").write_text((repo_root / "conf" / "logmel.yaml").read_text())
    assert compute_feats.main(["--config", str(cfg / "logmel.yaml"), str(data_dir), str(tmp_path / "log"), str(cfg)]) == 1
    assert f"FEAT_DIR {cfg} contains --config {cfg / 'logmel.yaml'}" in capsys.readouterr().err
    assert sorted(p.name for p in cfg.iterdir()) == ["logmel.yaml"]
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in ("wav.scp", "utt2spk", "spk2utt"):
        (empty / name).write_text("")
    assert compute_feats.main(["--config", str(cfg / "logmel.yaml"), str(empty), str(tmp_path / "log"),
                               str(tmp_path / "f")]) == 1
    assert f"{empty / 'utt2spk'}: no utterance (an empty data dir)" in capsys.readouterr().err
    assert not (empty / "feats.scp").exists()


def test_library_frontend_overrides_and_stale_parts(tmp_path, data_dir, repo_root):
    """parse_overrides / load_frontend (compute-feats' --config + --set) and stale_parts (the jobs a
    pool has to run), moved from the CLI into speechkit.features.extract."""
    from speechkit.features.extract import load_frontend, parse_overrides, stale_parts
    from speechkit.utils.cli import ConfigError

    assert parse_overrides(["n-mels=40", "fmax=7600.5", "htk=true", "window=hann"]) == \
        {"n_mels": 40, "fmax": 7600.5, "htk": True, "window": "hann"}
    with pytest.raises(ConfigError, match="^overrides 'n_mels': expected KEY=VALUE"):  # the parameter (--set)
        parse_overrides(["n_mels"])
    conf = repo_root / "conf" / "mfcc.yaml"
    plain = load_frontend(conf)
    assert plain.to_dict() == frontend_from_file(conf).to_dict()
    assert load_frontend(conf, ["n_mfcc=20"]).dim == 60
    with pytest.raises(ConfigError, match="^overrides nokey=3: unknown key 'nokey'"):
        load_frontend(conf, ["nokey=3"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: mfcc\nnokey: 1\n")
    with pytest.raises(ConfigError, match=f"{bad}: .*unknown key 'nokey'"):
        load_frontend(bad, ["n_mfcc=20"])  # the file's own error names the file
    feat_dir = tmp_path / "mfcc"
    assert stale_parts(data_dir, plain, feat_dir, 2) == [1, 2]
    compute_part(data_dir, plain, feat_dir, 2, 2)
    assert stale_parts(data_dir, plain, feat_dir, 2) == [1]
    assert stale_parts(data_dir, plain, feat_dir, 2, force=True) == [1, 2]
    assert stale_parts(data_dir, plain, feat_dir, 2, compress=True) == [1, 2]  # another setting: stale


def test_make_feats_in_process_job_merge_and_pool(tmp_path, data_dir, repo_root, caplog):
    """make_feats (compute-feats' one library call): without a job command the parts are computed
    here; --job / --merge-only alike; nj capped; a failed pool is a DataError naming the job."""
    from speechkit.features.extract import make_feats

    conf = repo_root / "conf" / "mfcc.yaml"
    n_utts = len(DataDir.load(data_dir))
    caplog.set_level("INFO")
    n, fe = make_feats(data_dir, conf, tmp_path / "log", tmp_path / "f", nj=2)
    one = _load(data_dir)
    assert n == n_utts and fe.dim == 39 and sorted(one) == DataDir.load(data_dir).utts
    assert make_feats(data_dir, conf, tmp_path / "log", tmp_path / "g", nj=n_utts + 5, job=n_utts + 3) is None
    assert f"capped at {n_utts}" in caplog.text and "nothing to do" in caplog.text
    assert make_feats(data_dir, conf, tmp_path / "log", tmp_path / "g", nj=2, job=1) is None
    with pytest.raises(DataError):
        make_feats(data_dir, conf, tmp_path / "log", tmp_path / "g", nj=2, merge_only=True)  # part 2 missing
    make_feats(data_dir, conf, tmp_path / "log", tmp_path / "g", nj=2, job=2)
    assert make_feats(data_dir, conf, tmp_path / "log", tmp_path / "g", nj=2, merge_only=True)[0] == n_utts
    assert all(one[u].tobytes() == m.tobytes() for u, m in _load(data_dir).items())
    calls = []

    def fake_jobs(jobs, argv_of, log_of, max_jobs, num_threads, desc=None):
        calls.append((list(jobs), argv_of(1), max_jobs))
        log_of(1).parent.mkdir(parents=True, exist_ok=True)
        log_of(1).write_text("# cmd\nboom\n")
        return [(1, log_of(1))]

    with pytest.raises(DataError, match=r"1 of 2 jobs failed; no feats.scp written.\n  job 1 \(see .*\): boom"):
        make_feats(data_dir, conf, tmp_path / "log", tmp_path / "h", nj=2, max_jobs=1, run_jobs=fake_jobs,
                   job_argv=lambda j, nj: ["cmd", str(j), str(nj)])
    assert calls == [([1, 2], ["cmd", "1", "2"], 1)]
    with pytest.raises(ValueError, match="FEAT_DIR"):
        make_feats(data_dir, conf, tmp_path / "log", data_dir.parent, nj=1)


# ------------------------------------------------------------------ finished work is never overwritten
def test_part_files_are_named_by_their_fingerprint(tmp_path, data_dir):
    fe = build_frontend({"type": "mfcc"})
    d = DataDir.load(data_dir)
    fp = part_fingerprint(d, split_utts(d.utts, 2)[0], fe.to_dict(), False)
    paths = PartPaths.of(tmp_path / "f", "mfcc", data_tag(data_dir), 1, fp)
    base = f"raw_mfcc_{data_tag(data_dir)}.1.{fp[:12]}"
    assert (paths.ark.name, paths.scp.name, paths.manifest.name) == (f"{base}.ark", f"{base}.scp", f"{base}.json")
    assert paths.ark.parent == (tmp_path / "f").absolute()
    with pytest.raises(ValueError, match="not a part fingerprint"):
        PartPaths.of(tmp_path / "f", "mfcc", data_tag(data_dir), 1, "xyz")


def _features_and_a_copy(tmp_path, data_dir, repo_root):
    """MFCCs of ``data_dir`` in 2 parts and a copy of the dir: (config, FEAT_DIR, the features, FEAT_DIR's
    files' bytes, the copy)."""
    from speechkit.data.copy_data_dir import copy_data_dir
    from speechkit.features.extract import make_feats

    conf = repo_root / "conf" / "mfcc.yaml"
    feat_dir = tmp_path / "mfcc"
    make_feats(data_dir, conf, tmp_path / "log", feat_dir, nj=2)
    copy_data_dir(data_dir, tmp_path / "copy")
    return conf, feat_dir, _load(data_dir), _snapshot(feat_dir), tmp_path / "copy"


def test_recompute_with_another_config_leaves_copies_and_backups_reading_the_old_features(tmp_path, data_dir,
                                                                                       repo_root):
    """A recompute writes arks of new names: a copied dir's feats.scp (and the data dir's backup)
    keep reading the features they were made with (they read the new ones when arks had fixed names)."""
    from speechkit.data.validate import validate
    from speechkit.features.extract import make_feats

    conf, feat_dir, old, old_files, copy = _features_and_a_copy(tmp_path, data_dir, repo_root)
    make_feats(data_dir, conf, tmp_path / "log", feat_dir, overrides=["n_mfcc=20"], nj=2)
    new = _load(data_dir)
    assert all(m.shape[1] == 60 for m in new.values())
    assert all(_snapshot(feat_dir)[name] == v for name, v in old_files.items())  # untouched
    assert len(list(feat_dir.glob("*.ark"))) == 4
    for got in (_load(copy), _load(data_dir / ".backup" / "1")):
        assert sorted(got) == sorted(old)
        for u in old:
            assert got[u].shape == old[u].shape and got[u].shape[1] == 39
            assert got[u].tobytes() == old[u].tobytes()
    assert validate(copy, no_text=True) == []


def test_a_failed_recompute_leaves_the_previous_features_whole(tmp_path, data_dir, repo_root):
    """Part 1 recomputed with another config, part 2 fails: the first run's features, read through
    the backup's feats.scp or a copy's, are all still there, unchanged; the next run reuses part 1."""
    from speechkit.features.extract import make_feats

    conf, feat_dir, old, old_files, copy = _features_and_a_copy(tmp_path, data_dir, repo_root)
    d = DataDir.load(data_dir)
    good = d.wav_scp[d.utts[-1]]
    d.wav_scp[d.utts[-1]] = str(tmp_path / "missing.wav")   # in part 2
    d.write(data_dir)
    with pytest.raises(DataError, match=d.utts[-1]):
        make_feats(data_dir, conf, tmp_path / "log", feat_dir, overrides=["n_mfcc=20"], nj=2)
    assert not (data_dir / "feats.scp").exists()
    assert all(_snapshot(feat_dir)[name] == v for name, v in old_files.items())
    for got in (_load(data_dir / ".backup" / "1"), _load(copy)):
        assert sorted(got) == sorted(old)
        assert all(got[u].shape == old[u].shape and got[u].tobytes() == old[u].tobytes() for u in old)
    # the CLI's pool of processes alike: job 2 fails, the first run's arks stay whole
    rc = compute_feats.main(["--config", str(conf), "--nj", "2", "--set", "n_mfcc=20", str(data_dir),
                             str(tmp_path / "log"), str(feat_dir)])
    assert rc == 1 and not (data_dir / "feats.scp").exists()
    assert all(_snapshot(feat_dir)[name] == v for name, v in old_files.items())
    assert all(_load(copy)[u].tobytes() == old[u].tobytes() for u in old)
    # fixed: only part 2 is computed
    d.wav_scp[d.utts[-1]] = good
    d.write(data_dir)
    fe20 = build_frontend({**frontend_from_file(conf).to_dict(), "n_mfcc": 20})
    assert _run_all(data_dir, fe20, feat_dir, nj=2) == [False, True]
    assert all(m.shape[1] == 60 for m in _load(data_dir).values())


def test_recompute_with_an_unchanged_config_reuses_the_parts(tmp_path, data_dir, repo_root, caplog):
    """Same config: nothing recomputed, no new files. Back to an earlier config: its kept parts are
    reused, not recomputed; the merge logs the other part files of the data dir that remain."""
    from speechkit.features.extract import make_feats

    conf = repo_root / "conf" / "mfcc.yaml"
    feat_dir = tmp_path / "mfcc"
    make_feats(data_dir, conf, tmp_path / "log", feat_dir, nj=2)
    scp = (data_dir / "feats.scp").read_text()
    first = _snapshot(feat_dir)
    assert len(first) == 6                                          # 2 parts x (ark, scp, json)
    caplog.set_level("INFO", logger="speechkit.features.extract")
    make_feats(data_dir, conf, tmp_path / "log", feat_dir, nj=2)
    assert _snapshot(feat_dir) == first and (data_dir / "feats.scp").read_text() == scp
    assert "older part files" not in caplog.text
    assert not (data_dir / ".backup").exists()                      # nothing recomputed, nothing moved
    make_feats(data_dir, conf, tmp_path / "log", feat_dir, overrides=["n_mfcc=20"], nj=2)
    second = _snapshot(feat_dir)
    assert len(second) == 12
    caplog.clear()
    fe = frontend_from_file(conf)
    assert _run_all(data_dir, fe, feat_dir, nj=2) == [False, False]  # the first parts, kept, are reused
    assert _snapshot(feat_dir) == second and (data_dir / "feats.scp").read_text() == scp
    older = [r.getMessage() for r in caplog.records if "older part files" in r.getMessage()]
    assert len(older) == 1 and "6 older part files" in older[0]
    assert all(f"'{n}'" in older[0] for n in second if n.endswith(".ark") and n not in first)
