"""RNN-T search: scripted joint (greedy by hand, beam vs exhaustive), beam 1 == greedy, streaming
== full-utterance, LID-free decoding, early switch-off, T_avg."""
import itertools
import math

import pytest
import torch

from speechkit.decode.rnnt_search import (
    BeamDecoder, DecodeConfig, GreedyDecoder, RecognitionResult, StreamingRecognizer, recognize, recognize_batch,
    t_avg,
)
from speechkit.models.rnnt import RNNT, RNNTConfig


# A scripted "model" (the scripted_model fixture, conftest.py): the joint output is a table indexed by
# (frame t, labels emitted u, last label).
def frames(T):
    return torch.arange(T, dtype=torch.float32)[:, None]


def test_greedy_on_hand_set_joint(scripted_model):
    T, U, V = 3, 5, 5
    logits = torch.zeros(T, U, V, V)
    logits[..., 0] = 3.0  # blank by default
    # script: frame 0 emits 2; frame 1 nothing; frame 2 emits 3 then 4
    logits[0, 0, :, 2] = 6.0
    logits[2, 1, :, 3] = 6.0
    logits[2, 2, :, 4] = 6.0
    lp = torch.log_softmax(logits, -1)
    m = scripted_model(lp)
    want = {3: [2, 3, 4], 2: [2, 3, 4], 1: [2, 3]}
    for cap, tokens in want.items():
        d = GreedyDecoder(m, "x", max_symbols_per_frame=cap)
        d.advance(frames(T))
        got, score = d.best()
        assert got == tokens, cap
        assert d.num_frames == T
    # log-prob of the greedy path (cap 3): emit 2, blank | blank | emit 3, emit 4, blank
    d = GreedyDecoder(m, "x", 3)
    d.advance(frames(T))
    hand = lp[0, 0, 0, 2] + lp[0, 1, 2, 0] + lp[1, 1, 2, 0] + lp[2, 1, 2, 3] + lp[2, 2, 3, 4] + lp[2, 3, 4, 0]
    assert d.best()[1] == pytest.approx(float(hand), abs=1e-5)


def exhaustive_one_symbol_per_frame(lp, T):
    """Label sequence with the highest total probability, summing over every path that emits at
    most one symbol per frame (what modified beam search computes without pruning)."""
    V = lp.size(-1)
    totals = {}
    for path in itertools.product(range(V), repeat=T):
        u, last, logp, labels = 0, 0, 0.0, []
        for t, s in enumerate(path):
            logp += float(lp[t, u, last, s])
            if s != 0:
                u, last = u + 1, s
                labels.append(s)
        key = tuple(labels)
        totals[key] = logp if key not in totals else float(torch.logaddexp(torch.tensor(totals[key]), torch.tensor(logp)))
    best = max(totals, key=totals.get)
    return list(best), totals[best]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_without_pruning_equals_exhaustive_search(seed, scripted_model):
    g = torch.Generator().manual_seed(seed)
    T, V = 4, 3
    lp = torch.log_softmax(torch.randn(T, T + 1, V, V, generator=g) * 1.5, -1)
    m = scripted_model(lp)
    d = BeamDecoder(m, "x", beam=V**T)
    d.advance(frames(T))
    tokens, score = d.best()
    want_tokens, want_score = exhaustive_one_symbol_per_frame(lp, T)
    assert tokens == want_tokens
    assert score == pytest.approx(want_score, abs=1e-5)


def test_beam_finds_better_sequence_than_greedy(scripted_model):
    # frame 0: blank 0.6 / a 0.4; after "a" frame 1 is sure; after blank frame 1 is split between
    # blank and b: greedy takes blank (0.6) then at best 0.6*0.5 = 0.3 < 0.4
    T, V = 2, 3
    p = torch.full((T, T + 1, V, V), 1e-6)
    p[0, 0, :, 0], p[0, 0, :, 1] = 0.6, 0.4
    p[1, 0, :, 0], p[1, 0, :, 2] = 0.5, 0.5
    p[1, 1, :, 0] = 1.0
    lp = (p / p.sum(-1, keepdim=True)).log()
    m = scripted_model(lp)
    g = GreedyDecoder(m, "x", 1)
    g.advance(frames(T))
    b = BeamDecoder(m, "x", beam=2)
    b.advance(frames(T))
    assert g.best()[0] in ([], [2]) and b.best()[0] == [1]
    assert math.exp(b.best()[1]) == pytest.approx(0.4, rel=1e-4)


