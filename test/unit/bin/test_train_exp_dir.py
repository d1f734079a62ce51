"""speechkit-train: the experiment dir never overlaps the data the config names (issue 23 sweep)."""
from __future__ import annotations

from speechkit.bin.train import main


def test_exp_dir_overlapping_a_data_dir_of_the_config_is_refused_before_any_work(tmp_path, capsys):
    """--exp-dir = data.train_dir wrote config.yaml, train.log and checkpoints/ into the data dir
    (and --resume false would have moved the data dir's files to prev-<time>/)."""
    train = tmp_path / "dump" / "train"
    train.mkdir(parents=True)
    (train / "feats.scp").write_text("u1 x.ark:1\n")
    for exp, why in [(train, "is"), (train / "exp", "lies inside")]:
        assert main(["vqvae", "--exp-dir", str(exp), "--data.train_dir", str(train)]) == 1
        assert f"speechkit-train: error: --exp-dir {exp} {why} data.train_dir {train}" in capsys.readouterr().err
    assert [p.name for p in train.iterdir()] == ["feats.scp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump"]


def test_an_exp_dir_may_hold_its_inputs(tmp_path, capsys):
    """The trainer writes its exp dir file by file and never replaces it, so inputs kept there (the
    zerospeech recipe copies an inverter's codes into its exp dir) are not an overlap."""
    exp = tmp_path / "exp" / "inverter"
    exp.mkdir(parents=True)
    (exp / "codes").write_text("u1 1 2 3\n")
    main(["inverter", "--exp-dir", str(exp), "--data.codes", str(exp / "codes"),
          "--data.feats_dir", str(tmp_path / "f"), "--data.vqvae_dir", str(tmp_path / "vq")])
    err = capsys.readouterr().err
    assert "outputs never overlap inputs" not in err and "error" in err  # fails later: no features, no VQ-VAE
    assert (exp / "codes").read_text() == "u1 1 2 3\n"


def test_exp_dir_and_the_vqvae_dir_of_an_inverter(tmp_path, capsys):
    vq = tmp_path / "vq"
    vq.mkdir()
    assert main(["inverter", "--exp-dir", str(vq), "--data.vqvae_dir", str(vq), "--data.codes", str(tmp_path / "c"),
                 "--data.feats_dir", str(tmp_path / "f")]) == 1
    assert f"--exp-dir {vq} is data.vqvae_dir {vq}" in capsys.readouterr().err
    assert list(vq.iterdir()) == []


def test_help_says_what_is_refused(capsys):
    """--help said EXP may not contain a data dir, but --exp-dir tr --data.train-dir tr/train is
    accepted on purpose (contains_ok); the help now says what is refused and what is allowed."""
    import pytest

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    assert "may not be, contain or lie inside" not in out and "be or contain the experiment dir" not in out
    assert "EXP may not be, or lie inside, a data dir" in out
    assert "EXP may contain them" in out and "--exp-dir tr --data.train-dir tr/train is accepted" in out
