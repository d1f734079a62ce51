"""validate-data-dir reads the CMVN stats cmvn.scp points at (issue 38 case 8's tail: after the CMVN ark of
data/abx/cmvn.scp was moved away, "cmvn.scp dangles and validate-data-dir still exits 0"). Kaldi's script checks
only the keys of cmvn.scp; speechkit checks that each entry reads a statistics matrix, as it does for feats.scp."""
from __future__ import annotations

import shutil

import kaldiio
import numpy as np

from speechkit.bin.validate_data_dir import main
from speechkit.data.validate import validate


def _data(root):
    d = root / "d"
    d.mkdir()
    (d / "utt2spk").write_text("a_1 a\nb_1 b\n")
    (d / "spk2utt").write_text("a a_1\nb b_1\n")
    (d / "text").write_text("a_1 hi\nb_1 yo\n")
    (d / "wav.scp").write_text("a_1 /x/a.wav\nb_1 /x/b.wav\n")
    stats = {s: np.array([[1.0, 2.0, 10.0], [3.0, 4.0, 0.0]]) for s in ("a", "b")}
    (root / "cmvnX").mkdir()
    kaldiio.save_ark(str(root / "cmvnX" / "cmvn_d.ark"), stats, scp=str(d / "cmvn.scp"))
    return d


def test_cmvn_scp_into_a_missing_ark_is_a_problem(tmp_path, capsys):
    d = _data(tmp_path)
    assert validate(d, no_feats=True) == []
    shutil.move(tmp_path / "cmvnX", tmp_path / "elsewhere")
    problems = validate(d, no_feats=True)
    assert len(problems) == 1 and problems[0].startswith(f"{d}/cmvn.scp:1: 'a': ark ")
    assert "cmvn_d.ark does not exist (2 entries point into it)" in problems[0]
    assert main(["--no-feats", str(d)]) == 1  # exit 0 on the old code
    assert "1 problem(s)" in capsys.readouterr().err


def test_cmvn_scp_past_the_end_of_a_cut_ark_or_at_no_matrix(tmp_path):
    d = _data(tmp_path)
    ark = tmp_path / "cmvnX" / "cmvn_d.ark"
    data = ark.read_bytes()
    second = int((d / "cmvn.scp").read_text().splitlines()[1].rsplit(":", 1)[1])
    ark.write_bytes(data[:second - 1])  # b's stats cut off
    problems = validate(d, no_feats=True)
    assert len(problems) == 1 and "cmvn.scp:2: 'b': " in problems[0] and "lies past the end of" in problems[0]
    first = int((d / "cmvn.scp").read_text().splitlines()[0].rsplit(":", 1)[1])
    ark.write_bytes(data[:first] + b"junk" + data[first + 4:])  # a's matrix header damaged
    assert any("cmvn.scp:1: 'a': " in p and "does not hold CMVN statistics" in p for p in validate(d, no_feats=True))
