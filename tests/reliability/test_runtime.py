"""Run-time faults (issue 9), for every registered algorithm: a faulty env, a killed env runner,
non-finite learner weights.

One build per algorithm (module-scoped, 2 env runners, on ``rllib_ext/Faulty-v0``) serves the
three checks in order: train with env faults (NaN/inf observations or rewards, an env that
raises; the kind rotates over the algorithms), then kill an env runner and train on, then put
NaN into the learner's weights and see the next iteration fail loudly without publishing them.
The shared env-runner guard is also checked on its own, without actors.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import ray
import torch
from ray.rllib.env.multi_agent_env import make_multi_agent

from rllib_ext.common.guards import (
    FiniteMultiAgentEnvRunner,
    FiniteSingleAgentEnvRunner,
    assert_finite_learner_parameters,
)
from rllib_ext.envs import FaultyEnv
from tests.reliability.helpers import EPISODE_LENGTHS, FAULTY_ENV, NAMES, runner_weights_finite, small_config

FAULT_PROB = 0.3


def failed_episode_count(result) -> float:
    """Env-step failures (RLlib's SingleAgentEnvRunner) plus failed episodes (black-box runners)."""
    env_runners = result.get("env_runners", {}) or {}
    blackbox = result.get("blackbox", {}) or {}
    return float(env_runners.get("num_env_step_failures", 0) or 0) + float(
        blackbox.get("episodes_failed_lifetime", 0) or 0
    )


@pytest.fixture(scope="module", params=NAMES)
def faulty_run(request, ray_session):
    """{name, fault, algo}: an algorithm with 2 env runners on Faulty-v0."""
    name = request.param
    fault = FaultyEnv.FAULTS[NAMES.index(name) % len(FaultyEnv.FAULTS)]
    config = small_config(
        name, env=FAULTY_ENV, env_config={"fault": fault, "fault_prob": FAULT_PROB, "fault_step": 2}, num_env_runners=2
    )
    algo = config.build_algo()
    run = {"name": name, "fault": fault, "algo": algo}
    yield run
    algo.stop()


# ------------------------------------------------------------------------------------------
# 3. NaN/inf/raise from the env: logged, counted, skipped; training goes on with finite weights.
# ------------------------------------------------------------------------------------------
def test_env_faults_are_counted_and_skipped_weights_stay_finite(faulty_run):
    algo = faulty_run["algo"]
    results = [algo.train() for _ in range(2)]
    # An algorithm whose first iterations are short (AES-RL's first one mostly waits for actors)
    # may not have met a faulty episode yet: a few more, bounded.
    while failed_episode_count(results[-1]) == 0 and len(results) < 6:
        results.append(algo.train())
    last = results[-1]
    assert last["training_iteration"] == len(results)
    assert results[-1]["num_env_steps_sampled_lifetime"] > results[0]["num_env_steps_sampled_lifetime"] > 0
    assert failed_episode_count(last) > 0, f"{faulty_run['fault']}: no failed episode counted"
    assert_finite_learner_parameters(algo)  # raises if not
    assert runner_weights_finite(algo)
    ret = (last.get("env_runners", {}) or {}).get("episode_return_mean")
    assert ret is None or math.isfinite(ret)


# ------------------------------------------------------------------------------------------
# 5. Worker loss: one env runner killed in the middle of training.
# ------------------------------------------------------------------------------------------
def test_killed_env_runner_training_continues_and_loss_is_recorded(faulty_run):
    algo = faulty_run["algo"]
    group = algo.env_runner_group
    before = algo.train()
    victim = group.healthy_worker_ids()[0]
    original_step = algo.training_step
    calls = {"n": 0}

    def training_step_with_kill():
        calls["n"] += 1
        if calls["n"] == 1:  # inside the iteration, with sampling calls (possibly) in flight
            ray.kill(group._worker_manager._actors[victim], no_restart=False)
        return original_step()

    def recorded(result):
        fault_tolerance = result.get("fault_tolerance", {})
        lost_calls = (result.get("blackbox", {}) or {}).get("runner_calls_lost_lifetime", 0)
        return (
            fault_tolerance.get("num_remote_worker_restarts", 0) >= 1
            or fault_tolerance.get("num_healthy_workers", 2) < 2
            or lost_calls >= 1
        )

    algo.training_step = training_step_with_kill
    try:
        # The actor dies asynchronously; a fast algorithm may finish an update on the other
        # runner before the death shows. Train until it is recorded (a few iterations).
        results = [algo.train()]
        deadline = time.time() + 60
        while not recorded(results[-1]) and time.time() < deadline:
            results.append(algo.train())
    finally:
        del algo.training_step
    last = results[-1]
    assert recorded(last), (last.get("fault_tolerance"), last.get("blackbox"))
    assert last["training_iteration"] == before["training_iteration"] + len(results)
    assert last["num_env_steps_sampled_lifetime"] > before["num_env_steps_sampled_lifetime"]
    last = algo.train()  # and training goes on after the loss
    assert last["num_env_steps_sampled_lifetime"] > results[-1]["num_env_steps_sampled_lifetime"] or (
        last.get("blackbox", {}).get("update_index", 0) > results[-1].get("blackbox", {}).get("update_index", 0)
    )
    assert_finite_learner_parameters(algo)


# ------------------------------------------------------------------------------------------
# 2. Non-finite weights fail the next iteration loudly and are never published.
# ------------------------------------------------------------------------------------------
def _poison_first_parameter(learner):
    for module_id in learner.module.keys():
        param = next(learner.module[module_id].parameters())
        with torch.no_grad():
            param.fill_(float("nan"))
    return True


def test_nan_weights_fail_the_next_iteration_and_are_not_published(faulty_run):
    algo = faulty_run["algo"]
    assert runner_weights_finite(algo)
    assert all(r.get() for r in algo.learner_group.foreach_learner(_poison_first_parameter))
    try:
        algo.train()
    except FloatingPointError as e:
        message = str(e)
        assert faulty_run["name"] in message and "default_policy" in message, message
    else:
        # The algorithm's own recovery: its learner only mirrors a state kept elsewhere (the
        # ERL family writes the population mean μ into it each update) and was rewritten.
        assert_finite_learner_parameters(algo, "after an iteration that did not fail")
    assert runner_weights_finite(algo), "NaN weights reached the env runners"


# ------------------------------------------------------------------------------------------
# The env-runner guard itself (no actors): each fault kind, and an env that always fails.
# ------------------------------------------------------------------------------------------
def local_runner(fault, fault_prob, seed=0):
    from rllib_ext import IMPACTConfig

    config = (
        IMPACTConfig()
        .environment(FAULTY_ENV, env_config={**EPISODE_LENGTHS, "fault": fault, "fault_prob": fault_prob})
        .env_runners(num_env_runners=0)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .debugging(seed=seed)
    )
    assert config.env_runner_cls is FiniteSingleAgentEnvRunner and config.restart_failed_sub_environments
    return FiniteSingleAgentEnvRunner(config=config)


@pytest.mark.parametrize("fault", FaultyEnv.FAULTS)
def test_runner_drops_faulty_episodes_and_counts_them(ray_session, fault):
    runner = local_runner(fault, fault_prob=0.5)
    # Episodes, not timesteps: RLlib restarts a sample(num_timesteps=T) count after each failed
    # step, so T must stay well below the steps between faults (rollout_fragment_length is).
    episodes = runner.sample(num_episodes=20, random_actions=True)
    assert len([e for e in episodes if e.is_done]) == 20
    for episode in episodes:
        assert np.isfinite(np.asarray(episode.get_observations(), dtype=np.float64)).all()
        assert np.isfinite(np.asarray(episode.get_rewards(), dtype=np.float64)).all()
    assert runner.get_metrics()["num_env_step_failures"] > 0
    runner.stop()


def test_seeded_runner_does_not_replay_a_failing_episode_forever(ray_session):
    """RLlib re-seeds a recreated env with the runner's seed: the first episode would repeat."""
    for seed in range(6):  # about half of these seeds start with a failing episode
        runner = local_runner("raise", fault_prob=0.5, seed=seed)
        assert len(runner.sample(num_episodes=5, random_actions=True)) == 5
        runner.stop()


class MultiAgentFaulty(make_multi_agent(lambda config: FaultyEnv(**config))):
    """Two FaultyEnv agents in one MultiAgentEnv: a fault of either agent is the env's fault."""


def local_multi_agent_runner(fault, fault_prob):
    from rllib_ext import IMPACTConfig

    env_config = {**EPISODE_LENGTHS, "fault": fault, "fault_prob": fault_prob, "num_agents": 2}
    config = (
        IMPACTConfig()
        .environment(MultiAgentFaulty, env_config=env_config)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}")
        .env_runners(num_env_runners=0)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .debugging(seed=0)
    )
    config.validate()
    assert config.env_runner_cls is FiniteMultiAgentEnvRunner and config.restart_failed_sub_environments
    return FiniteMultiAgentEnvRunner(config=config)


