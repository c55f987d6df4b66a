"""The step account (issue 39 §1): the total logged once, the breakdown adding up, checkpoints."""

from __future__ import annotations

import math

from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm
from rllib_ext.common.steps import StepAccount, log_all_used, steps_in_episodes


def _runners(metrics: MetricsLogger) -> dict:
    """The values under ``env_runners/`` as numbers."""
    return {key: metrics.peek((ENV_RUNNER_RESULTS, key)) for key in metrics.peek(ENV_RUNNER_RESULTS)}


def test_each_step_is_logged_once_and_the_breakdown_adds_up_to_the_total():
    account, metrics = StepAccount(), MetricsLogger()
    account.total, account.used, account.evaluation, account.wasted = 100, 60, 20, 5
    account.log(metrics)
    account.total += 50
    account.used += 60
    account.log(metrics)
    runners = _runners(metrics)
    assert runners[NUM_ENV_STEPS_SAMPLED_LIFETIME] == 150
    parts = [
        runners[k] for k in ("env_steps_used_lifetime", "env_steps_evaluation_lifetime", "env_steps_wasted_lifetime")
    ]
    assert parts == [120, 20, 5] and runners["env_steps_pending"] == 5 and sum(parts) + 5 == 150


def test_a_checkpoint_written_before_the_account_restores_its_total_as_used():
    """Before issue 39 a black-box checkpoint held only the used steps, in the restored metrics."""
    algo = object.__new__(BlackBoxAlgorithm)
    algo.steps, algo.metrics, algo.counters = StepAccount(), MetricsLogger(), {"episodes": 7}
    algo.metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), 500, reduce="lifetime_sum")
    algo.restore_steps({"counters": {}})  # no "steps"
    assert (algo.steps.total, algo.steps.used, algo.steps.logged, algo.steps.pending) == (500, 500, 500, 0)
    assert algo.counters["episodes_logged"] == 7
    algo.steps.total += 20
    algo.steps.used += 20
    algo.steps.log(algo.metrics)
    assert _runners(algo.metrics)[NUM_ENV_STEPS_SAMPLED_LIFETIME] == 520  # the 500 are not logged again


def test_rllib_runner_families_book_dropped_episodes_as_wasted_and_read_per_call_steps():
    metrics = MetricsLogger()
    metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), 300, reduce="lifetime_sum")
    metrics.log_value((ENV_RUNNER_RESULTS, "num_env_steps_dropped_lifetime"), 40, reduce="lifetime_sum")
    log_all_used(metrics, wasted=10, pending=25)
    runners = _runners(metrics)
    assert runners["env_steps_wasted_lifetime"] == 50 and runners["env_steps_pending"] == 25
    assert runners["env_steps_used_lifetime"] == 300 - 50 - 25
    assert steps_in_episodes({"num_env_steps_sampled": 30, "num_env_steps_dropped": 4}) == 26
    assert steps_in_episodes({"num_env_steps_sampled": 30, "num_env_steps_dropped": math.nan}) == 30  # none this call
