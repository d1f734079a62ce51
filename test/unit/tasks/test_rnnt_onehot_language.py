"""The one-hot model's language along the recipe's paths: the index a training batch feeds for an
utterance is the one speechkit-asr-decode's parts feed for it (one at a time and batched), both
the utterance's language in the units' order; and what is decoded depends on the one-hot given.
(Checks behind egs/indic_multilingual/README.md's one-hot claims row: on mini the one-hot model
trails vanilla, and a wrong index between training and decoding was one candidate.)"""
from __future__ import annotations

import torch

from speechkit.decode import rnnt_search
from speechkit.features.io import FeatureReader
from speechkit.features.stack import stack_frames
from speechkit.inference.speech2text import DecodeOptions, Recognizer
from speechkit.inference.speech2text_dir import decode_data_dir
from speechkit.models.rnnt import RNNT
from speechkit.tasks import get_task
from speechkit.text.units import MultilingualUnits
from speechkit.train.trainer import Trainer
from speechkit.utils.config import load_config
from speechkit.utils.fileio import read_table


def test_training_and_decoding_feed_the_same_language_index(rnnt_env, monkeypatch):
    units = MultilingualUnits.load("data/lang")
    fed: list[tuple[str, list[int]]] = []  # (phase, one-hot indices of one encoder call)
    phase = ["train"]
    encode = RNNT.encode

    def spy(self, feats, lengths=None, state=None, lang=None):
        if phase[0] != "train" or self.training:  # not the validation batches
            fed.append((phase[0], self._lang_ids(lang, feats.size(0)).tolist()))
        return encode(self, feats, lengths, state, lang)

    monkeypatch.setattr(RNNT, "encode", spy)
    task = get_task("rnnt")
    forward_loss = task.forward_loss
    batches: list[tuple[list[str], list[int]]] = []

    def record(model, batch):
        if model.training:
            batches.append((list(batch["utts"]), batch["lang"].tolist()))
        return forward_loss(model, batch)

    monkeypatch.setattr(task, "forward_loss", record)
    cfg = load_config(task.Config, None, rnnt_env["overrides"] + [
        "trainer.max_epochs=1", "model.variant=onehot", "model.onehot_scale=5.0"])
    Trainer(task, cfg, "exp/oh").fit()
    u2l = read_table("data/train/utt2lang")
    assert batches and sum(len(u) for u, _ in batches) >= 12
    for utts, ids in batches:
        assert ids == [units.lang_index(u2l[u]) for u in utts]
    assert sorted(i for p, ids in fed if p == "train" for i in ids) == sorted(i for _, ids in batches for i in ids)

    # decoding data/train through asr-decode's library path: one utterance at a time, then batched
    utts = sorted(u2l)
    want = [units.lang_index(u2l[u]) for u in utts]
    recognize = rnnt_search.recognize

    def one(model, feats, config=None, lang=None, **kw):  # one utterance, streamed in chunks: a phase each
        phase[0] = ("dec1", phase[0][1] + 1)
        return recognize(model, feats, config, lang=lang, **kw)

    monkeypatch.setattr(rnnt_search, "recognize", one)
    phase[0] = ("dec1", -1)
    decode_data_dir("exp/oh", None, "data/train", "dec1", DecodeOptions(mode="oracle", batch_size=1))
    for k, u in enumerate(utts):
        assert {i for p, ids in fed if p == ("dec1", k) for i in ids} == {want[k]}, u
    phase[0] = "dec4"
    decode_data_dir("exp/oh", None, "data/train", "dec4", DecodeOptions(mode="oracle", batch_size=4))
    assert [i for p, ids in fed if p == "dec4" for i in ids] == want

    # the decoded text depends on the one-hot: the same utterance decoded with each language's
    rec = Recognizer("exp/oh")
    x, _ = stack_frames(rec.prepare(FeatureReader("data/train").raw(utts[0])), None, 8, 3)
    encs = [encode(rec.model, x[None], lang=lang)[0] for lang in rec.model.languages]
    assert not torch.allclose(encs[0], encs[1], atol=1e-4)
