"""The ReF-ER Q-learners' config (ReFERQConfig: DDPG_EXT, NAF_EXT): shared settings fail validate()."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig
from rllib_ext.algorithms.naf.naf import NAFConfig


@pytest.mark.parametrize("config_cls", [DDPGConfig, NAFConfig])
@pytest.mark.parametrize(
    "setting,value",
    [
        ("tau", 0.0),
        ("exploration_sigma", 0.0),
        ("refer_C", 0.0),
        ("refer_D", 1.5),
        ("replay_mode", "x"),
        ("retrace_tolerance", 0.1),  # V-RACER's write-back only: a silent no-op here, so refused
    ],
)
def test_validate(config_cls, setting, value):
    with pytest.raises(ValueError, match=setting):
        config_cls().environment("Pendulum-v1").training(**{setting: value}).validate()


# ---------------------------------------------------------------------------------------------
# The network: App. A's (128, 128) Softsign by default; RLlib's fcnet keys honoured, not ignored.
# ---------------------------------------------------------------------------------------------
def _layers(module):
    import torch

    net = getattr(module, "net", None) or module.actor
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    return linears, [type(m).__name__ for m in net if not isinstance(m, torch.nn.Linear)]


@pytest.mark.parametrize("algo", ["VRACER_EXT", "DDPG_EXT", "NAF_EXT"])
@pytest.mark.parametrize(
    "model_config,widths,activation",
    [
        ({}, [128, 128], "Softsign"),
        ({"fcnet_hiddens": [32], "fcnet_activation": "tanh"}, [32], "Tanh"),
        ({"fcnet_hiddens": [16, 8], "fcnet_activation": "ReLU"}, [16, 8], "ReLU"),
    ],
)
def test_model_config_shapes_the_network(algo, model_config, widths, activation):
    from rllib_ext import registry

    config = registry.get_config_class(algo)().environment("Pendulum-v1").rl_module(model_config=model_config)
    config.validate()
    import gymnasium as gym

    module = config.get_rl_module_spec(env=gym.make("Pendulum-v1")).build()
    linears, activations = _layers(module)
    assert [lin.out_features for lin in linears[:-1]] == widths
    assert activations == [activation] * len(widths)


@pytest.mark.parametrize(
    "model_config,match",
    [
        ({"fcnet_activation": "no_such_fn"}, "fcnet_activation"),
        ({"head_fcnet_hiddens": [64]}, "head_fcnet_hiddens"),
        ({"fcnet_hiddens": [0]}, "fcnet_hiddens"),
    ],
)
def test_model_config_that_cannot_be_honoured_fails_validate(model_config, match):
    with pytest.raises(ValueError, match=match):
        NAFConfig().environment("Pendulum-v1").rl_module(model_config=model_config).validate()
