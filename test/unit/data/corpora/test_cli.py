"""speechkit-prepare-corpus: sub-command per registered corpus, options, exit codes."""
from __future__ import annotations

import pytest

from speechkit.bin.prepare_corpus import main
from speechkit.data.corpora import CORPORA, get_corpus
from speechkit.data.datadir import DataDir


def test_help_lists_every_corpus_and_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for corpus in CORPORA.values():
        assert f"  {corpus.name}: " in out
        for opt in corpus.options:
            assert "--" + opt.name.replace("_", "-") in out
    assert "--sample-rate HZ" in out and "--keep-punctuation" in out


def test_registry():
    """The registry is the one list of corpora: every corpus module (speechkit/data/corpora/<name>.py, not
    _private) is registered under its own name with its prepare_<name>/download_<name>, and the error
    for an unknown name lists every registered one (so a new corpus needs no edit here)."""
    import inspect
    from pathlib import Path

    import speechkit.data.corpora as pkg

    modules = {p.stem for p in Path(pkg.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    assert set(CORPORA) == modules
    for name, corpus in CORPORA.items():
        assert corpus.name == name and corpus.description
        assert corpus.prepare.__module__ == corpus.download.__module__ == f"speechkit.data.corpora.{name}"
        params = inspect.signature(corpus.prepare).parameters
        for opt in corpus.options:
            assert opt.name in params and params[opt.name].kind == inspect.Parameter.KEYWORD_ONLY, (name, opt.name)
        assert {"sample_rate", "keep_punctuation"} <= set(params), name
        assert get_corpus(name) is corpus
    with pytest.raises(ValueError, match=f"unknown corpus 'nope'; known: {', '.join(sorted(CORPORA))}$"):
        get_corpus("nope")


def test_prepare_timit_via_cli(shared_data, tmp_path, capsys):
    assert main(["timit", str(shared_data / "timit_sample"), str(tmp_path / "t"), "--no-include-sa"]) == 0
    assert "wrote" in capsys.readouterr().out and len(DataDir.load(tmp_path / "t")) == 64


def test_min_vote_none_via_cli(shared_data, tmp_path):
    assert main(["msc_malayalam", str(shared_data / "msc_malayalam"), str(tmp_path / "m"), "--min-vote", "none"]) == 0
    assert len(DataDir.load(tmp_path / "m")) == 2087


def test_errors_exit_nonzero(tmp_path, capsys):
    assert main(["fsdd", str(tmp_path / "absent"), str(tmp_path / "out")]) == 1
    assert "speechkit-prepare-corpus: error: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["nope", "a", "b"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["mini", "a", "b", "--num-speakers", "many"])


def test_mini_via_cli_reuses_a_complete_corpus(mini_corpus, mini_params, tmp_path):
    marker = mini_corpus / ".complete"
    stamp = marker.stat().st_mtime_ns
    args = ["mini", str(mini_corpus), str(tmp_path / "d"), "--seed", str(mini_params["seed"]),
            "--num-speakers", str(mini_params["num_speakers"]),
            "--sentences-per-language", str(mini_params["sentences_per_language"]),
            "--languages", ",".join(mini_params["languages"])]
    assert main(args) == 0
    assert marker.stat().st_mtime_ns == stamp                     # nothing re-synthesized
    assert len(DataDir.load(tmp_path / "d")) == 80
    assert main(args[:3] + ["--seed", "99"]) == 1                  # other parameters: an error, not a silent redo


def test_out_dir_overlapping_the_corpus_is_refused(tmp_path, capsys):
    """Issue 23 sweep: OUT_DIR inside (or equal to) CORPUS_DIR wrote the data dir into the corpus."""
    corpus = tmp_path / "fsdd"
    (corpus / "recordings").mkdir(parents=True)
    for out, why in [(corpus, "is"), (corpus / "data", "lies inside"), (tmp_path, "contains")]:
        assert main(["fsdd", str(corpus), str(out)]) == 1
        assert f"OUT_DIR {out} {why} CORPUS_DIR {corpus}" in capsys.readouterr().err
    assert [p.name for p in corpus.iterdir()] == ["recordings"]


def test_an_unwritable_log_file_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert main(["fsdd", str(tmp_path / "c"), str(tmp_path / "out"), "--log-file", str(tmp_path / "afile" / "x")]) == 1
    err = capsys.readouterr().err
    assert f"speechkit-prepare-corpus: error: cannot write {tmp_path / 'afile'}: Not a directory" in err
