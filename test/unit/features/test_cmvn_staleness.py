"""Issue 38 case 10: compute-feats with config A, then B, CMVN stats, then A again reused A's parts
and switched feats.scp back with no backup, keeping B's CMVN stats beside A's features (validation
passed, training normalised A's features with B's statistics). CMVN stats are now kept only beside
the very feats.scp, by content, they were computed from: a merge that switches feats.scp moves the
previous feature files, the stats included, to DATA_DIR/.backup/N and says so."""
from __future__ import annotations

import logging

import pytest

from speechkit.data.validate import validate
from speechkit.features.cmvn_stats import compute_cmvn_stats
from speechkit.features.extract import make_feats
from speechkit.features.io import FeatureReader


def _feats(data_dir, tmp_path, n_mels: int) -> None:
    make_feats(data_dir, tmp_path / "conf" / "logmel.yaml", tmp_path / "log", tmp_path / "feats",
               overrides=[f"n_mels={n_mels}"])


@pytest.fixture
def conf(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "logmel.yaml").write_text("type: logmel\nn_mels: 20\n")


def test_going_back_to_an_earlier_config_moves_the_other_features_cmvn_stats(tmp_path, data_dir, conf, caplog):
    _feats(data_dir, tmp_path, 20)                      # A
    _feats(data_dir, tmp_path, 24)                      # B (its parts are computed: everything moved aside)
    compute_cmvn_stats(data_dir)                        # global stats of B
    compute_cmvn_stats(data_dir, per_speaker=True)      # per-speaker stats of B
    b_scp = (data_dir / "feats.scp").read_bytes()
    b_stats = (data_dir / "cmvn_global.ark").read_bytes()
    backups = {p.name for p in (data_dir / ".backup").iterdir()}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _feats(data_dir, tmp_path, 20)                  # A again: its parts are reused, nothing recomputed
    assert FeatureReader(data_dir).dim == 20
    new = {p.name for p in (data_dir / ".backup").iterdir()} - backups
    assert len(new) == 1
    kept = data_dir / ".backup" / new.pop()
    assert (kept / "feats.scp").read_bytes() == b_scp and (kept / "cmvn_global.ark").read_bytes() == b_stats
    assert (kept / "cmvn.scp").is_file()
    assert not (data_dir / "cmvn_global.ark").exists() and not (data_dir / "cmvn.scp").exists()
    err = caplog.text
    assert "feats.scp switches to other features" in err and str(kept) in err and "cmvn_global.ark" in err
    with pytest.raises(FileNotFoundError, match="no CMVN stats"):
        FeatureReader(data_dir, cmvn="global")
    assert validate(data_dir, no_text=True) == []


def test_the_same_features_again_keep_their_cmvn_stats(tmp_path, data_dir, conf):
    _feats(data_dir, tmp_path, 20)
    compute_cmvn_stats(data_dir)
    stats = (data_dir / "cmvn_global.ark").read_bytes()
    backups = sorted((data_dir / ".backup").iterdir()) if (data_dir / ".backup").exists() else []
    _feats(data_dir, tmp_path, 20)                      # nothing changed: nothing moved
    assert (data_dir / "cmvn_global.ark").read_bytes() == stats
    assert (sorted((data_dir / ".backup").iterdir()) if (data_dir / ".backup").exists() else []) == backups
