"""The black-box family's network is policy_hiddens/policy_activation (and critic_hiddens for ERL):
an RLlib model_config that names another network is an error, not a silently ignored setting."""

from __future__ import annotations

import pytest
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

from rllib_ext import AESRLConfig, CEMRLConfig, DFDConfig, ESConfig


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


def test_a_default_model_config_given_for_an_activation_is_compared_with_rllibs_defaults():
    """Issue 39 §5: a DefaultModelConfig carries RLlib's fcnet_hiddens [256, 256]; only what differs
    from RLlib's defaults is a setting, so setting an (equal) activation passes."""
    ESConfig().environment("CartPole-v1").rl_module(model_config=DefaultModelConfig(fcnet_activation="tanh")).validate()
    relu = DefaultModelConfig(fcnet_activation="relu")
    assert "policy_activation" in _first_line(ESConfig().environment("CartPole-v1").rl_module(model_config=relu))
    DFDConfig().environment("CartPole-v1").training(policy_activation="relu").rl_module(model_config=relu).validate()


@pytest.mark.parametrize(
    "model_config, key",
    [
        (DefaultModelConfig(fcnet_kernel_initializer="xavier_uniform_"), "fcnet_kernel_initializer"),
        (DefaultModelConfig(use_lstm=True), "use_lstm=True (recurrent networks are not supported)"),
        ({"vf_share_layers": False}, "vf_share_layers"),
        ({"hiddens": [8]}, "hiddens"),  # the module's own key: the family's settings set it
    ],
)
def test_a_model_config_key_the_policy_does_not_read_is_an_error_naming_it(model_config, key):
    message = _first_line(ESConfig().environment("CartPole-v1").rl_module(model_config=model_config))
    assert f"does not read model_config {key}" in message and "policy_hiddens" in message, message
