"""speechkit.bin._decode_options: the flags of speechkit-asr-decode that fill a DecodeOptions, and back."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from speechkit.bin._decode_options import add_decode_options, decode_options
from speechkit.inference.speech2text import DecodeOptions


def test_add_decode_options_fill_decode_options():
    """add_decode_options' options are DecodeOptions' fields (decode_options reads them back), with the
    part options of decode_data_dir unless parts=False."""
    p = argparse.ArgumentParser()
    add_decode_options(p)
    assert decode_options(p.parse_args([])) == DecodeOptions()
    a = p.parse_args(["--lid-free", "--search", "beam", "--beam", "2", "--batch-size", "3", "--device", "auto",
                      "--switch-off-tau", "5", "--switch-off-threshold", "inf", "--nj", "2", "--max-jobs", "1",
                      "--force"])
    assert decode_options(a) == DecodeOptions(mode="lid_free", search="beam", beam=2, batch_size=3, device="auto",
                                              switch_off_tau=5, switch_off_threshold=float("inf"))
    assert (a.nj, a.job, a.merge_only, a.max_jobs, a.force) == (2, None, False, 1, True)
    assert decode_options(p.parse_args(["--oracle-lid"])).mode == "oracle"
    with pytest.raises(SystemExit):
        p.parse_args(["--lid-free", "--oracle-lid"])
    q = argparse.ArgumentParser()
    add_decode_options(q, parts=False)
    options = {s for action in q._actions for s in action.option_strings}
    assert not options & {"--nj", "--job", "--merge-only", "--max-jobs", "--force"}
    assert {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(DecodeOptions) if f.name != "mode"} \
        <= options
    assert decode_options(q.parse_args(["--chunk-frames", "7"])) == DecodeOptions(chunk_frames=7)


def test_floats_come_back_exactly():
    """A float option parses back to the same number (inf too): the fingerprint of a part decoded by
    ``--job J`` under run.pl is the one the merge computes from the same flags."""
    p = argparse.ArgumentParser()
    add_decode_options(p, parts=False)
    for value in (0.1 + 0.2, 1e-7, float("inf")):
        a = p.parse_args(["--lid-free", "--switch-off-tau", "2", "--switch-off-threshold", str(value),
                          "--blank-penalty", str(0.1 + 0.2)])
        assert decode_options(a) == DecodeOptions(mode="lid_free", switch_off_tau=2, switch_off_threshold=value,
                                                  blank_penalty=0.1 + 0.2)
    with pytest.raises(SystemExit):
        p.parse_args(["--blank-penalty", "nan"])