# --------------------------------------------------------------------------------------------
# Real (random, tiny) models.
VOCAB = {"hi": 9, "ta": 7, "gu": 8}
RAW_DIM = 10


def tiny(variant="multisoftmax_lid", seed=0):
    torch.manual_seed(seed)
    return RNNT(RNNTConfig.from_dict({
        "vocab_sizes": VOCAB, "variant": variant, "input_dim": 8 * RAW_DIM, "encoder_layers": 2,
        "encoder_hidden": 24, "encoder_proj": 0, "pred_layers": 2, "pred_hidden": 16, "pred_proj": 0,
        "embed_dim": 8, "joint_dim": 16,
    })).eval()


def feats(T=100, seed=3):
    return torch.randn(T, RAW_DIM, generator=torch.Generator().manual_seed(seed))


def test_beam_width_one_equals_greedy_one_symbol_per_frame():
    m = tiny("multisoftmax")
    for lang in VOCAB:
        g = recognize(m, feats(), DecodeConfig(method="greedy", max_symbols_per_frame=1), lang=lang)
        b = recognize(m, feats(), DecodeConfig(method="beam", beam=1), lang=lang)
        assert g.tokens == b.tokens and len(g.tokens) > 0
        assert g.scores[lang] == pytest.approx(b.scores[lang], abs=1e-4)


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_streaming_chunks_equal_full_utterance(method):
    m = tiny()
    x = feats(130)
    full = recognize(m, x, DecodeConfig(mode="lid_free", method=method, beam=3))
    assert full.num_frames == (130 - 8) // 3 + 1
    for chunk in (1, 5, 17):
        r = recognize(m, x, DecodeConfig(mode="lid_free", method=method, beam=3, chunk_frames=chunk))
        assert r.hyps == full.hyps and r.language == full.language
        assert r.decoder_frames == full.decoder_frames and r.num_frames == full.num_frames
        for k in VOCAB:
            assert r.lid_posteriors[k] == pytest.approx(full.lid_posteriors[k], abs=1e-6)
            assert r.scores[k] == pytest.approx(full.scores[k], abs=1e-3)


def test_partial_hypotheses_per_chunk():
    m = tiny()
    partials = []
    final = recognize(m, feats(90), DecodeConfig(mode="lid_free", chunk_frames=10), on_partial=partials.append)
    assert len(partials) == 9
    assert partials[0]["hi"] == [] or len(partials[0]["hi"]) <= len(final.hyps["hi"])
    for p in partials:  # greedy partial hypotheses only grow
        for k in VOCAB:
            assert final.hyps[k][: len(p[k])] == p[k]
    assert partials[-1] == final.hyps


def test_oracle_equals_lid_free_hypothesis_of_that_language():
    m = tiny()
    lf = recognize(m, feats(), DecodeConfig(mode="lid_free"))
    for lang in VOCAB:
        o = recognize(m, feats(), DecodeConfig(mode="oracle"), lang=lang)
        assert o.language == lang and o.tokens == lf.hyps[lang] and list(o.hyps) == [lang]
    assert lf.language == max(lf.lid_posteriors, key=lf.lid_posteriors.get)
    assert lf.tokens == lf.hyps[lf.language]
    assert sum(lf.lid_posteriors.values()) == pytest.approx(1.0)


def test_switch_off_with_infinite_threshold_equals_lid_free():
    m = tiny()
    plain = recognize(m, feats(), DecodeConfig(mode="lid_free"))
    never = recognize(m, feats(), DecodeConfig(mode="lid_free", tau=0, s_th=math.inf))
    assert never.switched_off_at == {k: None for k in VOCAB}
    assert never.hyps == plain.hyps and never.language == plain.language
    assert never.decoder_frames == plain.decoder_frames == {k: plain.num_frames for k in VOCAB}
    assert never.active_decoders_per_frame == 3.0


