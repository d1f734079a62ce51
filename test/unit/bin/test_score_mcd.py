"""speechkit-score-mcd end to end on small kaldiio arks: last line, JSON, masking, bad input."""
from __future__ import annotations

import json
import math
import re

import kaldiio
import numpy as np
import pytest

from speechkit.bin import score_mcd as cli
from speechkit.features.world import WorldLayout
from speechkit.scoring.mcd import score_world

LAST_LINE = re.compile(r"^MCD \d+\.\d\d dB \(with c0 \d+\.\d\d\)  F0 RMSE \d+\.\d\d Hz  V/UV \d+\.\d %$")
LAY = WorldLayout(mcep_dim=6, num_bap=1)  # 9 columns


def feats(rng, t):
    m = rng.normal(size=(t, 6))
    lf0 = np.log(rng.uniform(90, 250, t))
    vuv = (rng.uniform(size=t) > 0.3).astype(float)
    return np.column_stack([m, lf0, vuv, rng.normal(size=t)]).astype(np.float32)


def write_dir(d, mats, mcep_dim=6, frame_shift="0.005"):
    d.mkdir(parents=True, exist_ok=True)
    with kaldiio.WriteHelper(f"ark,scp:{d / 'feats.ark'},{d / 'feats.scp'}") as w:
        for utt in sorted(mats):
            w(utt, mats[utt])
    (d / "feats.yaml").write_text(f"# resolved world frontend config\ntype: world\nsample_rate: 16000\n"
                                  f"mcep_dim: {mcep_dim}\nframe_period: 5.0\n")
    if frame_shift is not None:
        (d / "frame_shift").write_text(frame_shift + "\n")
    return d


@pytest.fixture
def dirs(tmp_path):
    rng = np.random.default_rng(0)
    ref = {f"spk_{k:02d}": feats(rng, t) for k, t in enumerate([30, 45, 21])}
    hyp = {u: feats(rng, len(m)) for u, m in ref.items()}
    return write_dir(tmp_path / "ref", ref), write_dir(tmp_path / "hyp", hyp), ref, hyp


def run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_end_to_end(dirs, tmp_path, capsys):
    ref_dir, hyp_dir, ref, hyp = dirs
    js, per = tmp_path / "out" / "scores.json", tmp_path / "out" / "per_utt"
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--json", js, "--per-utt", per)
    assert rc == 0, err
    last = out.strip().splitlines()[-1]
    assert LAST_LINE.match(last), last
    expect = score_world(ref, hyp, LAY)  # float32 arks read back exactly
    assert last == expect.summary()
    res = json.loads(js.read_text())
    assert res["mcd_db"] == pytest.approx(expect.mcd_db, rel=1e-12)
    assert res["mcd_with_c0_db"] == pytest.approx(expect.mcd_with_c0_db, rel=1e-12)
    assert res["f0_rmse_hz"] == pytest.approx(expect.f0_rmse_hz, rel=1e-12)
    assert res["vuv_accuracy"] == pytest.approx(expect.vuv_accuracy, rel=1e-12)
    assert res["mcd_db_utt_mean"] == pytest.approx(expect.mcd_db_utt_mean, rel=1e-12)
    assert (res["n_utts"], res["n_frames"], res["n_masked"], res["mcep_dim"]) == (3, 96, 0, 6)
    assert [u["utt"] for u in res["utterances"]] == sorted(ref)
    lines = per.read_text().splitlines()
    assert len(lines) == 3 and lines[0].split()[:2] == ["spk_00", "30"]
    assert float(lines[0].split()[2]) == pytest.approx(expect.utts[0].mcd_db, abs=1e-4)
    # scp files given directly (feats.yaml is read from their dir)
    rc, out2, _ = run(capsys, ref_dir / "feats.scp", hyp_dir / "feats.scp")
    assert rc == 0 and out2.strip().splitlines()[-1] == last


def test_mask_silence(dirs, tmp_path, capsys):
    ref_dir, hyp_dir, ref, hyp = dirs
    ali = tmp_path / "phone_alignments"
    lines, keep = [], {}
    for u, m in ref.items():
        t = len(m)
        end = (t - 1) * 0.005
        lines += [f"{u} 0.0 0.05 sil", f"{u} 0.05 {end - 0.03:.3f} a", f"{u} {end - 0.03:.3f} {end:.3f} sil"]
        k = np.ones(t, bool)
        k[:10] = False             # [0, 50) ms
        k[t - 7:] = False          # from end - 30 ms, the last frame on the end included
        keep[u] = k
    ali.write_text("\n".join(lines) + "\n")
    js = tmp_path / "m.json"
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--mask-silence", ali, "--json", js)
    assert rc == 0, err
    expect = score_world({u: m[keep[u]] for u, m in ref.items()}, {u: m[keep[u]] for u, m in hyp.items()}, LAY)
    assert out.strip().splitlines()[-1] == expect.summary()
    res = json.loads(js.read_text())
    assert res["n_masked"] == 3 * 17 and res["n_frames"] == 96 - 51 and res["silence_phones"] == ["sil"]
    assert res["mcd_db"] == pytest.approx(expect.mcd_db, rel=1e-12)


