"""ES_EXT under faults: a killed runner mid-batch, faulty envs, an env that always fails, a wrong action space."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from tests.builders import small_es_config


def test_wrong_action_space_is_a_clear_error(ray_session):
    config = small_es_config(env="CartPole-v1", env_config={}, policy_head="gaussian_2a")
    with pytest.raises(Exception, match="needs a Box action space"):
        config.build_algo()


def test_killed_runner_mid_batch_batch_completes_and_loss_is_counted(ray_session):
    config = small_es_config(
        runners=2,
        episodes_per_batch=16,
        perturbations_per_call=1,
        env_config={"min_len": 20, "max_len": 20, "step_sleep_s": 0.002},
    )
    algo = config.build_algo()
    try:
        algo.train()
        victim = algo.pool.healthy_runner_ids()[0]
        # Queue a batch, let calls start on both runners, then kill one of them.
        seed = algo.next_batch_seed()
        algo.submit_perturbations(seed, 16)
        algo.pool.pump()
        assert algo.pool._in_flight[victim]
        ray.kill(algo.env_runner_group._worker_manager._actors[victim], no_restart=False)
        got = {}
        for _ in range(2000):
            ok, _ = algo.collect(timeout_s=0.05)
            got.update({r.index: r for r in ok if r.index is not None and r.job.seed == seed})
            if len(got) == 16:
                break
        assert sorted(got) == list(range(16))  # every perturbation evaluated, on the survivor
        assert algo.pool.num_calls_lost >= 1 and algo.pool.num_jobs_requeued >= 1
        result = algo.train()  # RLlib restarts the runner; training goes on
        assert result["blackbox"]["runner_calls_lost_lifetime"] >= 1
        assert result["blackbox"]["update_index"] == 2
    finally:
        algo.stop()


def test_faulty_env_episodes_are_counted_and_skipped_not_learned_from(ray_session):
    config = small_es_config(env="rllib_ext/Faulty-v0", env_config={"fault": "nan_obs", "fault_prob": 0.3})
    algo = config.build_algo()
    try:
        for _ in range(3):
            result = algo.train()
        assert result["blackbox"]["episodes_failed_lifetime"] > 0
        assert np.all(np.isfinite(algo.theta))
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
    finally:
        algo.stop()


def test_env_that_always_fails_stops_with_a_clear_error(ray_session):
    algo = small_es_config(env="rllib_ext/Faulty-v0", env_config={"fault": "raise", "fault_prob": 1.0}).build_algo()
    try:
        with pytest.raises(Exception, match="env keeps failing"):
            algo.train()
    finally:
        algo.stop()
