"""ES_EXT on Ray: 2 iterations, checkpoint round trip (θ, obs filter, DSGD state), evaluate."""

from __future__ import annotations

import numpy as np

from rllib_ext import cli
from tests.builders import small_es_config


def test_smoke_checkpoint_round_trip_and_evaluate(ray_session, tmp_path, capsys):
    algo = small_es_config(optimizer="dsgd", eval_episodes=2).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        assert result["blackbox"]["update_index"] == 2
        assert result["num_env_steps_sampled_lifetime"] >= 2 * 8 * 5
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
        ckpt = str(tmp_path / "ckpt")
        algo.save_to_path(ckpt)
        theta, u = algo.theta.copy(), algo.update_index
        filter_state = algo.obs_filter.get_state()
        opt_state = algo._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict())
    finally:
        algo.stop()

    restored = small_es_config(optimizer="dsgd", eval_episodes=2).build_algo()
    try:
        restored.restore_from_path(ckpt)
        np.testing.assert_array_equal(restored.theta, theta)
        assert restored.update_index == u
        assert restored.obs_filter.stats.n == filter_state["stats"]["num_pushes"] > 0
        np.testing.assert_array_equal(restored.obs_filter.stats.mean, algo.obs_filter.stats.mean)
        opt_restored = restored._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict())
        assert opt_restored["dsgd"] == opt_state["dsgd"]  # η_u, reward window and u of DSGD
        assert restored.train()["blackbox"]["update_index"] == u + 1  # continues, not restarts
    finally:
        restored.stop()

    assert cli.main(["evaluate", ckpt, "--episodes", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "mean return" in out and out.count("episode ") >= 3


def test_an_env_without_time_limit_does_not_hang_a_runner(ray_session):
    """Issue 22's repro: ES_EXT on RLlib's SimpleCorridor (no time limit) with policies that never
    reach the goal. Episodes stop at the step cap, are counted as truncated, and training goes on."""
    from ray.rllib.examples.envs.classes.simple_corridor import SimpleCorridor

    from rllib_ext import ESConfig

    config = (
        ESConfig()
        .environment(SimpleCorridor, env_config={"corridor_length": 500})  # out of reach in 300 steps
        .env_runners(num_env_runners=1)
        .training(episodes_per_batch=4, policy_hiddens=[4], max_episode_steps=300, observation_filter=False)
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        blackbox = result["blackbox"]
        assert blackbox["update_index"] == 1
        assert blackbox["episodes_capped_lifetime"] == 4
        assert result["env_runners"]["episode_len_mean"] == 300
    finally:
        algo.stop()
