"""speechkit.utils.outputs: the overlap check and the whole-directory swap."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from speechkit.utils import outputs
from speechkit.utils.fileio import WriteError
from speechkit.utils.outputs import OutputOverlapError, check_output_dir, replace_dir


def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def layout(tmp_path):
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / "wav.scp").write_text("u1 a.wav\n")
    (tmp_path / "exp" / "vq" / "checkpoints").mkdir(parents=True)
    (tmp_path / "exp" / "vq" / "checkpoints" / "best.pt").write_text("x")
    (tmp_path / "exp" / "vq" / "config.yaml").write_text("c")
    return tmp_path


@pytest.mark.parametrize("out, why, label", [
    ("data/train", "is", "DATA_DIR"),
    ("data", "contains", "DATA_DIR"),
    ("data/train/units", "lies inside", "DATA_DIR"),
    ("data/train/../train", "is", "DATA_DIR"),
    ("exp/vq", "is", "--model-dir"),
    ("exp", "contains", "--model-dir"),
    ("exp/vq/checkpoints", "is", "checkpoint dir"),
])
def test_overlapping_outputs_are_refused(layout, out, why, label):
    with pytest.raises(OutputOverlapError) as e:
        check_output_dir(layout / out, option="OUT_DIR",
                         inputs={"DATA_DIR": layout / "data/train", "checkpoint dir": layout / "exp/vq/checkpoints",
                                 "config": layout / "exp/vq/config.yaml"},
                         experiment_dirs={"--model-dir": layout / "exp/vq"})
    msg = str(e.value)
    assert f"OUT_DIR {layout / out} {why} {label}" in msg


def test_symlinked_output_onto_an_input_is_refused(layout):
    (layout / "alias").symlink_to(layout / "data" / "train")
    with pytest.raises(OutputOverlapError, match="is DATA_DIR"):
        check_output_dir(layout / "alias", inputs={"DATA_DIR": layout / "data/train"})


def test_outputs_beside_or_inside_an_experiment_dir_are_allowed(layout):
    inputs = {"DATA_DIR": layout / "data/train", "checkpoint": layout / "exp/vq/checkpoints/best.pt"}
    for out in ("exp/vq/units/test", "data/train_units", "exp/vq2"):
        assert check_output_dir(layout / out, inputs=inputs, experiment_dirs={"--model-dir": layout / "exp/vq"}) \
            == layout / out


def test_an_existing_file_as_output_dir_is_refused_and_kept(layout):
    f = layout / "out"
    f.write_text("keep me")
    with pytest.raises(WriteError, match=f"cannot write {f}: Not a directory"):
        check_output_dir(f, inputs={"DATA_DIR": layout / "data/train"})
    with pytest.raises(WriteError):
        with replace_dir(f):
            pass
    assert f.read_text() == "keep me"
    assert sorted(p.name for p in layout.iterdir()) == ["data", "exp", "out"]


def test_first_write_then_replacement_keeps_a_numbered_backup(tmp_path):
    out = tmp_path / "synth"
    with replace_dir(out) as d:
        (d / "wav").mkdir()
        (d / "wav" / "a.wav").write_text("1")
        (d / "wav.scp").write_text("a wav/a.wav\n")
    assert _tree(out) == {"wav.scp": "a wav/a.wav\n", "wav/a.wav": "1"}
    with replace_dir(out) as d:
        (d / "wav.scp").write_text("b\n")
    assert _tree(out) == {"wav.scp": "b\n", ".backup/1/wav.scp": "a wav/a.wav\n", ".backup/1/wav/a.wav": "1"}
    with replace_dir(out) as d:
        (d / "wav.scp").write_text("c\n")
    # the older backup keeps its number; the one just replaced comes after it, flat, not nested
    assert _tree(out) == {"wav.scp": "c\n", ".backup/1/wav.scp": "a wav/a.wav\n", ".backup/1/wav/a.wav": "1",
                          ".backup/2/wav.scp": "b\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["synth"]


def test_a_kept_outputs_scp_files_name_its_own_files(tmp_path):
    """An output's scp names its files under OUT (where they are once swapped in); kept as OUT/.backup/1, they
    would name the new output's files: they are repointed at the backup, other paths left alone."""
    out = tmp_path / "synth"
    for v in ("old", "new"):
        with replace_dir(out) as d:
            (d / "feats.ark").write_text(v)
            (d / "wav").mkdir()
            (d / "wav" / "a.wav").write_text(v)
            (d / "feats.scp").write_text(f"a {out}/feats.ark:8\nb /elsewhere/x.ark:3\n")
            (d / "wav" / "wav.scp").write_text(f"a {out}/wav/a.wav\n")
    kept = out / ".backup" / "1"
    assert (kept / "feats.scp").read_text() == f"a {kept}/feats.ark:8\nb /elsewhere/x.ark:3\n"
    assert (kept / "wav" / "wav.scp").read_text() == f"a {kept}/wav/a.wav\n"
    assert (kept / "feats.ark").read_text() == "old" and (out / "feats.ark").read_text() == "new"
    assert (out / "feats.scp").read_text().startswith(f"a {out}/feats.ark:8")


