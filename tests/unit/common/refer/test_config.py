"""The ReF-ER Q-learners' config (ReFERQConfig: DDPG_EXT, NAF_EXT): shared settings fail validate()."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig
from rllib_ext.algorithms.naf.naf import NAFConfig


@pytest.mark.parametrize("config_cls", [DDPGConfig, NAFConfig])
@pytest.mark.parametrize(
    "setting,value",
    [("tau", 0.0), ("exploration_sigma", 0.0), ("refer_C", 0.0), ("refer_D", 1.5), ("replay_mode", "x")],
)
def test_validate(config_cls, setting, value):
    with pytest.raises(ValueError, match=setting):
        config_cls().environment("Pendulum-v1").training(**{setting: value}).validate()
