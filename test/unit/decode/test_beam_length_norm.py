"""Modified beam search: the final choice with length normalisation (icefall's ``length_norm``),
on a hand-worked two-frame case, and the option reaching the decoder through DecodeConfig."""
import math

import pytest
import torch

from speechkit.decode.rnnt_search import BeamDecoder, DecodeConfig, StreamingRecognizer
from speechkit.models.rnnt import RNNT, RNNTConfig


def _hand_case(scripted_model):
    """Two frames, units a=1, b=2. Frame 0: blank .55, a .45. Frame 1 after nothing: blank .9,
    a .05, b .05; after a: blank .1, b .9. Sequence probabilities (summed over alignments):
    [] .495, [a] .55*.05 + .45*.1 = .0725, [b] .0275, [a b] .405."""
    T, V = 2, 3
    p = torch.full((T, T + 1, V, V), 1e-9)
    p[0, 0, :, 0], p[0, 0, :, 1] = 0.55, 0.45
    p[1, 0, :, 0], p[1, 0, :, 1], p[1, 0, :, 2] = 0.9, 0.05, 0.05
    p[1, 1, 1, 0], p[1, 1, 1, 2] = 0.1, 0.9
    return scripted_model((p / p.sum(-1, keepdim=True)).log()), torch.arange(T, dtype=torch.float32)[:, None]


def test_final_choice_with_and_without_length_normalisation(scripted_model):
    model, enc = _hand_case(scripted_model)
    plain = BeamDecoder(model, "x", beam=5)  # 5 extensions: no pruning
    plain.advance(enc)
    tokens, score = plain.best()
    assert tokens == [] and math.exp(score) == pytest.approx(0.495, rel=1e-6)
    # log(.495) / 1 = -0.703 < log(.405) / 3 = -0.301: the normalised choice is [a b]
    normed = BeamDecoder(model, "x", beam=5, length_norm=True)
    normed.advance(enc)
    tokens, score = normed.best()
    assert tokens == [1, 2] and math.exp(score) == pytest.approx(0.405, rel=1e-6)  # log P itself unnormalised
    # the search (pruning, merging) is the same; only the final choice differs
    assert normed.hyps == plain.hyps and torch.equal(normed.scores, plain.scores)
    got = {h: math.exp(s) for h, s in zip(plain.hyps, plain.scores.tolist())}
    assert got == pytest.approx({(): 0.495, (1,): 0.0725, (2,): 0.0275, (1, 2): 0.405}, rel=1e-6)


def test_length_norm_divides_by_one_plus_symbols(scripted_model):
    # icefall: log_prob / len(ys), ys = the start blank + the symbols (context size 1)
    model, _ = _hand_case(scripted_model)
    d = BeamDecoder(model, "x", beam=4, length_norm=True)
    d.hyps = [(), (1, 2, 3)]
    d.scores = torch.tensor([-2.0, -8.1], dtype=torch.float64)
    assert d.best() == ([], -2.0)            # -8.1 / 4 = -2.025 < -2 / 1
    d.scores = torch.tensor([-2.0, -7.9], dtype=torch.float64)
    assert d.best() == ([1, 2, 3], -7.9)     # -7.9 / 4 = -1.975 > -2 / 1
    d.length_norm = False
    assert d.best() == ([], -2.0)


def test_decode_config_passes_length_norm_to_the_beam_decoders():
    torch.manual_seed(0)
    model = RNNT(RNNTConfig.from_dict({"vocab_sizes": {"hi": 6, "ta": 5}, "variant": "multisoftmax_lid",
                                       "input_dim": 8, "encoder_layers": 1, "encoder_hidden": 8, "encoder_proj": 0,
                                       "pred_layers": 1, "pred_hidden": 8, "pred_proj": 0, "embed_dim": 4,
                                       "joint_dim": 6})).eval()
    rec = StreamingRecognizer(model, DecodeConfig(mode="lid_free", method="beam", beam=3, length_norm=True,
                                                  num_stack=1, stack_stride=1))
    assert all(isinstance(d, BeamDecoder) and d.length_norm for d in rec.decoders.values())
    assert DecodeConfig().length_norm is False
