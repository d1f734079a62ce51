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
    "aligner_synthetic", Path(__file__).parents[1] / "align" / "test_aligner.py")
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


def _one_line_error(err: str, *parts: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and " INFO " not in ln and " WARNING " not in ln]
    assert len(lines) == 1 and lines[0].startswith("speechkit-align: error: "), err
    assert "Traceback" not in err
    for p in parts:
        assert p in lines[0], (p, lines[0])
    return lines[0]


def _npz_with(src: Path, dst: Path, **changes) -> None:
    import numpy as np
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v(arrays[k]) if callable(v) else v
    with open(dst, "wb") as f:
        np.savez(f, **arrays)


def _corrupt_models():
    import json

    import numpy as np
    truncate = lambda m, e: m.write_bytes(m.read_bytes()[:3000])  # noqa: E731
    return {
        "truncated": (truncate, "final.mdl: truncated or corrupt aligner model (BadZipFile"),
        "empty": (lambda m, e: m.write_bytes(b""), "final.mdl: not a speechkit aligner model (an empty file)"),
        "text": (lambda m, e: m.write_text("garbage\n"), "final.mdl: not a speechkit aligner model (not an npz"),
        "crc": (lambda m, e: m.write_bytes(m.read_bytes()[:5000] + bytes([m.read_bytes()[5000] ^ 255])
                                           + m.read_bytes()[5001:]), "final.mdl: truncated or corrupt"),
        "meta_list": (lambda m, e: _npz_with(m, m, meta=np.array(json.dumps([1, 2]))),
                      "final.mdl: model version None"),
        "no_phones": (lambda m, e: _npz_with(m, m, meta=np.array(json.dumps({"version": 1}))),
                      "final.mdl: 'phones' must be a non-empty list"),
        "no_means": (lambda m, e: _npz_with(m, m, means=None),
                     "final.mdl: not a speechkit aligner model (no array 'means')"),
        "trans_shape": (lambda m, e: _npz_with(m, m, trans=lambda t: t[:2]),
                        "final.mdl: 'trans' must be probabilities"),
        "tree_shape": (lambda m, e: _npz_with(m, m, ctx_pdf=lambda t: t[:2]),
                       "final.mdl: 'ctx_pdf' (the triphone tree)"),
        "tree_float": (lambda m, e: _npz_with(m, m, ctx_pdf=lambda t: t.astype(np.float32)),
                       "final.mdl: 'ctx_pdf' (the triphone tree)"),
        "gmm_dim": (lambda m, e: _npz_with(m, m, means=lambda a: a[..., :20], vars=lambda a: a[..., :20]),
                    "final.mdl: GMMs of dimension 20"),
        "config_n_mfcc": (lambda m, e: (e / "config.yaml").write_text(
            (e / "config.yaml").read_text() + "n_mfcc: 10\n"), "n_mfcc 10"),
        "transform": (lambda m, e: _npz_with(m, m, transform=np.eye(5)), "final.mdl: 'transform' (LDA+MLLT)"),
        "mlp_partial": (lambda m, e: _npz_with(m, m, mlp_log_prior=np.zeros(3)),
                        "final.mdl: incomplete frame classifier (no array 'mlp_context')"),
        "no_config": (lambda m, e: (e / "config.yaml").unlink(), "config.yaml"),
    }


@pytest.mark.parametrize("case", sorted(_corrupt_models()))
def test_corrupt_model_dir_is_a_one_line_error(trained, tmp_path, capsys, case):
    """A truncated/corrupt final.mdl or one whose arrays disagree: one line naming the file, exit 1
    (issue 23 item 15; was zipfile.BadZipFile, EOFError, IndexError, RuntimeError... tracebacks)."""
    root, data, ref = trained
    model = tmp_path / "model"
    shutil.copytree(root / "exp", model)
    mutate, expected = _corrupt_models()[case]
    mutate(model / "final.mdl", model)
    capsys.readouterr()
    assert main([str(data), str(tmp_path / "out"), "--model-dir", str(model)]) == 1
    _one_line_error(capsys.readouterr().err, expected)
    assert not (tmp_path / "out" / "phone_alignments").exists()


def test_segments_missing_utterances_is_an_error_naming_segments(trained, tmp_path, capsys):
    root, data, ref = trained
    d = tmp_path / "d"
    shutil.copytree(data, d)
    utts = sorted(ref)
    (d / "wav.scp").write_text("".join(f"{line.split()[0]}_rec {line.split()[1]}\n"
                                       for line in (data / "wav.scp").read_text().splitlines()))
    (d / "segments").write_text("".join(f"{u} {u}_rec 0.0 0.5\n" for u in utts[2:]))
    assert main([str(d), str(tmp_path / "out"), "--model-dir", str(root / "exp")]) == 1
    _one_line_error(capsys.readouterr().err, f"{d}/segments: no entry for utterance '{utts[0]}' (2 of 12 missing)")


