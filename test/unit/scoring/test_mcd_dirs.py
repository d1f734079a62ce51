"""speechkit.scoring.mcd's feature-dir layer (the library form of speechkit-score-mcd): open_features,
frame_shift_of, score_world_dirs, write_per_utt, report_lines."""
from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from speechkit.features.world import WorldLayout
from speechkit.scoring.mcd import (
    frame_shift_of, open_features, report_lines, score_world, score_world_dirs, write_per_utt,
)
from speechkit.utils.fileio import DataError

LAY = WorldLayout(mcep_dim=6, num_bap=1)


def _feats(rng, t):
    lf0 = np.log(rng.uniform(90, 250, t))
    vuv = (rng.uniform(size=t) > 0.3).astype(float)
    return np.column_stack([rng.normal(size=(t, 6)), lf0, vuv, rng.normal(size=t)]).astype(np.float32)


def _dir(d, mats, mcep_dim=6, frame_shift="0.005"):
    d.mkdir(parents=True)
    with kaldiio.WriteHelper(f"ark,scp:{d / 'feats.ark'},{d / 'feats.scp'}") as w:
        for utt in sorted(mats):
            w(utt, mats[utt])
    (d / "feats.yaml").write_text(f"type: world\nsample_rate: 16000\nmcep_dim: {mcep_dim}\nframe_period: 5.0\n")
    if frame_shift is not None:
        (d / "frame_shift").write_text(frame_shift + "\n")
    return d


@pytest.fixture
def dirs(tmp_path):
    rng = np.random.default_rng(0)
    ref = {f"u{k}": _feats(rng, t) for k, t in enumerate([30, 21])}
    hyp = {u: _feats(rng, len(m)) for u, m in ref.items()}
    return _dir(tmp_path / "ref", ref), _dir(tmp_path / "hyp", hyp), ref, hyp


def test_open_features_dir_scp_and_missing(dirs, tmp_path):
    ref_dir, _, ref, _ = dirs
    reader, meta = open_features(ref_dir)
    assert meta == ref_dir and reader.utts == ["u0", "u1"]
    scp_reader, scp_meta = open_features(ref_dir / "feats.scp")
    assert scp_meta == ref_dir and np.array_equal(scp_reader.load("u1"), ref["u1"].astype(np.float64))
    assert scp_reader.source("u1") == f"{ref_dir / 'feats.scp'}[u1]"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no feats.scp"):
        open_features(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no such feature dir or scp file"):
        open_features(tmp_path / "nowhere")
    assert frame_shift_of(ref_dir) == 0.005 and frame_shift_of(tmp_path / "empty") is None


def test_both_readers_parse_feats_scp_as_every_table_reader_does(dirs, tmp_path):
    """A dir (FeatureDir) and an scp file (ScpReader) read feats.scp through the one reader: a byte-order mark
    is dropped, a duplicate key is an error naming its line (kaldiio.load_scp kept the last one silently)."""
    ref_dir, _, ref, _ = dirs
    lines = (ref_dir / "feats.scp").read_text().splitlines()
    (ref_dir / "feats.scp").write_bytes(b"\xef\xbb\xbf" + (ref_dir / "feats.scp").read_bytes())
    for target in (ref_dir, ref_dir / "feats.scp"):
        reader, _ = open_features(target)
        assert reader.utts == ["u0", "u1"] and np.array_equal(reader.load("u0"), ref["u0"].astype(np.float64))
    (ref_dir / "feats.scp").write_text("\n".join(lines + lines[:1]) + "\n")
    for target in (ref_dir, ref_dir / "feats.scp"):
        with pytest.raises(DataError, match=r"feats.scp:3: duplicate key 'u0' \(first on line 1\)"):
            open_features(target)
    (ref_dir / "feats.scp").write_text("\n".join(lines) + "\n")
    (ref_dir / "feats.ark").unlink()
    for target in (ref_dir, ref_dir / "feats.scp"):
        reader, _ = open_features(target)
        with pytest.raises(DataError, match=r"feats.scp: 'u1': cannot read .*feats.ark:\d+"):
            reader.load("u1")


def test_score_world_dirs_is_score_world(dirs, tmp_path):
    ref_dir, hyp_dir, ref, hyp = dirs
    res, lay, src = score_world_dirs(ref_dir, hyp_dir)
    assert lay == LAY and src == str(ref_dir / "feats.yaml")
    assert res.mcd_db == pytest.approx(score_world(ref, hyp, LAY).mcd_db, rel=1e-12)
    lines = report_lines(res, lay)
    assert lines[0] == f"utterances: 2, frames scored: 51 ({LAY.describe()})" and lines[-1] == res.summary()
    write_per_utt(tmp_path / "per_utt", res)
    rows = (tmp_path / "per_utt").read_text().splitlines()
    assert [r.split()[:2] for r in rows] == [["u0", "30"], ["u1", "21"]]


def test_masking_and_the_authors_report(dirs, tmp_path):
    ref_dir, hyp_dir, _, _ = dirs
    ali = tmp_path / "ali"
    ali.write_text("u0 0.0 0.05 sil\nu0 0.05 0.15 a\nu1 0.0 0.105 a\n")
    res, lay, _ = score_world_dirs(ref_dir, hyp_dir, mask_silence=ali, convention="authors")
    assert res.n_masked == 10
    lines = report_lines(res, lay, masked=True)
    assert "10 frames in silence phones zeroed" in lines[0] and lines[2] == "F0 RMSE over all 51 frames"
    with pytest.raises(ValueError, match="^silence_phones: no phone given"):
        score_world_dirs(ref_dir, hyp_dir, mask_silence=ali, silence_phones=",")
    (hyp_dir / "frame_shift").write_text("0.01\n")
    with pytest.raises(DataError, match="frame shifts differ: 0.005 s in"):
        score_world_dirs(ref_dir, hyp_dir, mask_silence=ali)


def test_layouts_must_agree(dirs, tmp_path):
    ref_dir, _, ref, _ = dirs
    other = _dir(tmp_path / "other", {u: m[:, 1:] for u, m in ref.items()}, mcep_dim=5)
    with pytest.raises(DataError, match="feature layouts differ: REF"):
        score_world_dirs(ref_dir, other)
