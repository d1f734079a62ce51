"""speechkit-align: train-and-align, --model-dir round trip, skipped utterances, error exits."""
import importlib.util
import shutil
from pathlib import Path

import pytest

from speechkit.bin.align import main, split_overrides
from speechkit.data.corpora._common import read_phone_alignments
from speechkit.utils.fileio import read_table

# the synthetic corpus of the aligner's unit tests
_spec = importlib.util.spec_from_file_location(
    "aligner_synthetic", Path(__file__).parents[1] / "decode" / "test_aligner.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
FAST, make_synthetic = _mod.FAST, _mod.make_synthetic

OVERRIDES = [f"--{kv.split('=')[0].replace('_', '-')}={kv.split('=')[1]}" for kv in FAST]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data, ref = make_synthetic(root / "data", n_utts=12, seed=1)
    assert main([str(data), str(root / "exp"), *OVERRIDES]) == 0
    return root, data, ref


def test_train_writes_alignments_and_model(trained, capsys):
    root, data, ref = trained
    ali = read_phone_alignments(root / "exp" / "phone_alignments")
    assert set(ali) == set(ref)
    text = read_table(data / "text")
    for utt, segs in ali.items():
        assert segs[0][0] == 0.0
        assert [p for _, _, p in segs if p != "sil"] == text[utt].split()
    assert (root / "exp" / "unaligned").read_text() == ""
    assert "num_iters: 12" in (root / "exp" / "config.yaml").read_text()


def test_model_dir_round_trip_gives_the_same_alignments(trained, capsys):
    root, data, ref = trained
    assert main([str(data), str(root / "again"), "--model-dir", str(root / "exp")]) == 0
    assert (root / "again" / "phone_alignments").read_text() == (root / "exp" / "phone_alignments").read_text()
    assert "aligned 12 of 12 utterances" in capsys.readouterr().out
    # training options do not apply to a loaded aligner
    assert main([str(data), str(root / "again"), "--model-dir", str(root / "exp"), "--num-iters", "3"]) == 1
    assert "training only" in capsys.readouterr().err


def test_unaligned_are_listed_and_reported(trained, tmp_path, capsys):
    root, data, ref = trained
    d = tmp_path / "d"
    shutil.copytree(data, d)
    (d / "phone_info").unlink()
    lines = (d / "text").read_text().splitlines()
    first = lines[0].split()[0]
    lines[0] = f"{first} a q a"
    (d / "text").write_text("\n".join(lines) + "\n")
    assert main([str(d), str(tmp_path / "out"), "--model-dir", str(root / "exp")]) == 0
    assert read_table(tmp_path / "out" / "unaligned") == {first: "unknown tokens: q"}
    assert f"could not align 1 of 12 utterance(s): {first} (unknown tokens: q)" in capsys.readouterr().err
    assert first not in read_phone_alignments(tmp_path / "out" / "phone_alignments")


def test_nothing_aligned_and_bad_input_exit_nonzero(trained, tmp_path, capsys):
    root, data, ref = trained
    d = tmp_path / "d"
    shutil.copytree(data, d)
    (d / "phone_info").unlink()
    (d / "text").write_text("".join(f"{u} zz\n" for u in sorted(ref)))
    assert main([str(d), str(tmp_path / "out"), "--model-dir", str(root / "exp")]) == 1
    assert "no utterance could be aligned" in capsys.readouterr().err
    assert not (tmp_path / "out" / "phone_alignments").exists()
    # malformed phone_info: a DataError naming the file and line
    shutil.copy(data / "phone_info", d / "phone_info")
    shutil.copy(data / "text", d / "text")
    (d / "phone_info").write_text((d / "phone_info").read_text().replace("0:0:0", "0:x:0", 1))
    assert main([str(d), str(tmp_path / "out2")] + OVERRIDES) == 1
    assert "phone_info:1: " in capsys.readouterr().err
    # unknown config key, missing data dir, missing model
    assert main([str(data), str(tmp_path / "o"), "--num-itres", "3"]) == 1
    assert "num_itres" in capsys.readouterr().err
    assert main([str(tmp_path / "nope"), str(tmp_path / "o")]) == 1
    assert main([str(data), str(tmp_path / "o"), "--model-dir", str(tmp_path / "none")]) == 1
    assert "final.mdl: no such file" in capsys.readouterr().err


def test_optional_silence_flag_and_override_parsing():
    own, ov = split_overrides(["d", "e", "--nj", "2", "--optional-silence", "false", "--frame-shift=0.005",
                               "--total-gauss", "10"])
    assert own == ["d", "e", "--nj", "2", "--optional-silence", "false"]
    assert ov == ["frame_shift=0.005", "total_gauss=10"]
