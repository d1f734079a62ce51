"""speechkit-tts-synthesize on a tiny trained acoustic model: features, wavs, errors."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from speechkit.bin.tts_synthesize import main
from speechkit.features.io import ark_scp_writer
from speechkit.tasks import get_task
from speechkit.train import Trainer, load_model
from speechkit.utils.config import load_config
from speechkit.utils.fileio import read_table

_spec = importlib.util.spec_from_file_location(
    "acoustic_helpers", Path(__file__).parents[1] / "tasks" / "test_acoustic_task.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("tts")
    table = helpers.make_phone_table()
    helpers.write_pair_dir(root / "train", 12, 1, table)
    helpers.write_pair_dir(root / "valid", 2, 2, table, prefix="spk_v")
    test = helpers.write_pair_dir(root / "test", 3, 3, table, prefix="spk_t")
    cfg = load_config(get_task("musa_rnn").Config, None, helpers.overrides(root, "musa_rnn"))
    Trainer(get_task("musa_rnn"), cfg, root / "exp").fit()
    return root, test


def test_synthesize_features_and_wavs(trained, tmp_path):
    root, test = trained
    out = tmp_path / "out"
    assert main(["--model-dir", str(root / "exp"), "--num-wavs", "1", str(root / "test"), str(out)]) == 0
    feats = dict(kaldiio.load_scp(str(out / "feats.scp")))
    assert sorted(feats) == sorted(test)
    model, _ = load_model(root / "exp")
    for utt, (labels, _) in test.items():
        y = feats[utt]
        assert y.shape == (len(labels), 43)
        assert set(np.unique(y[:, 41]).tolist()) <= {0.0, 1.0}
        with torch.no_grad():
            ref = model.normalizer.denormalize(model(torch.from_numpy(labels)[None])[0])[0].numpy()
        assert np.allclose(y[:, :41], ref[:, :41], atol=1e-5) and np.allclose(y[:, 42], ref[:, 42], atol=1e-5)
        assert np.array_equal(y[:, 41], (ref[:, 41] > 0.5).astype(np.float32))
    assert read_table(out / "utt2num_frames") == {u: str(len(v[0])) for u, v in test.items()}
    assert (out / "frame_shift").read_text().strip() == "0.005"
    assert yaml.safe_load((out / "feats.yaml").read_text())["type"] == "world"
    wavs = sorted((out / "wav").glob("*.wav"))
    assert [w.stem for w in wavs] == [sorted(test)[0]]
    x, sr = sf.read(wavs[0])
    n = len(test[sorted(test)[0]][0])
    assert sr == 16000 and abs(len(x) - n * 80) <= 80 and np.abs(x).max() > 0
    assert wavs[0].with_suffix(".png").is_file()
    assert "spk_t00" in read_table(out / "wav" / "wav.scp")


def test_errors(trained, tmp_path, capsys):
    root, _ = trained
    bad = tmp_path / "bad"
    bad.mkdir()
    with ark_scp_writer(bad / "labels.ark", bad / "labels.scp") as w:
        w("spk_x00", np.zeros((5, helpers.LABEL_DIM), np.float32))
        w("spk_x01", np.zeros((5, helpers.LABEL_DIM + 1), np.float32))
    assert main(["--model-dir", str(root / "exp"), str(bad), str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "'spk_x01': expected a (frames, 8) label matrix" in err
    assert not (tmp_path / "o" / "feats.scp").exists()  # nothing half-written
    assert main(["--model-dir", str(root / "exp"), "--checkpoint", "nope.pt", str(bad), str(tmp_path / "o")]) == 1
    assert "--checkpoint nope.pt: no such file" in capsys.readouterr().err
    assert main(["--model-dir", str(root / "exp"), str(tmp_path), str(tmp_path / "o")]) == 1
    assert "labels.scp: no label vectors" in capsys.readouterr().err
