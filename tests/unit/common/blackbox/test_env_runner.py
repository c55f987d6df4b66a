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
    from rllib_ext.common.blackbox.samplers import make_sampler

    runner, config = make_runner(sampler="orthogonal", noise_stdev=0.05)
    theta = runner.module.get_flat()
    driver_eps = make_sampler("orthogonal", theta.size).sample(seed=11, n=6)
    for i in range(6):
        np.testing.assert_allclose(runner.perturbed_theta(11, 6, i), theta + 0.05 * driver_eps[i], rtol=0, atol=1e-6)


def call(jobs, payload_ref=None):
    from rllib_ext.common.blackbox import Call

    return Call(payload_ref=payload_ref, jobs=tuple(jobs))


def perturbation(job_id, index, version=0, n=2, seed=5, **kw):
    from rllib_ext.common.blackbox import PerturbationJob

    return PerturbationJob(id=job_id, version=version, seed=seed, n=n, index=index, **kw)


def test_run_jobs_returns_compact_typed_results_and_adopts_a_new_version():
    from rllib_ext.common.blackbox import EpisodeResult, Payload, Reply

    runner, _ = make_runner()
    theta = runner.module.get_flat()
    runner.adopt(4, Payload(theta=theta * 0.5))
    reply = runner.run_jobs(call([perturbation(0, 0, version=4), perturbation(1, 1, version=4)]))
    assert isinstance(reply, Reply) and all(type(r) is EpisodeResult for r in reply.results)
    assert [r.id for r in reply.results] == [0, 1] and [r.index for r in reply.results] == [0, 1]
    # A seed in, a scalar out: no vector travels back.
    assert not any(isinstance(getattr(r, f), np.ndarray) for r in reply.results for f in r.__slots__)
    assert all(r.version == 4 and not r.failed and 5 <= r.length <= 50 for r in reply.results)
    assert reply.steps == sum(r.length for r in reply.results) and reply.busy_s > 0
    assert reply.obs_delta.num_pushes_delta == reply.steps
    np.testing.assert_allclose(runner._theta, theta * 0.5)


def test_a_call_runs_exactly_the_version_it_carries(monkeypatch):
    """Credit: the runner evaluates the payload of the call's version, whatever it held before.

    A call re-sent after its runner died carries an older version than the runner now holds;
    the perturbation must be of that θ (``ray.get`` stands in for the object store).
    """
    import ray

    from rllib_ext.common.blackbox import Payload

    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref)
    runner, config = make_runner(noise_stdev=0.05)
    theta0 = runner.module.get_flat()
    theta1 = theta0 + 1.0
    runner.adopt(1, Payload(theta=theta1))
    reply = runner.run_jobs(call([perturbation(0, 1, version=0)], payload_ref=Payload(theta=theta0)))
    assert reply.results[0].version == 0 and runner.version == 0
    np.testing.assert_allclose(runner.fast_policy.theta, runner.perturbed_theta(5, 2, 1), atol=1e-6)
    assert np.abs(runner.fast_policy.theta - theta0).max() < 0.5  # θ_0 + σε, not θ_1 + σε
    # The next call of the newest version switches back.
    runner.run_jobs(call([perturbation(1, 0, version=1)], payload_ref=Payload(theta=theta1)))
    np.testing.assert_allclose(runner._theta, theta1)


def test_every_episode_of_a_job_counts():
    runner, _ = make_runner(env_config={"min_len": 5, "max_len": 50})
    runner.adopt(0, _payload(runner))
    (result,) = runner.run_jobs(call([perturbation(0, 0, episodes=4)])).results
    assert len(result.returns) == 4 and len(set(result.returns)) > 1  # four different episodes
    assert result.ret == pytest.approx(np.mean(result.returns))
    assert result.length == runner.num_env_steps_sampled_lifetime  # all four episodes' steps


def test_episodes_of_an_env_without_time_limit_stop_at_the_step_cap(caplog):
    """A policy that never reaches the goal of RLlib's SimpleCorridor (no time limit) must not hang a runner."""
    import logging

    from ray.rllib.examples.envs.classes.simple_corridor import SimpleCorridor

    from rllib_ext.common.blackbox.env_runner import DEFAULT_MAX_EPISODE_STEPS

    never_right = None
    for cap in (None, 50):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            runner, _ = make_runner(SimpleCorridor, {"corridor_length": 5}, max_episode_steps=cap)
        never_right = np.zeros_like(runner.module.get_flat())  # equal logits: argmax is "left", forever
        runner.adopt(0, _payload(runner, never_right))
        reply = runner.run_jobs(call([perturbation(0, 0, episodes=2, n=2, seed=5)]))
        (result,) = reply.results
        expected = DEFAULT_MAX_EPISODE_STEPS if cap is None else cap
        assert runner.step_cap == expected
        assert result.capped == 2 and result.length == 2 * expected and not result.failed
        assert ("has no time limit" in caplog.text) == (cap is None)  # logged when the default is used


