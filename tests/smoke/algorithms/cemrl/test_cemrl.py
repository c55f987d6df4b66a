"""CEMRL_EXT (paper 001's baseline) on Ray: generations in both modes, checkpoint round trip."""

import numpy as np
import pytest
import ray

from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig
from tests.builders import TINY_ERL


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_cemrl_generations(ray_session, tmp_path, mode):
    cfg = (
        CEMRLConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=2)
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
        assert not np.array_equal(algo.mu, mu0) and np.isfinite(algo.mu).all()
        if mode == "parallel":  # checkpoint round trip (once: the same code path in both modes)
            path = algo.save_to_path(str(tmp_path / "ckpt"))
            cem, counters = algo.cem.get_state(), dict(algo.counters)
            critic = ray.get(algo.critic.get_state.remote())
    finally:
        algo.stop()
    if mode == "parallel":
        restored = type(algo).from_checkpoint(path)
        try:
            state = restored.cem.get_state()
            assert np.array_equal(state["mu"], cem["mu"]) and np.array_equal(state["var"], cem["var"])
            assert state["damp"] == cem["damp"] and state["generation"] == 2
            assert restored.prev_generation_steps == 800 and restored.counters["n_rl"] == counters["n_rl"]
            got = ray.get(restored.critic.get_state.remote())
            assert all(np.array_equal(got["critic"][k], v) for k, v in critic["critic"].items())
            restored.train()
            assert restored.cem.generation == 3
        finally:
            restored.stop()