@pytest.mark.parametrize("phone_info", [True, False])
def test_text_utterance_missing_from_utt2spk_names_utt2spk(trained, tmp_path, capsys, phone_info):
    """Was: 'phone_info:1: utterance ... is not in text' (with phone_info) or a silent drop (without)."""
    root, data, ref = trained
    d = tmp_path / "d"
    shutil.copytree(data, d)
    first = sorted(ref)[0]
    (d / "utt2spk").write_text("".join(ln + "\n" for ln in (data / "utt2spk").read_text().splitlines()
                                       if ln.split()[0] != first))
    (d / "spk2utt").write_text((d / "spk2utt").read_text().replace(f" {first}", "", 1))
    if not phone_info:
        (d / "phone_info").unlink()
    assert main([str(d), str(tmp_path / "out"), "--model-dir", str(root / "exp")]) == 1
    line = _one_line_error(capsys.readouterr().err, f"{d}/utt2spk: no entry for utterance '{first}' of text")
    assert "phone_info" not in line
    assert not (tmp_path / "out").exists()


def test_output_dir_overlapping_the_data_or_model_dir_is_refused(trained, tmp_path, capsys):
    root, data, ref = trained
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    model_ali = (root / "exp" / "phone_alignments").read_bytes()
    model = ["--model-dir", str(root / "exp")]
    for out, extra, named in ((data, [], "is DATA_DIR"), (data / "ali", model, "lies inside DATA_DIR"),
                              (root / "exp", model, "is --model-dir"), (root, model, "contains")):
        capsys.readouterr()
        assert main([str(data), str(out), *extra, *([] if extra else OVERRIDES)]) == 1
        _one_line_error(capsys.readouterr().err, f"EXP_DIR {out} {named}")
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before
    assert (root / "exp" / "phone_alignments").read_bytes() == model_ali
    # inside the model dir is ESPnet's layout and allowed
    assert main([str(data), str(root / "exp" / "align_again"), "--model-dir", str(root / "exp")]) == 0


def test_nj_below_one_is_an_argparse_error(trained, tmp_path, capsys):
    root, data, ref = trained
    with pytest.raises(SystemExit) as e:
        main([str(data), str(tmp_path / "out"), "--nj", "0"])
    assert e.value.code == 2
    assert "argument --nj: must be >= 1, got 0" in capsys.readouterr().err


_MODEL_OUTPUTS = ("final.mdl", "phones.txt", "config.yaml", "phone_alignments", "unaligned", "log/train.log")


def _contents(d: Path) -> dict:
    return {n: (d / n).read_bytes() for n in _MODEL_OUTPUTS if (d / n).is_file()}


def test_retraining_keeps_the_previous_aligner_in_a_backup(trained, tmp_path, capsys):
    """Audit d4(a): retraining into an EXP_DIR holding an aligner replaced final.mdl, phones.txt,
    config.yaml and phone_alignments with no backup. The previous aligner, the alignments made with it
    and its log are moved to EXP_DIR/.backup/N/ (loadable from there), logged."""
    root, data, ref = trained
    exp = tmp_path / "exp"
    shutil.copytree(root / "exp", exp)
    first = _contents(exp)
    assert set(first) == set(_MODEL_OUTPUTS)
    other = [o for o in OVERRIDES if not o.startswith("--num-iters")] + ["--num-iters=10", "--optional-silence",
                                                                       "false"]
    capsys.readouterr()
    assert main([str(data), str(exp), *other]) == 0
    kept = exp / ".backup" / "1"
    assert _contents(kept) == first
    assert f"replaced the aligner of {exp}: the previous one, its alignments and its log are in {kept}" \
        in capsys.readouterr().err
    second = _contents(exp)
    assert second["final.mdl"] != first["final.mdl"] and "num_iters: 10" in second["config.yaml"].decode()
    assert "optional_silence: false" in second["config.yaml"].decode()
    assert second["log/train.log"] != first["log/train.log"]
    # the kept aligner is whole: it aligns as it did
    assert main([str(data), str(tmp_path / "again"), "--model-dir", str(kept)]) == 0
    assert (tmp_path / "again" / "phone_alignments").read_bytes() == first["phone_alignments"]
    # a third training: a new backup, the first one untouched
    assert main([str(data), str(exp), *OVERRIDES]) == 0
    assert _contents(kept) == first and _contents(exp / ".backup" / "2") == second
    assert sorted(p.name for p in (exp / ".backup").iterdir()) == ["1", "2"]
    assert not [p for p in exp.rglob("*") if "tmp" in p.name or p.name.startswith(".train.log")]


