"""speechkit.utils.results_io: the output rule of the results scripts (issue 38 cases 1 and 2): a collect
writes only a run folder it made, never what it reads, the results root or another run; a page never replaces a
file it is made from."""
from __future__ import annotations

import pytest

from speechkit.utils.fileio import WriteError
from speechkit.utils.outputs import OWNER_FILE, OutputOverlapError
from speechkit.utils.results_io import check_collect_dir, check_page, check_run_name, collect_dir

OWNER = "egs/x/local/make_results.py --collect"
SIG = ("test_set.json",)


def _files(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_a_new_empty_or_notes_only_folder_is_collected_into_and_marked(tmp_path):
    out = tmp_path / "results" / "mini"
    with collect_dir(out, owner=OWNER, signature=SIG) as tmp:
        (tmp / "test_set.json").write_text("{}")
    assert (out / OWNER_FILE).read_text() == OWNER + "\n" and (out / "test_set.json").is_file()
    for name, files in (("empty", {}), ("notes", {"NOTES.md": "by hand\n"})):
        d = tmp_path / "results" / name
        d.mkdir()
        for f, text in files.items():
            (d / f).write_text(text)
        assert check_collect_dir(d, owner=OWNER, signature=SIG) == d


def test_a_later_collect_replaces_only_its_own_folder(tmp_path):
    out = tmp_path / "results" / "mini"
    with collect_dir(out, owner=OWNER, signature=SIG) as tmp:
        (tmp / "old.json").write_text("{}")
    with collect_dir(out, owner=OWNER, signature=SIG) as tmp:
        (tmp / "new.json").write_text("{}")
    assert _files(out) == [OWNER_FILE, "new.json"]
    # made by an older version (no marker, its signature file): replaced
    legacy = tmp_path / "results" / "real"
    legacy.mkdir()
    (legacy / "test_set.json").write_text("{}")
    (legacy / "stale.json").write_text("{}")
    with collect_dir(legacy, owner=OWNER, signature=SIG) as tmp:
        (tmp / "test_set.json").write_text("{}")
    assert _files(legacy) == [OWNER_FILE, "test_set.json"]
    # a failed collect leaves the previous folder as it was
    with pytest.raises(RuntimeError):
        with collect_dir(out, owner=OWNER, signature=SIG) as tmp:
            (tmp / "half.json").write_text("{")
            raise RuntimeError("killed")
    assert _files(out) == [OWNER_FILE, "new.json"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["mini", "real"]


def test_folders_a_collect_may_not_write(tmp_path):
    exp, data = tmp_path / "exp", tmp_path / "data"
    (exp / "sys1").mkdir(parents=True)
    (exp / "sys1" / "best.pt").write_bytes(b"model")
    data.mkdir()
    reads = {"--expdir": exp, "--datadir": data}
    for out, msg in ((exp, "is --expdir"), (exp / "sys1", "lies inside --expdir"), (data, "is --datadir"),
                     (tmp_path, "contains --expdir")):
        with pytest.raises(OutputOverlapError, match=msg):
            check_collect_dir(out, owner=OWNER, signature=SIG, reads=reads)
    results = tmp_path / "results"
    (results / "mini").mkdir(parents=True)
    (results / "mini" / "test_set.json").write_text("{}")
    (results / "other").mkdir()
    (results / "other" / OWNER_FILE).write_text(OWNER + "\n")
    with pytest.raises(OutputOverlapError, match=r"holds the results run folder\(s\) mini, other"):
        check_collect_dir(results, owner=OWNER, signature=SIG)
    with pytest.raises(OutputOverlapError, match="lies inside the results run folder"):
        check_collect_dir(results / "other" / "sub", owner=OWNER, signature=SIG)
    with pytest.raises(OutputOverlapError, match="lies inside the results run folder"):
        check_collect_dir(results / "mini" / "sub", owner=OWNER, signature=SIG)
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "draft.tex").write_text("x")
    with pytest.raises(OutputOverlapError, match="not a results run folder this collect made .it holds no "):
        check_collect_dir(user, owner=OWNER, signature=SIG)
    (user / OWNER_FILE).write_text("egs/y/local/make_results.py --collect\n")  # another recipe's run
    with pytest.raises(OutputOverlapError, match="it was made by egs/y/local/make_results.py --collect"):
        check_collect_dir(user, owner=OWNER, signature=SIG)
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError):
        check_collect_dir(tmp_path / "file", owner=OWNER, signature=SIG)
    assert (exp / "sys1" / "best.pt").read_bytes() == b"model" and (user / "draft.tex").is_file()


