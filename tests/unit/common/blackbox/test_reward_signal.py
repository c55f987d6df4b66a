"""The one reward DSGD compares in the black-box family: R̄, a running mean of evaluation returns."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from rllib_ext import DFDConfig, ESConfig
from rllib_ext.common.blackbox import BlackBoxAlgorithm


def observed(returns, a, start=None):
    algo = SimpleNamespace(config=SimpleNamespace(eval_return_ema=a), eval_return_ema=start)
    BlackBoxAlgorithm.observe_evaluations(algo, returns)
    return algo.eval_return_ema


def test_evaluation_returns_enter_an_exponential_running_mean_in_arrival_order():
    assert observed([], 0.9) is None  # nothing evaluated yet: DSGD gets no reward
    assert observed([10.0], 0.9) == 10.0  # the first return starts R̄
    assert observed([10.0, 20.0], 0.9) == pytest.approx(0.9 * 10 + 0.1 * 20)
    assert observed([20.0, 10.0], 0.9) == pytest.approx(0.9 * 20 + 0.1 * 10)  # order matters
    assert observed([4.0], 0.5, start=2.0) == pytest.approx(3.0)  # continues a restored R̄
    assert observed([5.0, math.nan, 7.0], 0.0) == 7.0  # a = 0: the newest return; NaN skipped


@pytest.mark.parametrize("config_cls", [ESConfig, DFDConfig])
def test_dsgd_without_evaluation_episodes_is_rejected_before_actors_start(config_cls):
    config = config_cls().environment("CartPole-v1").training(optimizer="dsgd")
    with pytest.raises(ValueError, match="set eval_episodes >= 1"):
        config.validate()
    config_cls().environment("CartPole-v1").training(optimizer="dsgd", eval_episodes=1).validate()


def test_eval_return_ema_must_be_in_the_unit_interval():
    with pytest.raises(ValueError, match=r"eval_return_ema must be a number in \[0, 1\)"):
        ESConfig().environment("CartPole-v1").training(eval_return_ema=1.0).validate()


def test_erl_configs_are_not_held_to_it_their_optimizer_trains_td3():
    from rllib_ext import CEMRLConfig

    CEMRLConfig().environment("Pendulum-v1").training(optimizer="dsgd").validate()  # eval_episodes 0
