"""Forced aligner: config errors, and train-and-align on synthetic audio whose phone boundaries are
known (monophones, hybrid refinement, triphone / LDA+MLLT / SAT stages), save/load, skips, the
duration-outlier rule. The synthetic corpus (make_synthetic) is shared with test/unit/bin/test_align.py."""
import numpy as np
import pytest
import soundfile as sf

from speechkit.align import SIL, Aligner, AlignerConfig, load_aligner_config, train_aligner
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError

SR = 16000


def test_config_errors():
    with pytest.raises(ConfigError, match="sil_prob"):
        load_aligner_config(None, ["sil_prob=1.5"])
    with pytest.raises(ConfigError, match="num_stats"):
        load_aligner_config(None, ["num_stats=2"])


# ------------------------------------------------------------------------------ synthetic audio
#: 'phones' with distinct spectra: harmonic tones, high- and low-pass noise.
def _phone(kind: str, n: int, rng) -> np.ndarray:
    t = np.arange(n) / SR
    if kind == "a":
        y = sum(np.sin(2 * np.pi * 220 * h * t) / h for h in (1, 2, 3))
    elif kind == "i":
        y = np.sin(2 * np.pi * 2300 * t) + 0.5 * np.sin(2 * np.pi * 300 * t)
    elif kind == "s":
        y = np.diff(rng.normal(size=n + 1))
    elif kind == "m":
        y = np.cumsum(rng.normal(size=n))
        y = (y - np.convolve(y, np.ones(64) / 64, "same")) * 0.2
    else:  # silence
        return rng.normal(0, 1e-3, n)
    return 0.1 * y / (np.sqrt(np.mean(y ** 2)) + 1e-9)  # equal RMS: no phone masks its neighbour