def test_low_posterior_language_switched_off_after_tau():
    m = tiny()
    with torch.no_grad():  # LID head: constant posteriors, "ta" far below the others
        m.lid_head.weight.zero_()
        m.lid_head.bias.copy_(torch.tensor([0.1, -20.0, 0.0]))
    tau = 5
    r = recognize(m, feats(), DecodeConfig(mode="lid_free", tau=tau, s_th=50.0, chunk_frames=7))
    T = r.num_frames
    # gap after t frames is ~20t: the first check allowed (t = tau + 1) stops "ta" before frame tau
    assert r.switched_off_at == {"hi": None, "ta": tau, "gu": None}
    assert r.decoder_frames == {"hi": T, "ta": tau, "gu": T}
    assert r.language == "hi"
    assert r.active_decoders_per_frame == pytest.approx((2 * T + tau) / T)
    # its hypothesis is what it had after tau frames
    short = recognize(m, feats()[: 3 * (tau - 1) + 8], DecodeConfig(mode="oracle"), lang="ta")
    assert short.num_frames == tau and r.hyps["ta"] == short.tokens
    # a larger tau delays the stop; without switch-off nothing stops
    assert recognize(m, feats(), DecodeConfig(mode="lid_free", tau=12, s_th=50.0)).decoder_frames["ta"] == 12


def _result(num_frames, frames_per_lang):
    return RecognitionResult(
        language="hi", tokens=[], hyps={}, scores={}, lid_posteriors=None, decoder_frames=frames_per_lang,
        switched_off_at={}, num_frames=num_frames, num_input_frames=0, audio_seconds=1.0,
        decode_seconds=0.1, rtf=0.1,
    )


def test_t_avg_by_hand():
    rs = [_result(10, {"hi": 10, "ta": 10, "gu": 10}), _result(20, {"hi": 20, "ta": 5, "gu": 5})]
    # (30/10 + 30/20) / 2 = (3 + 1.5) / 2
    assert t_avg(rs) == pytest.approx(2.25)
    with pytest.raises(ValueError):
        t_avg([])


def test_rtf_and_timing_fields():
    r = recognize(tiny(), feats(100), DecodeConfig(mode="lid_free"))
    assert r.num_input_frames == 100 and r.audio_seconds == pytest.approx(1.0)
    assert r.decode_seconds > 0 and r.rtf == pytest.approx(r.decode_seconds / r.audio_seconds)
    assert set(r.to_dict()) >= {"language", "tokens", "hyps", "lid_posteriors", "decoder_frames", "rtf"}


def test_vanilla_and_onehot_oracle():
    v = tiny("vanilla")
    r = recognize(v, feats(), DecodeConfig())
    assert r.language is None and list(r.hyps) == ["union"]
    assert all(0 < t < v.union_vocab_size for t in r.tokens)
    o = tiny("onehot")
    assert recognize(o, feats(), lang="gu").language == "gu"


def test_errors():
    with pytest.raises(ValueError, match="LID head"):
        StreamingRecognizer(tiny("multisoftmax"), DecodeConfig(mode="lid_free"))
    with pytest.raises(ValueError, match="needs the language"):
        StreamingRecognizer(tiny("multisoftmax"), DecodeConfig(mode="oracle"))
    with pytest.raises(ValueError, match="unknown language"):
        StreamingRecognizer(tiny("multisoftmax"), DecodeConfig(), lang="en")
    with pytest.raises(ValueError, match="too short"):
        recognize(tiny(), feats(7), DecodeConfig(mode="lid_free"))
    with pytest.raises(ValueError, match="beam"):
        BeamDecoder(tiny(), "hi", beam=0)
    with pytest.raises(ValueError, match="s_th"):
        StreamingRecognizer(tiny(), DecodeConfig(mode="lid_free", tau=3, s_th=-1.0))
    rec = StreamingRecognizer(tiny(), DecodeConfig(mode="lid_free"))
    rec.accept(feats(20))
    rec.finalize()
    with pytest.raises(ValueError, match="finalized"):
        rec.accept(feats(5))
    with pytest.raises(ValueError, match="encoder input"):
        StreamingRecognizer(tiny(), DecodeConfig(mode="lid_free")).accept(torch.randn(20, RAW_DIM + 1))



