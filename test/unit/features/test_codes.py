"""speechkit.features.codes: the codes table reader and the text rows of a code frame."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.features.codes import codebook_rows, onehot_rows, read_codes
from speechkit.utils.fileio import DataError


def test_read_codes(tmp_path):
    f = tmp_path / "codes"
    f.write_text("a 1 2 3\nb 0\n")
    out = read_codes(f, 4)
    assert out["a"].tolist() == [1, 2, 3] and out["b"].tolist() == [0]
    f.write_text("a 1 2\nb 1 x 3\n")
    with pytest.raises(DataError, match=r"codes:2: 'b': code 'x' is not an integer"):
        read_codes(f)
    f.write_text("a 1 2\nb 1 4\n")
    with pytest.raises(DataError, match=r"codes:2: 'b': code 4 outside \[0, 4\) \(model.codebook_size\)"):
        read_codes(f, 4)
    f.write_text("a 1\na 2\n")
    with pytest.raises(DataError, match="codes:2: utterance 'a' appears twice"):
        read_codes(f)
    f.write_text("a\n")
    with pytest.raises(DataError, match="codes:1: utterance 'a' has no codes"):
        read_codes(f)


def test_onehot_rows():
    assert onehot_rows(3) == ["1 0 0", "0 1 0", "0 0 1"]


def test_codebook_rows_round_trip_float32():
    cb = torch.tensor([[0.1, -2.5e-7], [1 / 3, 7.0]])
    rows = codebook_rows(cb)
    assert len(rows) == 2
    np.testing.assert_array_equal(np.array([r.split() for r in rows], dtype=np.float32), cb.numpy())
