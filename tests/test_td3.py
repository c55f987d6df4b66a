"""TD3_EXT: defaults, validate(), the module's exploration, 2 iterations, checkpoint round trip.

The TD3 update itself (smoothing, clipped double Q, delays, soft updates) is tested on hand-made
batches in test_td3_blocks.py; the Pendulum-v1 learning test is tuned_examples/td3_ext/.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext import cli
from rllib_ext.algorithms.td3.td3 import TD3, TD3Config
from rllib_ext.algorithms.td3.td3_rl_module import TD3TorchRLModule


def test_paper_defaults():
    c = TD3Config()
    assert (c.actor_lr, c.critic_lr, c.tau, c.gamma, c.train_batch_size_per_learner) == (1e-3, 1e-3, 0.005, 0.99, 100)
    assert (c.policy_noise, c.noise_clip, c.policy_delay, c.action_noise) == (0.2, 0.5, 2, 0.1)
    assert (c.initial_steps, c.replay_capacity, c.updates_per_env_step) == (10_000, 1_000_000, 1.0)
    assert c.checkpoint_replay is False and c.normalize_actions is False
    assert c.model_config["fcnet_hiddens"] == [400, 300] and c.model_config["action_noise"] == 0.1
    assert TD3Config().rl_module(model_config={"fcnet_hiddens": [64]}).model_config["fcnet_hiddens"] == [64]


@pytest.mark.parametrize(
    "settings,match",
    [
        ({"actor_lr": 0.0}, "actor_lr"),
        ({"critic_lr": -1e-3}, "critic_lr"),
        ({"tau": 0.0}, "tau"),
        ({"tau": 1.5}, "tau"),
        ({"gamma": 1.5}, "gamma"),
        ({"policy_delay": 0}, "policy_delay"),
        ({"policy_delay": 1.5}, "policy_delay"),
        ({"policy_noise": -0.1}, "policy_noise"),
        ({"noise_clip": -0.5}, "noise_clip"),
        ({"action_noise": -0.1}, "action_noise"),
        ({"initial_steps": -1}, "initial_steps"),
        ({"replay_capacity": 50}, "replay_capacity"),
        ({"updates_per_env_step": 0}, "updates_per_env_step"),
        ({"checkpoint_replay": "yes"}, "checkpoint_replay"),
        ({"actor_lr": float("nan")}, "actor_lr"),
    ],
)
def test_validate_rejects_bad_settings(settings, match):
    with pytest.raises(ValueError, match=match):
        TD3Config().environment("Pendulum-v1").training(**settings).validate()


def test_validate_rejects_bad_networks():
    with pytest.raises(ValueError, match="fcnet_hiddens"):
        TD3Config().environment("Pendulum-v1").rl_module(model_config={"fcnet_hiddens": []}).validate()


def test_validate_rejects_discrete_and_normalized_actions():
    with pytest.raises(ValueError, match=r"CartPole-v1.*Discrete"):
        TD3Config().environment("CartPole-v1").validate()
    with pytest.raises(ValueError, match="normalize_actions"):
        TD3Config().environment("Pendulum-v1", normalize_actions=True).validate()
    TD3Config().environment("Pendulum-v1").validate()


def test_module_exploration_and_inference():
    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))  # half (2, 0.5)
    kwargs = dict(observation_space=gym.spaces.Box(-1, 1, (3,)), action_space=space)
    learner_side = TD3TorchRLModule(**kwargs, model_config={"fcnet_hiddens": [8], "action_noise": 0.05})
    env_side = TD3TorchRLModule(**kwargs, model_config={"fcnet_hiddens": [8]}, inference_only=True)
    assert {"critic", "actor_target", "critic_target"} <= set(dict(learner_side.named_children()))
    assert set(dict(env_side.named_children())) == {"actor"}
    env_side.set_state(learner_side.get_state(inference_only=True))  # only the actor travels
    obs = {"obs": torch.randn(4096, 3)}
    greedy = learner_side.forward_inference(obs)["actions"]
    torch.testing.assert_close(env_side.forward_inference(obs)["actions"], greedy)
    torch.testing.assert_close(greedy, learner_side.actor.deterministic_action(obs["obs"]).detach())
    noisy = learner_side.forward_exploration(obs)["actions"]
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    assert noisy.shape == (4096, 2) and (noisy >= low).all() and (noisy <= high).all()
    inside = (noisy > low) & (noisy < high)
    for dim, half in enumerate((2.0, 0.5)):  # noise std = action_noise · half-range
        diff = (noisy - greedy)[:, dim][inside[:, dim]]
        assert float(diff.std()) == pytest.approx(0.05 * half, rel=0.1)
    saturated = learner_side.forward_exploration({"obs": torch.full((64, 3), 1e3)})["actions"]
    assert (saturated >= low).all() and (saturated <= high).all()


def _config(**training):
    return (
        TD3Config()
        .environment("Pendulum-v1")
        .training(
            initial_steps=300,
            train_batch_size_per_learner=32,
            replay_capacity=1000,
            **training,
        )
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
        .reporting(min_sample_timesteps_per_iteration=200)
        .debugging(seed=0)
    )


def _learner_state(algo):
    return algo.learner_group._learner.get_state()


@pytest.mark.parametrize("checkpoint_replay", [False, True])
def test_train_two_iterations_and_checkpoint_round_trip(ray_session, tmp_path, capsys, checkpoint_replay):
    algo = _config(checkpoint_replay=checkpoint_replay).build_algo()
    try:
        first = algo.train()
        assert first["learners"]["__all_modules__"]["num_updates_lifetime"] == 0  # random actions, no updates yet
        result = algo.train()
        steps = result["num_env_steps_sampled_lifetime"]
        shared = result["learners"]["__all_modules__"]
        assert steps >= 400 and shared["num_env_steps_stored_lifetime"] == steps
        assert shared["num_updates_lifetime"] == steps - 300  # one iteration per env step after initial_steps
        assert shared["replay_size"] == min(steps, 1000)
        module = result["learners"]["default_policy"]
        for key in ("critic_loss", "actor_loss", "q_mean", "target_q_mean"):
            assert key in module and np.isfinite(module[key]), key
        assert "episode_return_mean" in result["env_runners"] or steps < 200
        state = _learner_state(algo)
        weights = state["rl_module"]["default_policy"]
        assert all(np.all(np.isfinite(np.asarray(v))) for v in weights.values())
        # The soft updates moved the targets, but not onto the trained weights.
        key = "critic.q1_net.0.weight"
        assert not np.array_equal(weights["critic_target." + key[len("critic.") :]], weights[key])
        updater = algo.learner_group._learner.updaters["default_policy"]
        assert updater.num_actor_steps == updater.num_critic_steps // 2
        assert ("replay" in state["td3"]) is checkpoint_replay
        replay = algo.learner_group._learner.replay.get_state()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = TD3.from_checkpoint(path)
    try:
        learner2 = restored.learner_group._learner
        state2 = learner2.get_state()
        for k, v in weights.items():
            np.testing.assert_array_equal(np.asarray(state2["rl_module"]["default_policy"][k]), np.asarray(v), err_msg=k)
        assert set(state["optimizer"]) == {"default_policy_actor", "default_policy_critic"}
        for name, opt in state["optimizer"].items():
            moments = opt["state"]["state"][0]  # Adam's moments of the first layer's weight
            restored_moments = state2["optimizer"][name]["state"]["state"][0]
            for k in ("step", "exp_avg", "exp_avg_sq"):
                np.testing.assert_array_equal(np.asarray(restored_moments[k]), np.asarray(moments[k]), err_msg=f"{name} {k}")
        assert {k: v for k, v in state2["td3"].items() if k not in ("updaters", "replay")} == {
            k: v for k, v in state["td3"].items() if k not in ("updaters", "replay")
        }
        assert state2["td3"]["updaters"]["default_policy"]["num_actor_steps"] == updater.num_actor_steps
        assert len(learner2.replay) == (len(replay["data"]["rewards"]) if checkpoint_replay else 0)
        if checkpoint_replay:
            np.testing.assert_array_equal(learner2.replay.get_state()["data"]["obs"], replay["data"]["obs"])
        after = restored.train()
        assert after["learners"]["__all_modules__"]["num_updates_lifetime"] > shared["num_updates_lifetime"]
    finally:
        restored.stop()
    if not checkpoint_replay:
        assert cli.main(["evaluate", path, "--episodes", "1", "--seed", "1"]) == 0
        assert "mean return" in capsys.readouterr().out
