"""Issue 38 cases 1 and 2: the four recipes' local/make_results.py --collect writes only its own run's folder
and a page never replaces a file it reads (speechkit.utils.results_io), on fake exp/ trees (no training).

Each refused call is one line on stderr and exit 1, before anything is written: every file of exp/, data/ and
the other runs is still there afterwards, byte for byte."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from speechkit.utils.cli import run_main
from speechkit.utils.outputs import OWNER_FILE

EGS = Path(__file__).resolve().parents[2] / "egs"


def _load(recipe: str):
    local = EGS / recipe / "local"
    sys.path.insert(0, str(local))  # tcstar's imports measure_latency from local/
    try:
        spec = importlib.util.spec_from_file_location(f"{recipe}_make_results_outputs", local / "make_results.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(local))
    return mod


def recipe_fixture(recipe: str):
    """A module-scoped fixture (named after the attribute it is assigned to) giving ``recipe``'s
    local/make_results.py module, loaded once per test module by :func:`_load`."""
    return pytest.fixture(scope="module")(lambda: _load(recipe))


zs = recipe_fixture("zerospeech2019")
vctk = recipe_fixture("vctk_continual")
indic = recipe_fixture("indic_multilingual")
tcstar = recipe_fixture("tcstar_salad")


def _cli(mod, argv, capsys) -> tuple[int, str]:
    """What ``python local/make_results.py ARGV`` does: (exit status, stderr)."""
    rc = run_main("make_results.py", lambda: mod.main(argv))
    return rc, capsys.readouterr().err


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(mod, argv, capsys, root: Path, *needles: str) -> str:
    before = _snapshot(root)
    rc, err = _cli(mod, argv, capsys)
    assert rc == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("make_results.py: error: "), err
    for n in needles:
        assert n in err, (n, err)
    assert _snapshot(root) == before  # nothing written, nothing deleted
    return err


# ----------------------------------------------------------------------------------------- zerospeech2019
def _zs_tree(root: Path) -> None:
    scores = root / "exp" / "vq" / "scores"
    scores.mkdir(parents=True)
    for name in ("abx_across", "abx_within", "abx_nocontext_across", "abx_nocontext_within"):
        (scores / f"{name}.json").write_text(json.dumps({"error": 30.0, "n_triplets": 10}))
    (scores / "bitrate.json").write_text(json.dumps({"bitrate": 100.0}))
    (root / "exp" / "vq" / "vqvae" / "checkpoints").mkdir(parents=True)
    (root / "exp" / "vq" / "vqvae" / "checkpoints" / "best.pt").write_bytes(b"a model")
    (root / "data" / "test").mkdir(parents=True)
    (root / "data" / "test" / "utt2spk").write_text("s1_u1 s1\ns2_u1 s2\n")
    for run in ("mini", "real"):  # two runs collected by an older version (no marker)
        (root / "results" / run / "vq" / "scores").mkdir(parents=True)
        (root / "results" / run / "test_set.json").write_text(json.dumps({"corpus": run, "tag": "vq"}))
        (root / "results" / run / "vq" / "scores" / "abx_across.json").write_text(
            json.dumps({"error": 1.0, "n_triplets": 5}))
    (root / "mine").mkdir()
    (root / "mine" / "thesis.tex").write_text("a user's folder\n")


def test_zerospeech_collect_refuses_what_it_reads_the_results_root_and_other_folders(zs, tmp_path, monkeypatch,
                                                                                      capsys):
    monkeypatch.chdir(tmp_path)
    _zs_tree(tmp_path)
    common = ["--expdir", "exp", "--datadir", "data", "--tag", "vq"]
    _refused(zs, ["--collect", "exp", *common], capsys, tmp_path, "--collect exp is --expdir exp")
    _refused(zs, ["--collect", "exp/vq", *common], capsys, tmp_path, "lies inside --expdir exp")
    _refused(zs, ["--collect", "data", *common], capsys, tmp_path, "--collect data is --datadir data")
    _refused(zs, ["--collect", ".", *common], capsys, tmp_path, "contains --expdir exp")
    _refused(zs, ["--collect", "results", *common], capsys, tmp_path,
             "--collect results holds the results run folder(s) mini, real")
    _refused(zs, ["--collect", "results/mini/vq", *common], capsys, tmp_path,
             "lies inside the results run folder")
    _refused(zs, ["--collect", "mine", *common], capsys, tmp_path,
             "--collect mine exists and is not a results run folder this collect made")

    # a run folder of an older collect (test_set.json, no marker) is replaced and marked; the other run untouched
    real = _snapshot(tmp_path / "results" / "real")
    assert _cli(zs, ["--collect", "results/mini", *common], capsys)[0] == 0
    mini = tmp_path / "results" / "mini"
    assert (mini / OWNER_FILE).read_text().strip() == zs.COLLECT_OWNER
    assert json.loads((mini / "test_set.json").read_text())["utterances"] == 2
    assert _cli(zs, ["--collect", "results/mini", *common], capsys)[0] == 0  # and again: its own folder
    assert _snapshot(tmp_path / "results" / "real") == real
    # a folder made by another tool is not this collect's
    (tmp_path / "vocoded").mkdir()
    (tmp_path / "vocoded" / OWNER_FILE).write_text("speechkit-vocode\n")
    (tmp_path / "vocoded" / "a.wav").write_bytes(b"RIFF")
    _refused(zs, ["--collect", "vocoded", *common], capsys, tmp_path, "it was made by speechkit-vocode")


def test_zerospeech_render_and_out_refuse_a_file_they_read(zs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _zs_tree(tmp_path)
    _refused(zs, ["--render", "results/mini/test_set.json"], capsys, tmp_path,
             "--render results/mini/test_set.json lies inside a subfolder of --results results")
    _refused(zs, ["--render", "results"], capsys, tmp_path, "--render results is --results results")
    _refused(zs, ["--out", "exp/vq/scores/abx_across.json", "--expdir", "exp", "--datadir", "data"], capsys,
             tmp_path, "--out exp/vq/scores/abx_across.json lies inside a subfolder of --expdir exp")
    _refused(zs, ["--out", "data/test/utt2spk", "--expdir", "exp", "--datadir", "data"], capsys, tmp_path,
             "lies inside --datadir data")
    _refused(zs, ["--out", "exp/results.json", "--expdir", "exp", "--datadir", "data"], capsys, tmp_path,
             "is EXPDIR/results.json")
    # the documented places are fine
    assert _cli(zs, ["--render", "RESULTS.md"], capsys)[0] == 0 and (tmp_path / "RESULTS.md").is_file()


# ----------------------------------------------------------------------------------------- vctk_continual
def _vctk_tree(root: Path) -> None:
    ev = root / "exp" / "musa_rnn" / "continual" / "sa" / "order1" / "eval"
    ev.mkdir(parents=True)
    (ev / "scores.json").write_text(json.dumps({"order": ["s3"], "final_ra": 1.0}))
    (root / "exp" / "musa_rnn" / "pretrain").mkdir()
    (root / "exp" / "musa_rnn" / "pretrain" / "best.pt").write_bytes(b"theta_init")
    (root / "data").mkdir()
    (root / "data" / "continual_speakers").write_text("s3\n")
    (root / "res" / "other").mkdir(parents=True)
    (root / "res" / "other" / "setup.json").write_text("{}")


def test_vctk_collect_refuses_exp_and_a_results_root(vctk, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _vctk_tree(tmp_path)
    common = ["--expdir", "exp", "--datadir", "data"]
    _refused(vctk, ["--collect", "exp", *common], capsys, tmp_path, "--collect exp is --expdir exp")
    _refused(vctk, ["--collect", "res", *common], capsys, tmp_path, "--collect res holds the results run folder(s) other")
    _refused(vctk, ["--render", "res/other/setup.json", "--results", "res"], capsys, tmp_path,
             "lies inside a subfolder of --results res")
    assert _cli(vctk, ["--collect", "res/mini", *common], capsys)[0] == 0
    assert (tmp_path / "res" / "mini" / OWNER_FILE).is_file() and (tmp_path / "res" / "other" / "setup.json").is_file()
    assert not list(tmp_path.glob("res/*.tmp*"))


# ----------------------------------------------------------------------------------------- indic_multilingual
def _indic_tree(root: Path) -> None:
    (root / "exp" / "sys1").mkdir(parents=True)
    (root / "exp" / "sys1" / "best.pt").write_bytes(b"a model")
    (root / "data" / "test").mkdir(parents=True)
    for run in ("mini", "real"):
        (root / "results" / run).mkdir(parents=True)
        (root / "results" / run / "run.json").write_text(json.dumps({"test_sets": ["test"]}))


def test_indic_collect_refuses_exp_and_the_results_root(indic, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _indic_tree(tmp_path)
    common = ["--collect", "--exp", "exp", "--data", "data"]
    _refused(indic, [*common, "--run", "sys1", "--results-dir", "exp"], capsys, tmp_path,
             "--run exp/sys1 lies inside --exp exp")
    _refused(indic, [*common, "--run", ".", "--results-dir", "results"], capsys, tmp_path,
             "--run '.': a run name is one folder name")
    _refused(indic, [*common, "--run", "../exp", "--results-dir", "results"], capsys, tmp_path, "--run '../exp'")
    _refused(indic, [*common, "--run", "x", "--out", "results/mini/run.json"], capsys, tmp_path,
             "--out results/mini/run.json lies inside a subfolder of --results-dir results")
    _refused(indic, [*common, "--run", "x", "--out", "exp/sys1/best.pt"], capsys, tmp_path,
             "--out exp/sys1/best.pt lies inside --exp exp")


# ----------------------------------------------------------------------------------------- tcstar_salad
def test_tcstar_collect_refuses_exp_and_the_page_a_score_file(tcstar, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp" / "mini" / "sp01").mkdir(parents=True)
    (tmp_path / "exp" / "mini" / "sp01" / "best.pt").write_bytes(b"a model")
    (tmp_path / "results" / "mini" / "sp01").mkdir(parents=True)
    (tmp_path / "results" / "mini" / "sp01" / "speaker.json").write_text("{}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.txt").write_text("a user's\n")
    common = ["--exp-dir", "exp", "--data-dir", "data", "--dump-dir", "dump", "--speakers", "sp01"]
    _refused(tcstar, ["--collect", "mini", "--results-dir", "exp", *common], capsys, tmp_path,
             "--collect exp/mini lies inside --exp-dir exp")
    _refused(tcstar, ["--collect", "..", "--results-dir", "results", *common], capsys, tmp_path, "--collect '..'")
    _refused(tcstar, ["--collect", "notes", "--results-dir", ".", *common], capsys, tmp_path,
             "--collect notes exists and is not a results run folder")
    _refused(tcstar, ["--results-dir", "results", "--results-md", "results/mini/sp01/speaker.json"], capsys, tmp_path,
             "lies inside a subfolder of --results-dir results")