def _payload(runner, theta=None):
    from rllib_ext.common.blackbox import Payload

    return Payload(theta=runner.module.get_flat() if theta is None else theta)


def test_a_failed_episode_is_counted_and_the_others_of_its_job_still_count():
    runner, _ = make_runner("rllib_ext/Faulty-v0", {"fault": "raise", "fault_prob": 0.5, "fault_step": 1})
    runner.adopt(0, _payload(runner))
    results = runner.run_jobs(call([perturbation(i, i % 2, episodes=3) for i in range(8)])).results
    partial = [r for r in results if 0 < r.episodes_failed < 3]
    assert partial, "no job had both failed and good episodes (fault_prob 0.5, 24 episodes)"
    for r in results:
        assert len(r.returns) + r.episodes_failed == 3
        assert r.failed == (not r.returns)
        if r.returns:
            assert r.ret == pytest.approx(np.mean(r.returns))


@pytest.mark.parametrize("fault", ["nan_obs", "inf_reward", "nan_reward", "raise"])
def test_faulty_episodes_are_reported_failed_never_as_returns(fault):
    runner, _ = make_runner("rllib_ext/Faulty-v0", {"fault": fault, "fault_prob": 1.0})
    runner.adopt(0, _payload(runner))
    (result,) = runner.run_jobs(call([perturbation(7, 0)])).results
    assert result.failed and np.isnan(result.ret) and result.error
    # The runner recovers: a fresh env, and healthy episodes afterwards.
    runner.config.env_config = {"fault": fault, "fault_prob": 0.0}
    runner.make_env()
    (result,) = runner.run_jobs(call([perturbation(8, 1)])).results
    assert not result.failed


def test_sample_returns_episodes_with_returns_and_lengths():
    runner, _ = make_runner(env_config={"min_len": 7, "max_len": 7})
    episodes = runner.sample(num_episodes=3, explore=False)
    assert [len(e) for e in episodes] == [7, 7, 7]
    assert all(0 <= e.get_return() <= 7 for e in episodes)


@pytest.mark.parametrize(
    "sampler, noise_table, dtype",
    [("antithetic", True, "float32"), ("antithetic", True, "float16"), ("gaussian", False, "float32")],
)
def test_a_job_runs_exactly_perturbed_theta_through_the_reused_buffer(sampler, noise_table, dtype):
    """The runner writes θ_u + σε into one buffer per job (no allocation): bit for bit perturbed_theta's."""
    from rllib_ext.common.blackbox import Payload
    from rllib_ext.common.blackbox.noise_table import make_noise

    runner, _ = make_runner(sampler=sampler, noise_stdev=0.05, noise_table=noise_table, noise_table_dtype=dtype)
    theta = runner.module.get_flat()
    runner.adopt(0, Payload(theta=theta, noise=make_noise(4096, 1, dtype) if noise_table else None))
    for index in range(4):
        job = perturbation(index, index, n=4, noise_offset=37 * (index // 2) if noise_table else None)
        runner.run_jobs(call([job]))
        expected = runner.perturbed_theta(5, 4, index, job.noise_offset)
        np.testing.assert_array_equal(runner.fast_policy.theta, expected)
        # The same numbers as θ_u + σ·ε with ε read whole (a table row or the sampler's row).
        d = theta.size
        eps = (
            runner._noise_table(d).row(job.noise_offset, index)
            if noise_table
            else runner._sampler(d).perturbation(5, 4, index)
        )
        np.testing.assert_array_equal(expected, runner._theta + np.float32(0.05) * eps)
        # The policy's views read the buffer as rewritten for this job: the actions of θ_i.
        obs = np.linspace(-1, 1, runner.env.observation_space.shape[0]).astype(np.float32)
        from rllib_ext.common.blackbox.fast_policy import NumpyPolicy

        fresh = NumpyPolicy(runner.module.policy)
        fresh.set_flat(expected.copy())
        np.testing.assert_array_equal(runner.fast_policy.forward(obs), fresh.forward(obs))


@pytest.mark.parametrize(
    "obs", [[0.0, 1.0], [np.nan, 0.0], [np.inf, 1.0], [-np.inf, 0.0], [1e30, 1e30], [3e38, -3e38], [1e-45, 0.0]]
)
def test_the_fast_observation_check_is_exact(obs):
    import gymnasium as gym

    from rllib_ext.common.blackbox.env_runner import all_finite, finite_check

    for dtype in (np.float32, np.float64):
        check = finite_check(gym.spaces.Box(-np.inf, np.inf, (2,), dtype))
        assert check is not all_finite
        for x in (np.array(obs, dtype=dtype), np.array(obs, dtype=dtype)[::-1].copy(), list(obs), np.array([obs])):
            expected = bool(np.isfinite(x).all())
            assert check(x) == all_finite(x) == expected
            with np.errstate(all="raise"):
                assert check(x) == expected
    assert finite_check(gym.spaces.Box(0, 1, (2, 2))) is all_finite
    assert finite_check(gym.spaces.Discrete(3)) is all_finite
