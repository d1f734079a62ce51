"""speechkit.scoring.abx_report: score_abx_dir (the library form of speechkit-score-abx), AbxReport, check_device."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.scoring.abx import abx_error, bootstrap_interval, paired_bootstrap_difference
from speechkit.scoring.abx_items import read_item_file, write_item_file
from speechkit.scoring.abx_report import AbxReport, check_device, score_abx_dir
from speechkit.utils.cli import error_message

from test_abx import synthetic  # noqa: E402  (test/unit/scoring is on sys.path under pytest's rootdir imports)


def _txt_dir(d, feats):
    d.mkdir()
    for utt, m in feats.items():
        np.savetxt(d / f"{utt}.txt", m, fmt="%.17g")
    return d


@pytest.fixture
def scored(tmp_path):
    feats, items = synthetic(7, dur=0.3)
    item = tmp_path / "abx.item"
    write_item_file(item, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items])
    noisy = {f: m + np.random.default_rng(1).normal(scale=0.5, size=m.shape) for f, m in feats.items()}
    return _txt_dir(tmp_path / "feats", feats), _txt_dir(tmp_path / "noisy", noisy), item, feats, noisy


def test_score_abx_dir_is_abx_error_and_the_report_ends_with_the_figure(scored):
    fdir, _, item, feats, _ = scored
    rep = score_abx_dir(fdir, item)
    lib = abx_error(feats, read_item_file(item))
    assert isinstance(rep, AbxReport) and rep.result.error == pytest.approx(lib.error, abs=1e-12)
    assert rep.bootstrap is None and rep.paired is None and rep.reference is None
    lines = rep.lines()
    assert lines[-1] == lib.summary() and lines[0].startswith("distance: cosine; frame shift 0.01 s; convention zr2019")
    d = rep.to_dict()
    assert d["feature_dir"] == str(fdir) and d["item_file"] == str(item) and "bootstrap" not in d
    assert d["error"] == pytest.approx(lib.error)


def test_bootstrap_and_paired(scored):
    fdir, ndir, item, feats, noisy = scored
    rep = score_abx_dir(ndir, item, bootstrap=50, bootstrap_seed=3, paired_with=fdir)
    items = read_item_file(item)
    lib, ref = abx_error(noisy, items), abx_error(feats, items)
    assert rep.bootstrap.summary() == bootstrap_interval(lib, 50, seed=3).summary()
    paired = paired_bootstrap_difference(lib, ref, 50, seed=3)
    assert rep.paired.difference == pytest.approx(paired.difference, abs=1e-9)
    d = rep.to_dict()
    assert d["paired"]["reference_dir"] == str(fdir) and d["paired"]["reference_error"] == pytest.approx(ref.error)
    lines = rep.lines()
    assert lines[-3] == f"reference {fdir}: {rep.reference.summary()}"
    assert lines[-2].startswith(paired.summary()) and lines[-2].endswith("speaker-sampling noise")


@pytest.mark.parametrize("kwargs, message, cli", [
    (dict(tolerance=-1), "tolerance must be >= 0, got -1", "--tolerance must be >= 0, got -1"),
    (dict(bootstrap=-2), "bootstrap must be >= 0, got -2", "--bootstrap must be >= 0, got -2"),
    (dict(num_threads=0), "num_threads must be >= 1, got 0", "--num-threads must be >= 1, got 0"),
    (dict(paired_with="x"), "paired_with needs bootstrap N", "--paired-with needs --bootstrap N"),
    (dict(device="tpu"), "device tpu: ", "--device tpu: "),
])
def test_bad_options_name_the_parameter(scored, kwargs, message, cli):
    """The library names the parameter; speechkit-score-abx spells it as its flag."""
    fdir, _, item, _, _ = scored
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")) as e:
        score_abx_dir(fdir, item, **kwargs)
    assert error_message(e.value, {"tolerance": "--tolerance", "bootstrap": "--bootstrap", "num_threads": "--num-threads",
                                   "paired_with": "--paired-with", "device": "--device"}).startswith(cli)


def test_check_device():
    assert check_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="^device nonsense: not a torch device"):
        check_device("nonsense")
    with pytest.raises(ValueError, match="^dev meta: the DTW runs on cpu or cuda"):
        check_device("meta", param="dev")
