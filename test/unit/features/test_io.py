"""speechkit.features.io: the scp of an ark written elsewhere, the files an scp reads."""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np

from speechkit.features.io import ark_scp_writer, scp_files


def test_scp_ark_names_the_final_location_of_an_ark_written_elsewhere(tmp_path):
    tmp, final = tmp_path / ".out.tmp", tmp_path / "out"
    with ark_scp_writer(tmp / "feats.ark", tmp / "feats.scp", scp_ark=final / "feats.ark") as w:
        w("u1", np.ones((2, 3), np.float32))
    assert (tmp / "feats.scp").read_text().startswith(f"u1 {final / 'feats.ark'}:")
    tmp.rename(final)
    np.testing.assert_array_equal(kaldiio.load_scp(str(final / "feats.scp"))["u1"], np.ones((2, 3)))


def test_scp_files_lists_each_file_once_without_offsets_and_commands(tmp_path):
    scp = tmp_path / "x.scp"
    scp.write_text("a /d/y.ark:12\nb /d/y.ark:99\nc z.ark:3[0:2]\nd sox a.wav -t wav - |\ne plain.wav\n")
    assert scp_files(scp) == [Path("/d/y.ark"), Path("z.ark"), Path("plain.wav")]
