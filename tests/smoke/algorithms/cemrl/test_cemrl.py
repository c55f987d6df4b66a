"""CEMRL_EXT (paper 001's baseline) on Ray: generations in both modes.

The checkpoint round trip (μ, σ², the CEM state, the critic, the previous generation's steps, the
counters; then one more generation) is ``tests/reliability/test_resume.py``'s CEMRL_EXT case."""

import numpy as np
import pytest

from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig
from tests.builders import TINY_ERL


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_cemrl_generations(ray_session, mode):
    cfg = (
        CEMRLConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=1 if mode == "serial" else 2)  # a process start saved where it adds nothing
        .training(mode=mode, population_size=4, rl_population=2, **TINY_ERL)
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=0)
    )
    algo = cfg.build_algo()
    try:
        mu0 = algo.mu.copy()
        for _ in range(2):
            result = algo.train()
        bb = result["blackbox"]
        assert bb["n_rl_lifetime"] == 2 and bb["n_es_lifetime"] == 6  # RL from generation 2 (after 800 > 400 steps)
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] == 2 * 4 * 200
        assert bb["critic_steps_lifetime"] > 0 and algo.cem.generation == 2
        # The two RL individuals' actor training on their runners: 20 steps each (rl_actor_steps), timed.
        assert bb["rl_actor_steps_lifetime"] == 2 * 20 and bb["rl_train_s_lifetime"] > 0
        assert np.isfinite(bb["rl_actor_loss"]) and bb["rl_train_s"] > 0
        assert not np.array_equal(algo.mu, mu0) and np.isfinite(algo.mu).all()
    finally:
        algo.stop()