def test_glob_signatures(tmp_path):
    run = tmp_path / "mini"
    (run / "sp01").mkdir(parents=True)
    (run / "sp01" / "speaker.json").write_text("{}")
    (run / "f0.png").write_bytes(b"png")
    assert check_collect_dir(run, owner=OWNER, signature=("*/speaker.json",)) == run
    with pytest.raises(OutputOverlapError, match=r"holds the results run folder\(s\) mini"):
        check_collect_dir(tmp_path, owner=OWNER, signature=("*/speaker.json",))


def test_page_never_replaces_what_it_reads(tmp_path):
    results, exp, data = tmp_path / "results", tmp_path / "exp", tmp_path / "data"
    (results / "mini").mkdir(parents=True)
    (results / "mini" / "test_set.json").write_text("{}")
    (exp / "vq" / "scores").mkdir(parents=True)
    data.mkdir()
    roots = {"--results": results}
    assert check_page(tmp_path / "RESULTS.md", option="--render", roots=roots) == tmp_path / "RESULTS.md"
    assert check_page(results / "RESULTS.md", option="--render", roots=roots)  # beside the runs: not read
    for page, msg in ((results / "mini" / "test_set.json", "lies inside a subfolder of --results"),
                      (results / "mini" / "new" / "page.md", "lies inside a subfolder of --results"),
                      (results, "is --results")):
        with pytest.raises(OutputOverlapError, match=msg):
            check_page(page, option="--render", roots=roots)
    with pytest.raises(OutputOverlapError, match="--out .*abx_across.json lies inside a subfolder of --expdir"):
        check_page(exp / "vq" / "scores" / "abx_across.json", option="--out", roots={"--expdir": exp})
    with pytest.raises(OutputOverlapError, match="lies inside --datadir"):
        check_page(data / "text", option="--out", inputs={"--datadir": data})
    with pytest.raises(OutputOverlapError, match="is EXPDIR/results.json"):
        check_page(exp / "results.json", option="--out", outputs={"EXPDIR/results.json": exp / "results.json"})
    (tmp_path / "adir").mkdir()
    with pytest.raises(WriteError):
        check_page(tmp_path / "adir", option="--out")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../exp", ".hidden"])
def test_run_names_are_one_folder_name(name):
    with pytest.raises(ValueError, match=f"^name {name!r}: a run name"):  # the parameter, by default
        check_run_name(name)
    with pytest.raises(ValueError, match=f"^--run {name!r}: a run name"):  # as a recipe's CLI names it
        check_run_name(name, "--run")
    assert check_run_name("mini_en-hi.2") == "mini_en-hi.2"


def test_a_users_folder_holding_a_signature_file_is_not_taken_for_an_old_run(tmp_path):
    """A folder without a marker was taken for a run folder collected before markers existed as soon as it held
    the signature file (vctk's setup.json, indic's run.json: common names), and replaced whole: vctk --collect mine,
    mine holding setup.json and thesis.tex, deleted the thesis (exit 0). It must also hold nothing a collect does
    not write; an old run folder (JSON, Markdown, figures) is still collected into."""
    sig = ("setup.json",)
    mine = tmp_path / "mine"
    (mine / "ch1").mkdir(parents=True)
    (mine / "setup.json").write_text('{"mine": 1}')
    (mine / "ch1" / "thesis.tex").write_text("a thesis\n")
    with pytest.raises(OutputOverlapError, match=r"mine exists and is not a results run folder this collect made "
                                                 r"\(it holds ch1/thesis.tex, which no collect writes\)"):
        with collect_dir(mine, owner=OWNER, signature=sig) as tmp:
            (tmp / "setup.json").write_text("{}")
    assert _files(mine) == ["ch1/thesis.tex", "setup.json"]
    old = tmp_path / "results" / "mini"  # an old run folder: replaced and marked
    (old / "sa" / "figures").mkdir(parents=True)
    (old / "setup.json").write_text("{}")
    (old / "runs.jsonl").write_text("{}\n")
    (old / "sa" / "figures" / "ra.png").write_bytes(b"\x89PNG")
    with collect_dir(old, owner=OWNER, signature=sig) as tmp:
        (tmp / "setup.json").write_text('{"new": 1}')
    assert _files(old) == [OWNER_FILE, "setup.json"]