def test_without_backup_the_old_output_is_deleted(tmp_path):
    out = tmp_path / "cache"
    for v in ("1", "2"):
        with replace_dir(out, backup=False, owner="speechkit-x") as d:
            (d / "x").write_text(v)
    assert _tree(out) == {"x": "2", outputs.OWNER_FILE: "speechkit-x\n"}


def test_without_backup_a_folder_the_tool_did_not_write_is_kept(tmp_path, caplog):
    out = tmp_path / "mywork"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("precious")
    (out / "sub" / "y").write_text("y")
    with replace_dir(out, backup=False, owner="speechkit-x") as d:
        (d / "x").write_text("1")
    assert _tree(out) == {"x": "1", outputs.OWNER_FILE: "speechkit-x\n", ".backup/1/notes.txt": "precious",
                          ".backup/1/sub/y": "y"}
    assert "no earlier speechkit-x run wrote" in caplog.text
    # another tool's output is not this tool's to delete either
    other = tmp_path / "other"
    with replace_dir(other, backup=False, owner="speechkit-y") as d:
        (d / "y").write_text("y")
    with replace_dir(other, backup=False, owner="speechkit-x") as d:
        (d / "x").write_text("x")
    assert _tree(other)[".backup/1/y"] == "y"
    # the tool's own earlier output goes, the backups it held stay
    with replace_dir(out, backup=False, owner="speechkit-x") as d:
        (d / "x").write_text("2")
    assert _tree(out) == {"x": "2", outputs.OWNER_FILE: "speechkit-x\n", ".backup/1/notes.txt": "precious",
                          ".backup/1/sub/y": "y"}


def test_without_backup_and_owner_the_old_output_is_deleted_whatever_it_holds(tmp_path):
    """For paths the caller chooses itself (a recipe's results/<name>): no marker, no backup."""
    out = tmp_path / "results"
    out.mkdir()
    (out / "old").write_text("old")
    with replace_dir(out, backup=False) as d:
        (d / "x").write_text("1")
    assert _tree(out) == {"x": "1"}


def test_data_dir_file_names_cover_the_data_layer_tables():
    from speechkit.data.datadir import EXTRA_FILES, PHONE_ALIGNMENTS, TABLES

    assert {*TABLES, *EXTRA_FILES, PHONE_ALIGNMENTS} <= outputs.DATA_DIR_FILES


