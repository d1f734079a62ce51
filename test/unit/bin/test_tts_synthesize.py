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
from speechkit.tasks import get_task, load_model
from speechkit.train import Trainer
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, read_table

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
    (tmp_path / "empty").mkdir()
    assert main(["--model-dir", str(root / "exp"), str(tmp_path / "empty"), str(tmp_path / "o")]) == 1
    assert "labels.scp: no label vectors" in capsys.readouterr().err


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_rerun_replaces_the_output_whole_and_a_failed_one_leaves_it(trained, tmp_path, monkeypatch):
    """Issue 23 item 5: a re-run left old wav/*.wav behind, and a re-run killed while vocoding left
    the old wav.scp next to some new wavs. Now the new output appears only as a whole, the previous
    one in OUT_DIR/.backup/1, and a run that dies while vocoding leaves the previous one as it was."""
    import speechkit.bin.tts_synthesize as tts

    root, test = trained
    out = tmp_path / "out"
    assert main(["--model-dir", str(root / "exp"), "--num-wavs", "3", str(root / "test"), str(out)]) == 0
    first = _tree(out)
    assert main(["--model-dir", str(root / "exp"), "--num-wavs", "1", "--nj", "2", str(root / "test"), str(out)]) == 0
    first_utt = sorted(test)[0]
    assert sorted(p.name for p in (out / "wav").iterdir()) == [f"{first_utt}.png", f"{first_utt}.wav", "wav.scp"]
    assert read_table(out / "wav" / "wav.scp") == {first_utt: str(out / "wav" / f"{first_utt}.wav")}
    assert sorted(dict(kaldiio.load_scp(str(out / "feats.scp")))) == sorted(test)  # the scp names the final ark
    # the previous output, whole, its scps naming its own files there (not the new output's)
    kept = out / ".backup" / "1"
    repointed = {k: v.replace(f"{out}/".encode(), f"{kept}/".encode()) if k.endswith(".scp") else v
                 for k, v in first.items()}
    assert _tree(kept) == repointed and repointed != first
    assert sorted(dict(kaldiio.load_scp(str(kept / "feats.scp")))) == sorted(test)
    second = {k: v for k, v in _tree(out).items() if not k.startswith(".backup/")}
    real, calls = tts.vocode, []

    def dies_on_the_second(*a, **k):
        calls.append(a[0])
        if len(calls) == 2:
            raise DataError(f"utterance '{a[0]}': killed")
        return real(*a, **k)

    monkeypatch.setattr(tts, "vocode", dies_on_the_second)
    assert main(["--model-dir", str(root / "exp"), "--num-wavs", "3", str(root / "test"), str(out)]) == 1
    assert {k: v for k, v in _tree(out).items() if not k.startswith(".backup/")} == second
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_out_dir_onto_an_input_is_refused_before_any_work(trained, tmp_path, capsys):
    root, _ = trained
    data = tmp_path / "data"
    data.mkdir()
    for f in (root / "test").iterdir():
        (data / f.name).write_bytes(f.read_bytes())
    before = _tree(data)
    assert main(["--model-dir", str(root / "exp"), str(data), str(data)]) == 1
    assert f"OUT_DIR {data} is DATA_DIR {data}" in capsys.readouterr().err
    assert main(["--model-dir", str(root / "exp"), str(data), str(root / "exp")]) == 1
    assert f"OUT_DIR {root / 'exp'} is --model-dir {root / 'exp'}" in capsys.readouterr().err
    assert main(["--model-dir", str(root / "exp"), str(data), str(root)]) == 1
    assert f"OUT_DIR {root} contains --model-dir" in capsys.readouterr().err
    assert _tree(data) == before
    (tmp_path / "file").write_text("keep\n")
    assert main(["--model-dir", str(root / "exp"), str(data), str(tmp_path / "file")]) == 1
    assert "Not a directory" in capsys.readouterr().err and (tmp_path / "file").read_text() == "keep\n"


def test_one_frame_labels_with_num_wavs(trained, tmp_path, capsys):
    """Issue 23 item 17: 1-frame labels with --num-wavs failed with 'noverlap must be less than
    nperseg.' (no utterance named, wav/ half written). The wav is written; the spectrogram, which
    needs one 25 ms window, is skipped with a warning naming the utterance."""
    root, test = trained
    d = tmp_path / "short"
    d.mkdir()
    first = sorted(test)[0]
    with ark_scp_writer(d / "labels.ark", d / "labels.scp") as w:
        w("spk_t00", test[first][0])
        w("spk_t01", test[first][0][:1])
    out = tmp_path / "out"
    assert main(["--model-dir", str(root / "exp"), "--num-wavs", "2", str(d), str(out)]) == 0
    err = capsys.readouterr().err
    assert "no spectrogram PNG for 1 utterance(s) shorter than the 25 ms analysis window: spk_t01" in err
    assert sorted(p.name for p in (out / "wav").iterdir()) == ["spk_t00.png", "spk_t00.wav", "spk_t01.wav",
                                                              "wav.scp"]
    assert sorted(read_table(out / "wav" / "wav.scp")) == ["spk_t00", "spk_t01"]
