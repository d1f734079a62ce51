"""speechkit-train-continual: a strategy's own option given for another strategy, and out-of-range
values, are errors naming the option before anything is read or written (issue 23 item 18: with
--strategy sa, --buffer-size 3 was accepted, ignored and recorded as 0 in plan.json)."""
from __future__ import annotations

import math

import pytest

from speechkit.bin.train_continual import KEY_FLAGS, main
from speechkit.train.continual_strategies import STRATEGIES, STRATEGY_OPTIONS, EpisodePlan, check_strategy_options
from speechkit.utils.cli import ConfigError


def _last_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and "Traceback" not in err, err
    return lines[-1]


@pytest.mark.parametrize("strategy, option, value, users", [
    ("sa", "--buffer-size", "3", "er | er_kd | er_br"),
    ("jt", "--buffer-size", "0", "er | er_kd | er_br"),  # explicit, even at the default
    ("jt_cumulative", "--replicate", "1", "er_br"),
    ("ewc", "--buffer_size", "2", "er | er_kd | er_br"),
    ("er", "--replicate", "3", "er_br"),
    ("er_kd", "--replicate", "1", "er_br"),
    ("sa", "--ewc-lambda", "5", "ewc"),
    ("er_br", "--ewc-mode", "per_episode", "ewc"),
])
def test_option_of_another_strategy_is_an_error(tmp_path, capsys, strategy, option, value, users):
    exp = tmp_path / "exp"
    needs = {"er": ["--buffer-size", "2"], "er_kd": ["--buffer-size", "2"], "er_br": ["--buffer-size", "1"],
             "ewc": ["--ewc-lambda", "10"]}.get(strategy, [])
    if option.replace("_", "-") in needs:
        needs = []
    argv = ["--strategy", strategy, *needs, option, value, "--init-dir", str(tmp_path / "init"),
            "--train-dir", str(tmp_path / "t"), "--valid-dir", str(tmp_path / "v")]
    shown = option.replace("_", "-")
    for extra in (["--exp-dir", str(exp)], ["--print-config"]):
        assert main([*extra, *argv]) == 1
        assert _last_error(capsys.readouterr().err) == (
            f"speechkit-train-continual: error: command line: {shown} applies to --strategy {users} only, "
            f"not {strategy}: remove it")
    assert not exp.exists()


def test_each_strategy_takes_its_own_options_and_a_shared_config_file(tmp_path, capsys):
    own = {"jt": [], "jt_cumulative": [], "sa": [], "ewc": ["--ewc-lambda", "10", "--ewc-mode", "per_episode"],
           "er": ["--buffer-size", "2"], "er_kd": ["--buffer-size", "2"],
           "er_br": ["--buffer-size", "1", "--replicate", "10"]}
    assert set(own) == set(STRATEGIES)
    for strategy, opts in own.items():
        assert main(["--print-config", "--strategy", strategy, *opts]) == 0, capsys.readouterr().err
    # one config file for every run (the recipe's conf/continual.yaml holds ewc_lambda for all of them)
    conf = tmp_path / "continual.yaml"
    conf.write_text("ewc_lambda: 100.0\newc_mode: online\nbuffer_size: 5\n")
    assert main(["--print-config", "--config", str(conf), "--strategy", "sa"]) == 0
    assert "ewc_lambda: 100.0" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--ewc-lambda", ".nan", "--strategy", "ewc"], "key 'ewc_lambda': must be a finite number >= 0, got nan"),
    (["--ewc-lambda", ".inf", "--strategy", "ewc"], "key 'ewc_lambda': must be a finite number >= 0, got inf"),
    (["--ewc-lambda", "-1", "--strategy", "ewc"], "key 'ewc_lambda': must be a finite number >= 0, got -1.0"),
    (["--strategy", "er_br", "--buffer-size", "-1"], "key 'buffer_size': must be >= 0, got -1"),
    (["--strategy", "er_br", "--buffer-size", "1", "--replicate", "0"], "key 'replicate': must be >= 1, got 0"),
    (["--seed", "-1"], "key 'seed': must be >= 0, got -1"),
])
def test_out_of_range_values_are_errors_naming_the_key(tmp_path, capsys, argv, message):
    exp = tmp_path / "exp"
    assert main(["--exp-dir", str(exp), *argv]) == 1
    assert _last_error(capsys.readouterr().err).endswith(message)
    assert not exp.exists()


def test_check_strategy_options_and_episode_plan_ranges():
    for key, users in STRATEGY_OPTIONS.items():
        for s in STRATEGIES:
            if s in users:
                check_strategy_options(s, [key, key.replace("_", "-")])
            else:
                with pytest.raises(ConfigError, match=f"^command line: {key} applies to strategy "):  # the key
                    check_strategy_options(s, [key])
        assert KEY_FLAGS[key] == f"--{key.replace('_', '-')}"  # and speechkit-train-continual spells it
    check_strategy_options("sa", ["seed", "train_dir", "trainer.max_epochs", "pretrain_dir"])
    with pytest.raises(ValueError, match="finite ewc_lambda > 0, got nan"):
        EpisodePlan.create(["a", "b"], "ewc", 0, ewc_lambda=math.nan)
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        EpisodePlan(strategy="sa", order=["a"], seed=-1)