def test_a_failure_leaves_the_previous_output_untouched(tmp_path):
    out = tmp_path / "synth"
    with replace_dir(out) as d:
        (d / "wav.scp").write_text("old\n")
    with pytest.raises(RuntimeError):
        with replace_dir(out) as d:
            (d / "wav.scp").write_text("half\n")
            raise RuntimeError("boom")
    assert _tree(out) == {"wav.scp": "old\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["synth"]


def test_the_fallback_of_two_renames_gives_the_same_result(tmp_path, monkeypatch):
    monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
    out = tmp_path / "synth"
    for v in ("1", "2"):
        with replace_dir(out) as d:
            (d / "x").write_text(v)
    assert _tree(out) == {"x": "2", ".backup/1/x": "1"}
    assert [p.name for p in tmp_path.iterdir()] == ["synth"]


def test_exchange_paths_swaps_two_directories(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("a")
    (tmp_path / "b").mkdir()
    if not outputs.exchange_paths(tmp_path / "a", tmp_path / "b"):
        pytest.skip("renameat2(RENAME_EXCHANGE) not available here")
    assert (tmp_path / "b" / "f").read_text() == "a" and not (tmp_path / "a" / "f").exists()


def test_a_killed_run_leaves_the_old_output_and_its_temp_is_removed_next_time(tmp_path):
    out = tmp_path / "synth"
    with replace_dir(out) as d:
        (d / "wav.scp").write_text("old\n")
    script = textwrap.dedent(f"""
        import os, signal
        from speechkit.utils.outputs import replace_dir
        with replace_dir({str(out)!r}) as d:
            (d / "wav.scp").write_text("new but partial\\n")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    rc = subprocess.run([sys.executable, "-c", script]).returncode
    assert rc == -9
    assert _tree(out) == {"wav.scp": "old\n"}
    assert any(p.name.startswith(".synth.tmp-") for p in tmp_path.iterdir())
    with replace_dir(out) as d:
        (d / "wav.scp").write_text("new\n")
    assert [p.name for p in tmp_path.iterdir()] == ["synth"]
    assert _tree(out) == {"wav.scp": "new\n", ".backup/1/wav.scp": "old\n"}


def test_permissions_of_the_swapped_dir_follow_the_umask(tmp_path):
    out = tmp_path / "o"
    with replace_dir(out):
        pass
    mask = os.umask(0)
    os.umask(mask)
    assert (out.stat().st_mode & 0o777) == (0o777 & ~mask)


def test_contains_ok_allows_inputs_inside_an_incremental_output(layout):
    """A training exp dir (written file by file, never replaced) may hold an input; it still may
    not be one or lie inside one."""
    codes = layout / "exp" / "inv" / "codes"
    codes.parent.mkdir(parents=True)
    codes.write_text("u1 1\n")
    assert check_output_dir(layout / "exp" / "inv", inputs={"data.codes": codes}, contains_ok=True) == layout / "exp/inv"
    with pytest.raises(OutputOverlapError, match="contains data.codes"):
        check_output_dir(layout / "exp" / "inv", inputs={"data.codes": codes})
    with pytest.raises(OutputOverlapError, match="lies inside DATA_DIR"):
        check_output_dir(layout / "data/train/exp", inputs={"DATA_DIR": layout / "data/train"}, contains_ok=True)


def test_the_one_output_rule_for_files(tmp_path):
    """Issue 38 cases 3, 4, 8: an output file is never a file an input dir's tables read (wav.scp's audio, also
    inside a pipe; feats.scp's and cmvn.scp's arks), never a table of any data dir (read or not), and an input
    dir given as a file stands for its directory; an output dir never contains a file an input's tables read."""
    from speechkit.utils.outputs import check_output_files, files_read_by_tables

    data, arks, audio = tmp_path / "data", tmp_path / "arks", tmp_path / "audio"
    for d in (data, arks, audio):
        d.mkdir()
    (audio / "a.wav").write_bytes(b"RIFF")
    (audio / "b.flac").write_bytes(b"fLaC")
    (data / "wav.scp").write_text(f"a {audio / 'a.wav'}\nb sox -R {audio / 'b.flac'} -t wav - |\n")
    (data / "cmvn.scp").write_text(f"s {arks / 'cmvn.ark'}:12\n")
    (data / "feats.scp").write_text(f"a {arks / 'raw.ark'}:8[0:3]\n")
    assert [str(f) for _, f in files_read_by_tables(data)] == [
        str(arks / "cmvn.ark"), str(arks / "raw.ark"), str(audio / "a.wav"), str(audio / "b.flac")]
    for out in (audio / "a.wav", audio / "b.flac", arks / "cmvn.ark", arks / "raw.ark"):
        with pytest.raises(OutputOverlapError, match=f"--log-file {out} is a file {data}/.*scp reads"):
            check_output_files({"--log-file": out}, input_dirs={"DATA": data})
    with pytest.raises(OutputOverlapError, match=f"--out {data / 'text'} would replace text of the data dir {data}"):
        check_output_files({"--out": data / "text"})  # a data dir the tool does not read
    with pytest.raises(OutputOverlapError, match="would replace feats.yaml of the dir of HYP"):
        check_output_files({"--json": data / "feats.yaml"}, input_dirs={"HYP": data / "feats.scp"})
    with pytest.raises(OutputOverlapError, match=f"--json {data / 'feats.scp'} is HYP"):
        check_output_files({"--json": data / "feats.scp"}, input_dirs={"HYP": data / "feats.scp"})
    check_output_files({"--json": data / "score.json", "--log-file": arks / "log"}, input_dirs={"DATA": data})
    with pytest.raises(OutputOverlapError, match=f"OUT_DIR {arks} contains a file {data / 'cmvn.scp'} reads"):
        check_output_dir(arks, inputs={"DATA_DIR": data}, option="OUT_DIR")
    check_output_dir(tmp_path / "units", inputs={"DATA_DIR": data})


def test_a_failed_write_or_swap_names_the_output_and_leaves_no_temporary(tmp_path, monkeypatch):
    """Issue 38 case 18: errors named the hidden .OUT.tmp-PID-x / .OUT.old-PID-x paths, and those dirs stayed."""
    import errno

    out = tmp_path / "out"
    with pytest.raises(PermissionError) as e:
        with replace_dir(out) as d:
            raise PermissionError(errno.EACCES, "Permission denied", str(d / "wav" / "a.wav"))
    assert e.value.filename == str(out / "wav" / "a.wav")
    with pytest.raises(WriteError, match=f"cannot write {out}/feats.ark: No space left on device"):
        with replace_dir(out) as d:
            raise WriteError(errno.ENOSPC, "No space left on device", str(d / "feats.ark"))
    assert list(tmp_path.iterdir()) == []
    with replace_dir(out) as d:
        (d / "a").write_text("1")
    real = os.replace
    monkeypatch.setattr(outputs, "exchange_paths", lambda a, b: False)
    monkeypatch.setattr(outputs.os, "replace", lambda a, b: (_ for _ in ()).throw(
        PermissionError(errno.EPERM, "Operation not permitted", str(a), None, str(b))) if str(a) == str(out)
        else real(a, b))
    with pytest.raises(WriteError, match=f"^cannot write {out}: Operation not permitted$"):
        with replace_dir(out) as d:
            (d / "a").write_text("2")
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and _tree(out) == {"a": "1"}


def test_a_full_disk_inside_replace_dir_names_the_output(tmp_path):
    """Issue 38 case 18: vocode on a full disk said 'speechkit-vocode: error: No space left on device' (write()
    and close() name no file; here the marker file written into the temporary dir). The error names OUT and
    no temporary is left."""
    import errno

    out = tmp_path / "voc"
    with pytest.raises(WriteError) as e:
        with replace_dir(out, backup=False, owner="speechkit-x"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert str(e.value) == f"cannot write {out}: No space left on device"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyError):  # other errors pass unchanged
        with replace_dir(out):
            raise KeyError("x")
