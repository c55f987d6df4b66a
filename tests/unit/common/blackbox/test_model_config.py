"""The black-box family's network is policy_hiddens/policy_activation (and critic_hiddens for ERL):
an RLlib model_config that names another network is an error, not a silently ignored setting."""

from __future__ import annotations

import pytest

from rllib_ext import AESRLConfig, CEMRLConfig, ESConfig


def _first_line(config) -> str:
    with pytest.raises(ValueError) as info:
        config.validate()
    return str(info.value).splitlines()[0]


def test_a_different_fcnet_hiddens_is_an_error_naming_both():
    config = ESConfig().environment("CartPole-v1").rl_module(model_config={"fcnet_hiddens": [32]})
    message = _first_line(config)
    assert "fcnet_hiddens=[32]" in message and "policy_hiddens=" in message


def test_a_different_fcnet_activation_is_an_error():
    config = ESConfig().environment("CartPole-v1").rl_module(model_config={"fcnet_activation": "relu"})
    assert "policy_activation" in _first_line(config)


def test_erl_critic_must_match_too():
    """TD3_EXT's fcnet_hiddens sizes actor and critics: an ERL race entry must match both."""
    config = (
        CEMRLConfig()
        .environment("Pendulum-v1")
        .training(policy_hiddens=[400, 300], critic_hiddens=[64, 64])
        .rl_module(model_config={"fcnet_hiddens": [400, 300]})
    )
    assert "critic_hiddens=[64, 64]" in _first_line(config)


def test_an_equal_network_passes():
    AESRLConfig().environment("HalfCheetah-v5").rl_module(model_config={"fcnet_hiddens": [400, 300]}).validate()
    ESConfig().environment("CartPole-v1").training(policy_hiddens=[32]).rl_module(
        model_config={"fcnet_hiddens": [32], "fcnet_activation": "tanh"}
    ).validate()
