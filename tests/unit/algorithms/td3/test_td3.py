"""TD3Config: paper defaults, validate()."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.td3.td3 import TD3Config


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


def test_lr_and_other_settings_td3_does_not_read_are_refused():
    """`lr` is RLlib's: TD3_EXT's rates are actor_lr and critic_lr, so lr would silently do nothing."""
    with pytest.raises(ValueError, match=r"`lr` = 0.0003 has no effect in TD3_EXT .*`actor_lr` and `critic_lr`"):
        TD3Config().environment("Pendulum-v1").training(lr=3e-4).validate()
    with pytest.raises(ValueError, match=r"does not read model_config fcnet_activation='relu'"):
        TD3Config().environment("Pendulum-v1").rl_module(model_config={"fcnet_activation": "relu"}).validate()
    TD3Config().environment("Pendulum-v1").training(lr=1e-3, actor_lr=3e-4).validate()  # lr at its default
