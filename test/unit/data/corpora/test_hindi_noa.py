"""Hindi NOA preparer on ../shared/data/hindi_noa (523 utterances, fairseq manifest)."""
from __future__ import annotations

import pytest

from speechkit.data.corpora._common import normalize_text
from speechkit.data.corpora.hindi_noa import prepare_hindi_noa
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


def test_real_hindi_noa(shared_data, tmp_path):
    out = tmp_path / "hi"
    prepare_hindi_noa(shared_data / "hindi_noa", out)
    d = DataDir.load(out)
    assert validate(out, no_feats=True) == []
    assert len(d) == 523
    assert set(d.utt2lang.values()) == {"hi"}
    # line 2 of the manifest <-> line 1 of train.wrd
    tsv = (shared_data / "hindi_noa/manifest/train.tsv").read_text(encoding="utf-8").splitlines()
    wrd = (shared_data / "hindi_noa/manifest/train.wrd").read_text(encoding="utf-8").splitlines()
    assert tsv[1].startswith("Regional-Jaipur-Hindi-1830-20181028193711/sent_31.flac\t")
    utt = "Regional-Jaipur-Hindi-1830-20181028193711_sent_31"
    assert d.text[utt] == normalize_text(wrd[0]) and d.text[utt].startswith("उधर बाडमेर में मतदाताओं")
    assert d.utt2spk[utt] == "Regional-Jaipur-Hindi-1830-20181028193711"
    assert d.utt2dur[utt] == pytest.approx(109120 / 16000, abs=1e-3)
    assert len(d.spk2utt) == len({line.split("/")[0] for line in tsv[1:]})


def test_misaligned_manifest_is_an_error(tmp_path):
    man = tmp_path / "c" / "manifest"
    man.mkdir(parents=True)
    (man / "train.tsv").write_text("audio\nb1/s1.flac\t10\nb1/s2.flac\t10\n")
    (man / "train.wrd").write_text("एक\n")
    with pytest.raises(DataError, match="line-aligned"):
        prepare_hindi_noa(tmp_path / "c", tmp_path / "out")
    (man / "train.wrd").write_text("एक\nदो\n")
    with pytest.raises(FileNotFoundError, match="train.tsv:1: audio root"):
        prepare_hindi_noa(tmp_path / "c", tmp_path / "out")
