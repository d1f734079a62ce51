"""Issue 36 item 2: the speaker orders of a continual run are rows of a Williams design (Williams 1949) over the
C-sorted continual speakers: distinct permutations, no two rows of the first n beginning with the same speaker, a
Latin square, balanced for the speaker that comes right before (every ordered pair side by side once for even n,
twice over the 2n rows for odd n). Also EpisodePlan.create(row=K) and the mini recipe's orders by hand."""
from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise

import pytest

from speechkit.bin.train_continual import main
from speechkit.train.continual_strategies import EpisodePlan, design_order, williams_design
from test_continual_driver import _cli_args, setup  # noqa: F401  (setup: the fixture, theta_init on p1 p2)


def _pairs(rows: list[list[int]]) -> Counter:
    return Counter(p for r in rows for p in pairwise(r))


@pytest.mark.parametrize("n", range(1, 10))
def test_rows_are_distinct_permutations_with_distinct_first_speakers(n):
    rows = williams_design(n)
    assert len(rows) == (2 * n if n % 2 and n > 1 else n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    assert len({tuple(r) for r in rows}) == len(rows)       # distinct permutations
    assert len({r[0] for r in rows[:n]}) == n               # the first n rows: n different first speakers


@pytest.mark.parametrize("n", [4, 5])
def test_the_first_n_rows_are_a_latin_square(n):
    square = williams_design(n)[:n]
    for col in range(n):
        assert sorted(r[col] for r in square) == list(range(n)), col
    if n == 4:  # by hand: first row 0 1 3 2, each next row + 1 mod 4
        assert square == [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    else:       # first row 0 1 4 2 3; rows 6-10 reverse rows 1-5
        assert square[0] == [0, 1, 4, 2, 3] and williams_design(5)[5] == [3, 2, 4, 1, 0]


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_even_n_balances_carry_over_once(n):
    """Every ordered pair (a, b), a != b, with a right before b in exactly one row."""
    pairs = _pairs(williams_design(n))
    assert len(pairs) == n * (n - 1) and set(pairs.values()) == {1}


@pytest.mark.parametrize("n", [3, 5, 7])
def test_odd_n_balances_carry_over_twice_over_2n_rows(n):
    rows = williams_design(n)
    pairs = _pairs(rows)
    assert len(pairs) == n * (n - 1) and set(pairs.values()) == {2}
    for col in range(n):  # each half is a Latin square
        assert sorted(r[col] for r in rows[n:]) == list(range(n))


def test_a_seeded_permutation_is_not_such_a_design():
    """What the recipe ran before: the mini orders of seeds 1-3 share first speakers (issue 36)."""
    spk = ["sp05", "sp06", "sp07", "sp08"]
    seeded = [EpisodePlan.create(spk, "sa", seed).order for seed in (1, 2, 3)]
    assert len({o[0] for o in seeded}) < 3
    rows = [EpisodePlan.create(spk, "sa", seed, row=k).order for seed, k in ((1, 1), (2, 2), (3, 3))]
    assert rows == [["sp05", "sp06", "sp08", "sp07"], ["sp06", "sp07", "sp05", "sp08"],
                    ["sp07", "sp08", "sp06", "sp05"]]
    assert len({o[0] for o in rows}) == 3


def test_design_order_sorts_the_speakers_and_names_the_range():
    assert design_order(["c", "a", "b", "a"], 1) == ["a", "b", "c"]
    assert design_order(["c", "a", "b"], 4) == ["c", "b", "a"]  # odd n: row n + 1 reverses row 1
    assert design_order(["x"], 1) == ["x"]
    with pytest.raises(ValueError, match=r"row 5 is out of range: the Williams design over 4 speakers has rows 1-4$"):
        design_order(["a", "b", "c", "d"], 5)
    with pytest.raises(ValueError, match=r"rows 1-6; rows 4-6 reverse rows 1-3"):
        design_order(["a", "b", "c"], 0)
    with pytest.raises(ValueError, match="no continual speakers"):
        design_order([], 1)
    with pytest.raises(ValueError, match="at least 1 treatment"):
        williams_design(0)


def test_plan_row_keeps_the_seed_for_training_and_is_checked_on_resume(tmp_path):
    """row picks the order, seed stays the replay seed; a resumed run asking for another row is an error."""
    plan = EpisodePlan.create(["a", "b", "c", "d"], "er", 7, row=2, buffer_size=1)
    assert plan.order == ["b", "c", "a", "d"] and plan.seed == 7
    path = tmp_path / "plan.json"
    EpisodePlan.resume_or_save(plan, path)
    other = EpisodePlan.create(["a", "b", "c", "d"], "er", 7, row=3, buffer_size=1)
    with pytest.raises(Exception, match=r"order: saved \['b', 'c', 'a', 'd'\], requested \['c', 'd', 'b', 'a'\]"):
        EpisodePlan.resume_or_save(other, path)
    with pytest.raises(ValueError, match="row must be >= 0"):
        EpisodePlan.create(["a", "b"], "sa", 0, row=-1)


# ------------------------------------------------------------------ speechkit-train-continual --order K
def test_train_continual_order_is_a_design_row_recorded_in_plan_json(setup, tmp_path, capsys):  # noqa: F811
    """--order 2 over c1 c2 c3: row 2 of the 6-row design, c2 c3 c1; plan.json records the order and how it was
    made; --order 7 is an error naming the key and the rows; a resumed run asking for another row is refused."""
    exp = tmp_path / "exp"
    assert main(_cli_args(setup, exp, "--strategy", "sa", "--seed", "5", "--order", "2")) == 0
    plan = json.loads((exp / "plan.json").read_text())
    assert plan["order"] == ["c2", "c3", "c1"] and plan["seed"] == 5
    assert plan["extra"]["order_design"] == {"design": "williams", "row": 2, "rows": 6,
                                             "speakers": ["c1", "c2", "c3"]}
    assert [p.name for p in sorted(exp.glob("episode_*"))] == ["episode_01_c2", "episode_02_c3", "episode_03_c1"]
    capsys.readouterr()
    assert main(_cli_args(setup, exp, "--strategy", "sa", "--seed", "5", "--order", "3")) == 1
    assert "order: saved ['c2', 'c3', 'c1'], requested ['c3', 'c1', 'c2']" in capsys.readouterr().err
    assert main(_cli_args(setup, tmp_path / "x", "--strategy", "sa", "--order", "7")) == 1
    err = capsys.readouterr().err
    assert "key 'order': row 7 is out of range: the Williams design over 3 speakers has rows 1-6" in err, err
    assert not (tmp_path / "x" / "plan.json").exists()
    # without --order: the seed's permutation, as before, and so recorded
    assert main(_cli_args(setup, tmp_path / "s", "--strategy", "sa", "--seed", "3",
                          "--trainer.max-epochs", "1")) == 0
    plan = json.loads((tmp_path / "s" / "plan.json").read_text())
    assert plan["order"] == EpisodePlan.create(["c1", "c2", "c3"], "sa", 3).order
    assert plan["extra"]["order_design"] == {"design": "seed", "seed": 3, "speakers": ["c1", "c2", "c3"]}