def test_a_failed_retraining_leaves_the_previous_aligner(trained, tmp_path, monkeypatch, capsys):
    """A retraining that fails (here: while writing the new model's files) changes nothing of the aligner
    in EXP_DIR nor its alignments; the next successful one keeps that aligner with its own log."""
    import yaml

    root, data, ref = trained
    exp = tmp_path / "exp"
    shutil.copytree(root / "exp", exp)
    first = _contents(exp)

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(yaml, "safe_dump", fail)  # config.yaml: written after final.mdl, phones.txt
    assert main([str(data), str(exp), *OVERRIDES, "--num-iters=10"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert {n: v for n, v in _contents(exp).items() if n != "log/train.log"} == \
           {n: v for n, v in first.items() if n != "log/train.log"}
    assert not (exp / ".backup").exists()
    assert [p.name for p in exp.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    monkeypatch.undo()
    assert main([str(data), str(exp), *OVERRIDES, "--num-iters=10"]) == 0
    assert _contents(exp / ".backup" / "1") == first  # the failed run's log did not replace the model's


def test_the_new_model_takes_its_names_last(trained, tmp_path, monkeypatch):
    """The new model's files are complete before the previous ones move to the backup, and final.mdl
    takes its name last: a kill at any rename never leaves a new final.mdl beside the old files."""
    import os

    from speechkit.align import Aligner

    root, data, ref = trained
    exp = tmp_path / "exp"
    shutil.copytree(root / "exp", exp)
    old = _contents(exp)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        dst = Path(dst)
        if dst.parent == exp and dst.name in ("final.mdl", "phones.txt", "config.yaml"):
            # at each rename of a new file: the old model and its alignments are already in the backup
            assert not (exp / "phone_alignments").exists() and (exp / ".backup" / "1" / "final.mdl").is_file()
            seen.append(dst.name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    al = Aligner.load(root / "exp")
    assert al.save(exp) == exp / ".backup" / "1"
    monkeypatch.undo()
    assert seen[-1] == "final.mdl" and sorted(seen) == ["config.yaml", "final.mdl", "phones.txt"]
    assert _contents(exp / ".backup" / "1") == {n: v for n, v in old.items() if n != "log/train.log"}


def test_output_dir_containing_the_config_is_refused(trained, tmp_path, capsys):
    """Audit d4(b): an EXP_DIR holding the --config file was accepted and the user's config overwritten
    with the resolved config.yaml."""
    root, data, ref = trained
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("num_iters: 12\nbaum_welch_iters: 6\nrealign_iters: [7, 9, 11]\n"
                                      "max_iter_inc: 8\ntotal_gauss: 60\n")
    before = (conf / "config.yaml").read_bytes()
    for out in (conf, tmp_path):
        assert main([str(data), str(out), "--config", str(conf / "config.yaml"), "--num-iters", "8"]) == 1
        _one_line_error(capsys.readouterr().err, f"EXP_DIR {out} contains --config {conf / 'config.yaml'}")
    assert (conf / "config.yaml").read_bytes() == before and sorted(p.name for p in conf.iterdir()) == ["config.yaml"]
    # beside it is fine
    assert main([str(data), str(tmp_path / "exp"), "--config", str(conf / "config.yaml")]) == 0


def test_aligning_into_another_aligners_dir_is_refused(trained, tmp_path, capsys):
    """Issue 38 case 6: align --model-dir exp/aligner DATA exp/alignerB replaced alignerB's own alignments with
    another aligner's, no backup, leaving B's final.mdl beside alignments it did not make (exit 0). Refused before
    any work; a copy of the same model (same final.mdl bytes) may take them."""
    root, data, _ = trained
    b = tmp_path / "alignerB"
    shutil.copytree(root / "exp", b)
    (b / "final.mdl").write_bytes((b / "final.mdl").read_bytes() + b"\0")  # another aligner's model
    (b / "phone_alignments").write_text("x 0.00 0.10 sil\n")
    before = {p.name: p.read_bytes() for p in b.rglob("*") if p.is_file()}
    assert main([str(data), str(b), "--model-dir", str(root / "exp")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"speechkit-align: error: EXP_DIR {b} holds another aligner ({b / 'final.mdl'}, not the one of --model-dir "
        f"{root / 'exp'}): alignments written there would lie beside a model that did not make them; choose another "
        "EXP_DIR")
    assert {p.name: p.read_bytes() for p in b.rglob("*") if p.is_file()} == before
    copy = tmp_path / "copy"
    shutil.copytree(root / "exp", copy)
    assert main([str(data), str(copy), "--model-dir", str(root / "exp")]) == 0