def make_synthetic(root, n_utts=16, seed=0):
    """Data dir of concatenated synthetic phones; words separated by silence in some utterances.

    Returns (data_dir, reference) with reference utt -> [(start, end, label)] incl. 'sil'.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    wav, text, info, u2s, ref = {}, {}, {}, {}, {}
    for k in range(n_utts):
        spk = f"spk{k % 2}"
        utt = f"{spk}_u{k:02d}"
        words = [list(rng.choice(list("aism"), size=rng.integers(2, 4))) for _ in range(rng.integers(2, 4))]
        # no two equal phones in a row (their boundary would be invisible)
        flat = [p for w in words for p in w]
        for i in range(1, len(flat)):
            while flat[i] == flat[i - 1]:
                flat[i] = rng.choice(list("aism"))
        it = iter(flat)
        words = [[next(it) for _ in w] for w in words]
        segs, pieces, pos = [], [], 0

        def add(label, dur):
            nonlocal pos
            n = int(dur * SR)
            pieces.append(_phone(label, n, rng))
            segs.append((pos / SR, (pos + n) / SR, label))
            pos += n
        add(SIL, rng.uniform(0.1, 0.25))
        for wi, w in enumerate(words):
            if wi > 0 and rng.random() < 0.5:
                add(SIL, rng.uniform(0.08, 0.2))
            for ph in w:
                add(ph, rng.uniform(0.06, 0.16))
        add(SIL, rng.uniform(0.1, 0.25))
        path = root / f"{utt}.wav"
        sf.write(path, np.concatenate(pieces).astype(np.float32), SR)
        wav[utt] = str(path)
        toks = [p for w in words for p in w]
        text[utt] = " ".join(toks)
        info[utt] = " ".join(f"0:{wi}:{wi}" for wi, w in enumerate(words) for _ in w)
        u2s[utt] = spk
        ref[utt] = segs
    for name, table in (("wav.scp", wav), ("text", text), ("phone_info", info), ("utt2spk", u2s)):
        (root / name).write_text("".join(f"{u} {table[u]}\n" for u in sorted(table)))
    spk2utt = {}
    for u in sorted(u2s):
        spk2utt.setdefault(u2s[u], []).append(u)
    (root / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in spk2utt.items()))
    return root, ref


FAST = ["num_iters=12", "baum_welch_iters=6", "realign_iters=[7,9,11]", "max_iter_inc=8", "total_gauss=60"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("align")
    data, ref = make_synthetic(root / "data")
    config = load_aligner_config(None, FAST)
    aligner, result = train_aligner(data, root / "exp", config)
    return root, data, ref, aligner, result


def test_train_and_align_synthetic_reaches_boundary_accuracy(trained):
    root, data, ref, aligner, result = trained
    assert not result.unaligned and set(result.alignments) == set(ref)
    errs, sil_ok = [], 0
    for utt, segs in result.alignments.items():
        # contiguous from 0 to the end of the audio; the non-sil labels are the text
        assert segs[0][0] == 0.0 and segs[-1][1] == pytest.approx(ref[utt][-1][1])
        assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
        assert [p for _, _, p in segs if p != SIL] == [p for _, _, p in ref[utt] if p != SIL]
        sil_ok += [p for _, _, p in segs] == [p for _, _, p in ref[utt]]
        hyp = [s for s in segs if s[2] != SIL]
        want = [s for s in ref[utt] if s[2] != SIL]
        errs += [abs(h[0] - r[0]) for h, r in zip(hyp, want)] + [abs(h[1] - r[1]) for h, r in zip(hyp, want)]
    errs = np.array(errs)
    assert np.mean(errs <= 0.02) >= 0.85 and np.mean(errs <= 0.04) >= 0.98, f"within 20 ms: {np.mean(errs <= 0.02):.3f}"
    assert sil_ok >= 0.9 * len(ref)  # optional silences found where they are
    # the saved model files
    exp = root / "exp"
    for name in ("final.mdl", "phones.txt", "config.yaml", "log/train.log"):
        assert (exp / name).is_file()
    assert (exp / "phones.txt").read_text().split("\n")[0] == "a 0"


def test_load_round_trip_gives_the_same_alignments(trained):
    root, data, ref, aligner, result = trained
    again = Aligner.load(root / "exp").align(data)
    assert again.alignments == result.alignments


def test_skips_are_counted_with_reasons(trained, tmp_path):
    root, data, ref, aligner, result = trained
    d = tmp_path / "d"
    d.mkdir()
    utts = sorted(ref)[:4]
    wav = dict(line.split(" ", 1) for line in (data / "wav.scp").read_text().splitlines())
    text = dict(line.split(" ", 1) for line in (data / "text").read_text().splitlines())
    wav[utts[1]] = str(tmp_path / "missing.wav\n")
    text[utts[2]] = "a z a\n"  # unknown token
    text[utts[3]] = "\n"  # empty
    (d / "wav.scp").write_text("".join(f"{u} {wav[u].strip()}\n" for u in utts))
    (d / "text").write_text("".join(f"{u} {text[u].strip()}\n".replace(" \n", "\n") for u in utts))
    (d / "utt2spk").write_text("".join(f"{u} {u.split('_')[0]}\n" for u in utts))
    res = aligner.align(d)
    assert list(res.alignments) == [utts[0]]
    assert res.unaligned[utts[1]].startswith("unreadable audio")
    assert res.unaligned[utts[2]] == "unknown tokens: z"
    assert res.unaligned[utts[3]] == "empty text"
    # too few frames: 40 tokens in a 0.5 s utterance (needs 3 frames each)
    short = tmp_path / "short"
    short.mkdir()
    sf.write(short / "x.wav", np.zeros(SR // 2, np.float32) + 0.01, SR)
    (short / "wav.scp").write_text(f"s_x {short / 'x.wav'}\n")
    (short / "text").write_text("s_x " + " ".join(["a", "i"] * 20) + "\n")
    (short / "utt2spk").write_text("s_x s\n")
    res = aligner.align(short)
    assert res.unaligned["s_x"].startswith("too few frames")


def test_bad_phone_info_is_a_data_error(trained, tmp_path):
    root, data, ref, aligner, result = trained
    import shutil
    d = tmp_path / "d"
    shutil.copytree(data, d)
    lines = (d / "phone_info").read_text().splitlines()
    lines[1] = lines[1] + " 0:0:9"
    (d / "phone_info").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"phone_info:2: .* fields but text has"):
        aligner.align(d)


def test_hybrid_refinement_is_saved_and_reloaded(tmp_path):
    data, ref = make_synthetic(tmp_path / "data", n_utts=8, seed=2)
    cfg = load_aligner_config(None, FAST + ["refine_iters=1", "mlp_epochs=2", "mlp_hidden=32"])
    aligner, result = train_aligner(data, tmp_path / "exp", cfg)
    assert aligner.mlp is not None and not result.unaligned
    again = Aligner.load(tmp_path / "exp")
    assert again.mlp is not None and again.mlp.context == cfg.mlp_context
    assert again.align(data).alignments == result.alignments


def test_segments_and_command_pipes_give_the_same_alignments(trained, tmp_path):
    root, data, ref, aligner, result = trained
    utts = [u for u in sorted(ref) if u.startswith("spk0")][:3]
    wav = dict(line.split(" ", 1) for line in (data / "wav.scp").read_text().splitlines())
    text = dict(line.split(" ", 1) for line in (data / "text").read_text().splitlines())
    plain, seg = tmp_path / "plain", tmp_path / "seg"
    plain.mkdir()
    seg.mkdir()
    pieces, segments, pos = [], [], 0.0
    for u in utts:
        x, _ = sf.read(wav[u], dtype="float32")
        pieces.append(x)
        segments.append(f"{u} spk0_rec {pos} {pos + len(x) / SR}\n")
        pos += len(x) / SR
    sf.write(tmp_path / "rec.wav", np.concatenate(pieces), SR, subtype="FLOAT")
    (seg / "wav.scp").write_text(f"spk0_rec cat {tmp_path / 'rec.wav'} |\n")
    (seg / "segments").write_text("".join(segments))
    (plain / "wav.scp").write_text("".join(f"{u} {wav[u]}\n" for u in utts))
    for d in (plain, seg):
        (d / "text").write_text("".join(f"{u} {text[u]}\n" for u in utts))
        (d / "utt2spk").write_text("".join(f"{u} spk0\n" for u in utts))
    a, b = aligner.align(plain), aligner.align(seg)
    assert not a.unaligned and not b.unaligned
    assert a.alignments.keys() == b.alignments.keys()
    for u in utts:
        for (s1, e1, p1), (s2, e2, p2) in zip(a.alignments[u], b.alignments[u]):
            assert p1 == p2 and s1 == pytest.approx(s2, abs=1e-6) and e1 == pytest.approx(e2, abs=1e-3)


def test_triphone_lda_mllt_and_sat_stages_train_save_and_reload(tmp_path):
    data, ref = make_synthetic(tmp_path / "data", n_utts=12, seed=4)
    cfg = load_aligner_config(None, FAST + ["tri_leaves=40", "tri_min_count=20", "tri_iters=4", "tri_realign_iters=[2]",
                                            "tri_total_gauss=80", "lda_dim=20", "lda_iters=4", "lda_realign_iters=[2]",
                                            "mllt_iters=[1,3]", "sat_iters=3", "sat_fmllr_iters=[1]",
                                            "sat_realign_iters=[2]", "fmllr_min_frames=100"])
    aligner, result = train_aligner(data, tmp_path / "exp", cfg)
    assert not result.unaligned
    assert aligner.ctx_pdf is not None and aligner.num_pdfs == aligner.gmm.num_pdfs > 4 * 3 + 3
    assert aligner.transform.shape == (20, cfg.n_mfcc * (2 * cfg.lda_context + 1)) and aligner.gmm.dim == 20
    errs = []
    for utt, segs in result.alignments.items():
        hyp = [s for s in segs if s[2] != SIL]
        want = [s for s in ref[utt] if s[2] != SIL]
        assert [p for _, _, p in hyp] == [p for _, _, p in want]
        errs += [abs(h[0] - r[0]) for h, r in zip(hyp, want)]
    assert np.mean(np.array(errs) <= 0.02) >= 0.85
    again = Aligner.load(tmp_path / "exp")
    assert np.array_equal(again.ctx_pdf, aligner.ctx_pdf) and np.allclose(again.transform, aligner.transform)
    assert again.align(data).alignments == result.alignments


def test_duration_outliers_are_left_out_of_the_statistics():
    from speechkit.align.train import _accumulate, _duration_inliers

    al = Aligner(AlignerConfig(num_states=1, optional_silence=False, duration_outlier_k=2.0), ["a", "b"])
    # 'a' lasts 4 frames in nine tokens and 40 in one (|log 10| / 0.25 > 2: an outlier); 'b' always 3
    toks = ["a", "b"] * 10
    durs = [4, 3] * 10
    durs[0] = 40
    g = al.make_graph(toks)
    path = np.repeat(np.arange(len(toks)), durs)
    keep = _duration_inliers(al, [g], [path], 2.0)[0]
    assert keep.shape == path.shape and (~keep).sum() == 40 and not keep[:40].any()
    x = np.arange(len(path), dtype=np.float64)[:, None]
    frames, counts = _accumulate(al, [g], [x], [path])
    assert len(frames[0]) == 9 * 4 and len(frames[1]) == 10 * 3
    al.config.duration_outlier_k = 0.0
    frames, _ = _accumulate(al, [g], [x], [path])
    assert len(frames[0]) == 40 + 9 * 4
