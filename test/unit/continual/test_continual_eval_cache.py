"""Issue 38 case 16: a cache of speechkit-score-continual cut short (eval/episode_NN.json, a killed run or a full
disk) is evaluated again with a warning naming it, instead of failing with the JSON parser's bare message on every
later run; the run's plan.json that is not JSON is an error naming the file and line. Reuses the scripted run of
test_continual_eval (fake synthesizer and encoder)."""
from __future__ import annotations

import json
import logging

import pytest

from speechkit.utils.fileio import DataError
from test_continual_eval import RA, FakeSynth, _eval, run  # noqa: F401  (run: the fixture)


def test_a_torn_episode_cache_is_evaluated_again_with_a_warning(run, caplog):  # noqa: F811
    first = _eval(run)
    calls = FakeSynth.calls
    cache = run / "exp" / "eval" / "episode_02.json"
    text = cache.read_text()
    cache.write_text(text[: len(text) // 2])  # cut short
    with caplog.at_level(logging.WARNING):
        again = _eval(run)
    assert FakeSynth.calls == calls + 2 * 2  # episode 2 only (2 seen speakers x 2 utterances)
    assert again["retained_accuracy"] == first["retained_accuracy"] == pytest.approx(RA)
    assert json.loads(cache.read_text()) == json.loads(text)  # written again, whole
    warned = [r.getMessage() for r in caplog.records if "episode_02.json" in r.getMessage()]
    assert warned and "cut short" in warned[0] and "computed again" in warned[0]


def test_a_plan_that_is_not_json_is_named(run):  # noqa: F811
    (run / "exp" / "plan.json").write_text('{"strategy": "sa", "order": ["b", "c"')
    with pytest.raises(DataError, match=r"plan\.json:1:\d+: not valid JSON .*cut short"):
        _eval(run)
