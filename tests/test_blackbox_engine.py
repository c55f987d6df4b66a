"""The black-box engine: observation filter, policies, lean env runner, async pool."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.common.obs_filter import ObservationFilter, running_stat_from_batch
from rllib_ext.common.policies import MLPPolicy

# ------------------------------------------------------------------------------------------
# Observation filter (paper 000 App. A.2).
# ------------------------------------------------------------------------------------------


def test_merged_runner_deltas_equal_statistics_of_all_observations():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=(int(rng.integers(1, 50)), 4)) for _ in range(7)]
    driver = ObservationFilter((4,), clip=5.0)
    runners = [ObservationFilter((4,), clip=5.0) for _ in range(3)]
    for i, chunk in enumerate(chunks):
        runner = runners[i % 3]
        for obs in chunk:
            runner(obs)
        driver.merge(runner.pop_delta())
    every = np.concatenate(chunks)
    assert driver.stats.n == len(every)
    np.testing.assert_allclose(driver.stats.mean, every.mean(0), rtol=1e-6)  # float32 observations
    np.testing.assert_allclose(driver.stats.var, every.var(0, ddof=1), rtol=1e-5)
    assert runners[0].pop_delta() is None  # deltas are handed over once


def test_filter_standardizes_with_frozen_stats_and_clips():
    f = ObservationFilter((2,), clip=5.0)
    f.merge(running_stat_from_batch(np.array([[0.0, 10.0], [2.0, 10.0], [4.0, 10.0]])))
    out = f(np.array([2.0, 10.0], np.float32))
    np.testing.assert_allclose(out, [0.0, 0.0], atol=1e-6)  # mean 2, std 2; zero std is floored
    assert f(np.array([1000.0, 10.0]))[0] == 5.0
    assert f(np.array([-1000.0, 10.0]))[0] == -5.0
    g = ObservationFilter((2,), clip=5.0)
    g.set_state(f.get_state())
    np.testing.assert_array_equal(g(np.array([3.0, 10.0]), record=False), f(np.array([3.0, 10.0]), record=False))


def test_disabled_filter_is_identity():
    f = ObservationFilter((3,), enabled=False)
    x = np.array([1.0, -7.0, 100.0], np.float32)
    np.testing.assert_array_equal(f(x), x)
    assert f.pop_delta() is None


# ------------------------------------------------------------------------------------------
# Policies.
# ------------------------------------------------------------------------------------------


def test_gaussian_2a_head_maps_variance_onto_unit_interval():
    space = gym.spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float32)
    policy = MLPPolicy(5, space, hiddens=(8,), head="gaussian_2a")
    obs = torch.randn(100, 5) * 10
    dist = policy.distribution(obs)
    variance_unit = (dist.stddev / 2.0) ** 2  # half-range 2: std in env units = 2·sqrt(var)
    assert torch.all(variance_unit <= 1.0 + 1e-6) and torch.all(variance_unit >= 0.0)
    t = torch.tanh(policy.net(obs))
    np.testing.assert_allclose(variance_unit.detach(), ((t[:, 3:] + 1) / 2).detach(), rtol=1e-4, atol=1e-6)
    a = policy.act(np.ones(5, np.float32), explore=True)
    assert a.shape == (3,) and np.all(np.abs(a) <= 2.0)


def test_deterministic_box_action_in_bounds_and_discrete_argmax():
    box = gym.spaces.Box(np.array([0.0, -1.0]), np.array([4.0, 1.0]), dtype=np.float32)
    policy = MLPPolicy(3, box, hiddens=(4,))
    for _ in range(20):
        a = policy.act(np.random.randn(3).astype(np.float32) * 100)
        assert 0.0 <= a[0] <= 4.0 and -1.0 <= a[1] <= 1.0
    disc = MLPPolicy(3, gym.spaces.Discrete(4), hiddens=(4,))
    obs = np.random.randn(3).astype(np.float32)
    assert disc.act(obs) == int(torch.argmax(disc.net(torch.from_numpy(obs))))


def test_flat_parameters_round_trip():
    policy = MLPPolicy(4, gym.spaces.Discrete(2), hiddens=(8, 8))
    theta = np.random.default_rng(1).normal(size=policy.num_params).astype(np.float32)
    policy.set_flat(theta)
    np.testing.assert_array_equal(policy.get_flat(), theta)


@pytest.mark.parametrize(
    "space,head,match",
    [
        (gym.spaces.Discrete(2), "gaussian_2a", "needs a Box"),
        (gym.spaces.Box(-1, 1, shape=(2, 2)), "deterministic", "1-d Box"),
        (gym.spaces.Discrete(2), "nope", "unknown policy head"),
    ],
)
def test_unsupported_policy_specs_are_clear_errors(space, head, match):
    with pytest.raises(ValueError, match=match):
        MLPPolicy(3, space, head=head)


# ------------------------------------------------------------------------------------------
# The lean env runner, used locally (no actor): low-bandwidth protocol and failures.
# ------------------------------------------------------------------------------------------


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
    out = runner.run_jobs(4, [payload], [{"id": 0, "seed": 5, "n": 2, "index": 0}, {"id": 1, "seed": 5, "n": 2, "index": 1}])
    assert [r["id"] for r in out["results"]] == [0, 1]
    assert set(out["results"][0]) == {"id", "seed", "n", "index", "return", "length", "u", "failed", "error", "duration_s"}
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