def test_convention_authors(dirs, tmp_path, capsys):
    ref_dir, hyp_dir, ref, hyp = dirs
    ali = tmp_path / "phone_alignments"
    ali.write_text("".join(f"{u} 0.0 0.05 sil\n{u} 0.05 {len(m) * 0.005:.3f} a\n" for u, m in ref.items()))
    js, per = tmp_path / "a.json", tmp_path / "a.per_utt"
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--mask-silence", ali, "--convention", "authors", "--json", js,
                       "--per-utt", per)
    assert rc == 0, err
    align = {u: [(0.0, 0.05, "sil"), (0.05, len(m) * 0.005, "a")] for u, m in ref.items()}
    expect = score_world(ref, hyp, LAY, alignments=align, convention="authors")
    assert out.strip().splitlines()[-1] == expect.summary() and "authors' convention" in expect.summary()
    assert "30 frames in silence phones zeroed" in out
    res = json.loads(js.read_text())
    assert res["convention"] == "authors" and res["n_masked"] == 30
    assert res["mcd_db"] == pytest.approx(expect.mcd_db, rel=1e-12)
    assert res["f0_rmse_hz"] == pytest.approx(expect.f0_rmse_hz, rel=1e-12)
    assert res["vuv_accuracy"] == pytest.approx(expect.vuv_accuracy, rel=1e-12)
    assert float(per.read_text().split()[2]) == pytest.approx(expect.utts[0].mcd_db, abs=1e-4)
    ours = score_world(ref, hyp, LAY, alignments=align)
    assert res["mcd_db"] != pytest.approx(ours.mcd_db)     # another figure than the default's
    with pytest.raises(SystemExit) as e:
        run(capsys, ref_dir, hyp_dir, "--convention", "paper")
    assert e.value.code == 2 and "invalid choice: 'paper'" in capsys.readouterr().err


@pytest.mark.parametrize("case, message", [
    ("frames", r"spk_01: 45 frames in .*ref but 44 in .*hyp"),
    ("missing", r"no prediction for 'spk_00' \(2 of the 3 utterances"),
    ("layout", r"feature layouts differ: REF mcep_dim=6, num_bap=1 \(9 dims\) from .*ref/feats.yaml, "
               r"HYP mcep_dim=5, num_bap=1 \(8 dims\) from .*hyp/feats.yaml"),
    ("nan", r"hyp/feats.scp\[spk_02\]: NaN or Inf in frame 3"),
    ("nodir", r"no such feature dir or scp file"),
])
def test_bad_input(tmp_path, capsys, case, message):
    rng = np.random.default_rng(1)
    ref = {f"spk_{k:02d}": feats(rng, t) for k, t in enumerate([30, 45, 21])}
    hyp = {u: feats(rng, len(m)) for u, m in ref.items()}
    mcep_dim = 6
    if case == "frames":
        hyp["spk_01"] = hyp["spk_01"][:44]
    elif case == "missing":
        hyp = {"spk_02": hyp["spk_02"], "extra": hyp["spk_00"]}
    elif case == "layout":
        hyp = {u: m[:, 1:] for u, m in hyp.items()}
        mcep_dim = 5
    elif case == "nan":
        hyp["spk_02"][3, 0] = np.inf
    ref_dir = write_dir(tmp_path / "ref", ref)
    hyp_dir = write_dir(tmp_path / "hyp", hyp, mcep_dim=mcep_dim) if case != "nodir" else tmp_path / "nope"
    js = tmp_path / "s.json"
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--json", js)
    assert rc == 1 and re.search(message, err), err
    assert "Traceback" not in err and out == "" and not js.exists()


def test_bad_alignment_and_nan_f0(tmp_path, capsys):
    rng = np.random.default_rng(2)
    ref = {"u1": feats(rng, 20)}
    hyp = {"u1": feats(rng, 20)}
    hyp["u1"][:, 7] = 0.0  # nothing voiced in HYP
    ref_dir, hyp_dir = write_dir(tmp_path / "ref", ref), write_dir(tmp_path / "hyp", hyp, frame_shift=None)
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--json", tmp_path / "s.json")
    assert rc == 0 and "F0 RMSE nan Hz" in out and "F0 RMSE is nan" in err
    assert json.loads((tmp_path / "s.json").read_text())["f0_rmse_hz"] is None
    ali = tmp_path / "ali"
    ali.write_text("u1 0.0 0.5 sil\n")  # 0.5 s, features 0.1 s
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--mask-silence", ali)
    assert rc == 1 and "u1: phone alignment ends at 0.500 s" in err
    ali.write_text("u9 0.0 0.1 a\n")
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--mask-silence", ali)
    assert rc == 1 and "no phone alignment for 'u1'" in err
    ali.write_text("u1 0.0 0.1\n")
    rc, out, err = run(capsys, ref_dir, hyp_dir, "--mask-silence", ali)
    assert rc == 1 and f"{ali}:1: expected" in err
    assert math.isclose(float((ref_dir / "frame_shift").read_text()), 0.005)