def test_switch_off_never_stops_every_decoder():
    """A language stopped early whose score later overtakes the others must not stop them all."""
    m = tiny()
    x = feats()[: 3 * 11 + 8]  # 12 encoder frames, decoded in one chunk
    logits = torch.zeros(12, 3)  # (T, L)
    logits[:4, 1] = -5.0  # "ta" far behind for 4 frames (stopped at once with s_th = 0) ...
    logits[4:, 1] = 5.0   # ... then far ahead of the two still running
    m.lid_logits = lambda enc: logits[: enc.size(0)]  # the recognizer passes enc (T, E)
    r = recognize(m, x, DecodeConfig(mode="lid_free", tau=0, s_th=0.0))
    assert r.num_frames == 12 and r.switched_off_at["ta"] == 0
    assert r.language in ("hi", "gu") and r.switched_off_at[r.language] is None


@pytest.mark.parametrize("variant,cfg,langs", [
    ("multisoftmax_lid", DecodeConfig(mode="lid_free", method="beam", beam=3), None),
    ("multisoftmax_lid", DecodeConfig(mode="lid_free", tau=4, s_th=1.0, switch_off_rule="gap"), None),
    ("onehot", DecodeConfig(), ["hi", "gu", "ta", "hi"]),
    ("vanilla", DecodeConfig(method="beam", beam=2), None),
    ("multisoftmax_lsp", DecodeConfig(), ["ta", "ta", "hi", "gu"]),
])
def test_batched_encoder_equals_one_utterance_at_a_time(variant, cfg, langs):
    """recognize_batch: one zero-padded encoder forward for utterances of different lengths (one too
    short for an encoder frame) gives each one what recognize gives it alone, chunked or not."""
    m = tiny(variant)
    xs = [feats(T, seed=T) for T in (100, 37, 5, 64)]
    langs = langs or [None] * len(xs)
    batch = recognize_batch(m, xs, cfg, langs=langs)
    assert batch[2] is None  # 5 frames < num_stack 8
    for x, lang, b in zip(xs, langs, batch):
        if b is None:
            continue
        alone = recognize(m, x, DecodeConfig(**{**cfg.__dict__, "chunk_frames": 7}), lang=lang)
        assert b.hyps == alone.hyps and b.language == alone.language and b.tokens == alone.tokens
        assert b.num_frames == alone.num_frames and b.num_input_frames == x.size(0)
        assert b.decoder_frames == alone.decoder_frames and b.switched_off_at == alone.switched_off_at
        for k, s in alone.scores.items():
            assert b.scores[k] == pytest.approx(s, abs=1e-3)
        if alone.lid_posteriors:
            for k, p in alone.lid_posteriors.items():
                assert b.lid_posteriors[k] == pytest.approx(p, abs=1e-5)
        assert b.decode_seconds > 0
    with pytest.raises(ValueError, match="langs has 1 entries"):
        recognize_batch(m, xs, cfg, langs=["hi"])


def test_non_finite_features_are_refused_not_decoded_to_an_empty_hypothesis():
    """A NaN frame made every score NaN: an empty hypothesis reported as decoded (issue 23)."""
    x = feats(40)
    x[23, 5] = float("nan")
    with pytest.raises(ValueError, match=r"frame 23 has a non-finite value \(nan in dimension 5\)"):
        recognize(tiny(), x, DecodeConfig(mode="lid_free"))
    with pytest.raises(ValueError, match=r"frame 23 has a non-finite value"):  # streamed: counted across chunks
        recognize(tiny(), x, DecodeConfig(mode="lid_free", chunk_frames=10))
    y = feats(40)
    y[0, 0] = float("-inf")
    with pytest.raises(ValueError, match=r"utterance 1 of the batch: frame 0 has a non-finite value \(-inf"):
        recognize_batch(tiny(), [feats(40), y], DecodeConfig(mode="lid_free"))