@pytest.mark.parametrize("fault", ["nan_obs", "inf_reward"])
def test_multi_agent_runner_drops_faulty_episodes_and_counts_them(ray_session, fault):
    """Several policies (IMPACT_EXT on RLlib's MultiAgentEnvRunner) get the same guard."""
    runner = local_multi_agent_runner(fault, fault_prob=0.5)
    episodes = runner.sample(num_episodes=10, random_actions=True)
    assert len([e for e in episodes if e.is_done]) >= 10
    for episode in episodes:
        for agent_episode in episode.agent_episodes.values():
            assert np.isfinite(np.asarray(agent_episode.get_observations(), dtype=np.float64)).all()
            assert np.isfinite(np.asarray(agent_episode.get_rewards(), dtype=np.float64)).all()
    assert runner.get_metrics()["num_env_step_failures"] > 0
    runner.stop()


@pytest.mark.parametrize("build", [local_runner, local_multi_agent_runner], ids=["single_agent", "multi_agent"])
def test_env_that_always_fails_is_one_clear_error_not_a_hang(ray_session, build):
    runner = build("nan_reward", fault_prob=1.0)
    with pytest.raises(RuntimeError, match="env keeps failing"):
        runner.sample(num_episodes=1, random_actions=True)
    runner.stop()
