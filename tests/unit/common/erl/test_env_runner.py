"""The ERL env runner (common/erl/env_runner.py) in this process, without Ray: f(z) and f(μ) are measured alike."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.blackbox.protocol import EvaluationJob, IndividualJob
from rllib_ext.common.erl.config import ERLConfig
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.protocol import ERLPayload
from tests.builders import small_aesrl_config


def noise_of_each_job(action_noise):
    """The action noise the runner applied to an individual's episode and to μ's episodes."""
    runner = ERLEnvRunner(config=small_aesrl_config(initial_steps=0, action_noise=action_noise))
    try:
        mu = runner.module.get_flat()
        runner.adopt(0, ERLPayload(theta=mu, var=np.full_like(mu, 1e-2), replay=None))
        seen, evaluate = [], runner.evaluate

        def recording_evaluate(job, explore):
            seen.append((type(job).__name__, runner.exploration.noise))
            return evaluate(job, explore=explore)

        runner.evaluate = recording_evaluate
        es = runner.run_job(IndividualJob(id=0, version=0, seed=3))
        mean = runner.run_job(EvaluationJob(id=1, version=0, episodes=2))
        assert np.isfinite(es.ret) and np.isfinite(mean.ret) and len(mean.returns) == 2
        assert runner.exploration.noise == 0.0  # reset after each job
        return dict(seen)
    finally:
        runner.stop()


@pytest.mark.parametrize("action_noise", [0.0, 0.1])
def test_individuals_and_the_mean_are_evaluated_with_the_same_action_noise(action_noise):
    """f(z) − f(μ) compares like with like (review S4: individuals had 0.1, μ none)."""
    assert noise_of_each_job(action_noise) == {"IndividualJob": action_noise, "EvaluationJob": action_noise}


def test_the_default_is_the_reference_codes_noise_free_evaluation():
    """aes-rl and apourchot/CEM-RL evaluate individuals (and μ) without action noise; App. C.2's 0.1 is a setting."""
    assert ERLConfig().action_noise == 0.0
