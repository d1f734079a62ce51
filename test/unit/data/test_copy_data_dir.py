"""speechkit.data.copy_data_dir (Kaldi's copy_data_dir.sh)."""
from __future__ import annotations

from test_datadir import SPEAKERS, _real_cmvn, make_dir

from speechkit.data.copy_data_dir import copy_data_dir
from speechkit.data.validate import validate


def test_copy_with_prefix(tmp_path):
    d = make_dir(tmp_path / "a", feats=True)
    d.cmvn_scp = _real_cmvn(tmp_path / "a", list(d.spk2utt))
    d.write()
    out = copy_data_dir(tmp_path / "a", tmp_path / "b", utt_prefix="sp1.1-", spk_prefix="sp1.1-")
    assert out.utts[0] == "sp1.1-spkA_u00" and out.utt2spk["sp1.1-spkA_u00"] == "sp1.1-spkA"
    assert set(out.cmvn_scp) == {"sp1.1-" + s for s in d.spk2utt}
    assert validate(tmp_path / "b") == []
    make_dir(tmp_path / "s", segments=True)
    out = copy_data_dir(tmp_path / "s", tmp_path / "t", utt_prefix="x-", spk_prefix="x-")
    assert set(out.wav_scp) == {f"{s}_rec" for s in SPEAKERS}      # recordings keep their ids
    assert validate(tmp_path / "t", no_feats=True) == []
