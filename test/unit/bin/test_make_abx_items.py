"""speechkit-make-abx-items: the item file never replaces an input (issue 23 sweep)."""
from __future__ import annotations

from speechkit.bin.make_abx_items import main


def test_out_item_onto_an_input_file_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    ali = "spk1_u1 0.0 0.1 a\nspk1_u1 0.1 0.2 b\nspk1_u1 0.2 0.3 c\n"
    (data / "phone_alignments").write_text(ali)
    (data / "utt2spk").write_text("spk1_u1 spk1\n")
    for out, what in [(data / "phone_alignments", "the alignments"), (data / "utt2spk", "utt2spk")]:
        assert main([str(data), str(out), "--exclude-phones", ""]) == 1
        assert f"OUT_ITEM {out} is {what} {out}" in capsys.readouterr().err
    assert main([str(data / "phone_alignments"), str(data / "phone_alignments")]) == 1
    assert "is the alignments" in capsys.readouterr().err
    assert (data / "phone_alignments").read_text() == ali and (data / "utt2spk").read_text() == "spk1_u1 spk1\n"
    # beside them, in the data dir, is where the recipes put it
    assert main([str(data), str(data / "abx.item"), "--exclude-phones", ""]) == 0
    assert (data / "abx.item").read_text().startswith("#file onset offset #phone")
