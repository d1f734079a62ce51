"""speechkit.results.formatting: one formatter per meaning, as the four recipes' pages print them."""
from __future__ import annotations

import math

import numpy as np
import pytest

from speechkit.results.formatting import duration, number, percent, signed, signed_interval


def test_number_writes_missing_and_non_finite_figures_as_a_dash():
    assert number(1.234) == "1.23" and number(2, 1) == "2.0" and number(np.float32(0.5), 3) == "0.500"
    assert number(None) == "-" and number(math.nan) == "-" and number(math.inf, 1) == "-"
    assert number(None, missing="–") == "–"  # zerospeech2019's pages mark a missing figure with an en dash
    with pytest.raises(ValueError):
        number("12")  # a string where a figure was expected is an error, not a cell


def test_percent_of_a_share_never_prints_minus_zero():
    assert percent(0.853) == "85.3" and percent(1) == "100.0" and percent(0.12345, 2) == "12.35"
    assert percent(-0.0001) == "0.0"          # round(-0.01, 1) is -0.0: the page showed "-0.0"
    assert percent(None) == "-" and percent(np.nan) == "-"


def test_duration_is_seconds_below_two_minutes_then_minutes():
    assert duration(45) == "45 s" and duration(119.4) == "119 s" and duration(0) == "0 s"
    assert duration(120) == "2.0 min" and duration(136) == "2.3 min" and duration(3172) == "52.9 min"
    assert duration(7200) == "120.0 min"      # one unit down a column, also past an hour
    assert duration(None) == "-" and duration(math.nan) == "-" and duration(None, missing="–") == "–"


def test_signed_interval():
    assert signed(0.123) == "+0.12" and signed(-0.05, 1, 100) == "-5.0" and signed(0.0) == "+0.00"
    assert signed_interval(0.123, (-0.3, 0.54)) == "+0.12 [-0.30, +0.54]"
    # vctk_continual: shares as points, one decimal
    assert signed_interval(0.025, (-0.92795, 0.97795), 1, 100) == "+2.5 [-92.8, +97.8]"
