"""The lean black-box env runner, used locally (no actor): the low-bandwidth protocol and failures."""

from __future__ import annotations

import numpy as np
import pytest


def make_runner(env="rllib_ext/VariableLength-v0", env_config=None, **training):
    import rllib_ext  # noqa: F401 - registers the envs
    from rllib_ext import ESConfig
    from rllib_ext.common.blackbox import BlackBoxEnvRunner

    config = ESConfig().environment(env, env_config=env_config or {}).training(policy_hiddens=[8], **training)
    config.debugging(seed=3)
    return BlackBoxEnvRunner(config=config, worker_index=1), config


def test_runner_regenerates_the_drivers_perturbation_from_ids_only():
    from rllib_ext.common.samplers import make_sampler

    runner, config = make_runner(sampler="orthogonal", noise_stdev=0.05)
    theta = runner.module.get_flat()
    driver_eps = make_sampler("orthogonal", theta.size).sample(seed=11, n=6)
    for i in range(6):
        np.testing.assert_allclose(runner.perturbed_theta(11, 6, i), theta + 0.05 * driver_eps[i], rtol=0, atol=1e-6)


def test_run_jobs_returns_compact_results_and_adopts_a_new_version():
    import ray

    runner, _ = make_runner()
    theta = runner.module.get_flat()
    payload = ray.put((theta * 0.5, None)) if ray.is_initialized() else None
    runner.publish(4, (theta * 0.5, None))
    out = runner.run_jobs(
        4, [payload], [{"id": 0, "seed": 5, "n": 2, "index": 0}, {"id": 1, "seed": 5, "n": 2, "index": 1}]
    )
    assert [r["id"] for r in out["results"]] == [0, 1]
    assert set(out["results"][0]) == {
        "id",
        "seed",
        "n",
        "index",
        "return",
        "length",
        "u",
        "failed",
        "error",
        "duration_s",
    }
    assert all(r["u"] == 4 and not r["failed"] and 5 <= r["length"] <= 50 for r in out["results"])
    assert out["steps"] == sum(r["length"] for r in out["results"]) and out["busy_s"] > 0
    assert out["obs_delta"].num_pushes_delta == out["steps"]
    np.testing.assert_allclose(runner._theta, theta * 0.5)


@pytest.mark.parametrize("fault", ["nan_obs", "inf_reward", "nan_reward", "raise"])
def test_faulty_episodes_are_reported_failed_never_as_returns(fault):
    runner, _ = make_runner("rllib_ext/Faulty-v0", {"fault": fault, "fault_prob": 1.0})
    runner.publish(0, (runner.module.get_flat(), None))
    out = runner.run_jobs(0, [None], [{"id": 7, "seed": 1, "n": 2, "index": 0}])
    (result,) = out["results"]
    assert result["failed"] and np.isnan(result["return"]) and result["error"]
    # The runner recovers: a fresh env, and healthy episodes afterwards.
    runner.config.env_config = {"fault": fault, "fault_prob": 0.0}
    runner.make_env()
    out = runner.run_jobs(0, [None], [{"id": 8, "seed": 1, "n": 2, "index": 1}])
    assert not out["results"][0]["failed"]


def test_sample_returns_episodes_with_returns_and_lengths():
    runner, _ = make_runner(env_config={"min_len": 7, "max_len": 7})
    episodes = runner.sample(num_episodes=3, explore=False)
    assert [len(e) for e in episodes] == [7, 7, 7]
    assert all(0 <= e.get_return() <= 7 for e in episodes)
