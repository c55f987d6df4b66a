"""The ERL env runner (common/erl/env_runner.py) in this process, without Ray: f(z) and f(μ) are measured alike."""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest

from rllib_ext.common import waits
from rllib_ext.common.blackbox.protocol import EvaluationJob, IndividualJob
from rllib_ext.common.erl import env_runner
from rllib_ext.common.erl.config import ERLConfig
from rllib_ext.common.erl.critic_worker import make_td3_updater
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.protocol import ERLPayload
from rllib_ext.common.offpolicy.transitions import TransitionBuffer
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


def _local_replay(seed):
    """A TransitionBuffer (Pendulum-sized) behind the ``sample.remote`` call an RL individual makes."""
    rng = np.random.default_rng(0)
    buf = TransitionBuffer(500, 3, 1, seed)
    buf.add(
        rng.normal(size=(500, 3)),
        rng.uniform(-1, 1, (500, 1)),
        rng.normal(size=500),
        rng.normal(size=(500, 3)),
        np.zeros(500, bool),
    )
    return types.SimpleNamespace(sample=types.SimpleNamespace(remote=buf.sample))


def test_an_rl_individual_trained_on_a_copy_of_the_policy_equals_one_trained_in_place(monkeypatch):
    """The runner-GPU path (num_gpus_per_env_runner > 0) trains a device copy of the module's policy
    and copies it back; run on the CPU here, it takes exactly the in-place path's steps and loss."""
    monkeypatch.setattr(waits.ray, "get", lambda ref, timeout=None: ref)  # replay calls answer at once
    runner = ERLEnvRunner(config=small_aesrl_config(initial_steps=0, rl_batch_size=16, replay_sample_chunk=7))
    try:
        assert runner.train_device.type == "cpu"
        z = runner.module.get_flat() + 0.05
        critic = {k: v.numpy() + 0.01 for k, v in runner._td3().critic.state_dict().items()}
        trained = {}
        for path in ("in place", "copy"):
            if path == "copy":
                runner._updater = make_td3_updater(
                    3, runner.env.action_space, runner.config.td3_settings, actor=copy.deepcopy(runner.module.policy)
                )
            runner._replay = _local_replay(seed=4)
            loss = runner.train_actor(z, critic, steps=20)  # chunks of 7, 7, 6
            trained[path] = (runner.module.get_flat(), loss, runner._updater.num_actor_steps)
        assert runner._updater.actor is not runner.module.policy
        np.testing.assert_array_equal(trained["in place"][0], trained["copy"][0])
        assert not np.array_equal(trained["copy"][0], z) and trained["copy"][2] == 20
        assert trained["in place"][1] == pytest.approx(trained["copy"][1], rel=1e-6) and np.isfinite(trained["copy"][1])
    finally:
        runner.stop()


def test_a_runner_asked_for_a_gpu_it_does_not_see_says_so(monkeypatch):
    monkeypatch.setattr(env_runner.torch.cuda, "is_available", lambda: False)
    config = small_aesrl_config().env_runners(num_gpus_per_env_runner=0.25)
    with pytest.raises(ValueError, match="num_gpus_per_env_runner=0.25 but this env runner's process sees no CUDA"):
        env_runner.train_device(config, remote=True)
    assert env_runner.train_device(config, remote=False).type == "cpu"  # the driver's local runner trains nothing
    assert env_runner.train_device(small_aesrl_config()).type == "cpu"
