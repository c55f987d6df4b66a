"""`clip_rewards` for IMPACT_EXT: the train batch's rewards are clipped in the learner connector
(RLlib 2.60's new API stack does not read the setting); bad values are rejected by validate()."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
from ray.rllib.core.columns import Columns

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from rllib_ext.algorithms.impact.reward_clipping import ClipRewards, clip_rewards_error

RAW = [-7.0, -1.0, -0.25, 0.0, 0.5, 3.0]


@pytest.mark.parametrize(
    "limit,expected",
    [(None, [-1.0, -1.0, -1.0, 0.0, 1.0, 1.0]), (2.0, [-2.0, -1.0, -0.25, 0.0, 0.5, 2.0])],
)
def test_clips_each_modules_rewards_to_their_sign_or_to_the_limit(limit, expected):
    """True -> the sign (RLlib's old stack: np.sign); a number c -> [-c, c]; other columns untouched."""
    obs = np.ones((6, 2), np.float32)
    batch = {"default_policy": {Columns.REWARDS: np.array(RAW, np.float32), Columns.OBS: obs.copy()}}
    out = ClipRewards(limit=limit)(rl_module=None, batch=batch, episodes=[])
    np.testing.assert_array_equal(out["default_policy"][Columns.REWARDS], expected)
    np.testing.assert_array_equal(out["default_policy"][Columns.OBS], obs)
    # Columns at the top level (a pipeline without module mapping), and torch tensors.
    top = ClipRewards(limit=limit)(rl_module=None, batch={Columns.REWARDS: torch.tensor(RAW)}, episodes=[])
    np.testing.assert_array_equal(top[Columns.REWARDS].numpy(), expected)


def _learner_pipeline(**env_settings):
    config = IMPACTConfig().environment("CartPole-v1", **env_settings)
    obs_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    return config.build_learner_connector(obs_space, gym.spaces.Discrete(2))


@pytest.mark.parametrize("clip_rewards,limit", [(True, None), (5.0, 5.0)])
def test_learner_pipeline_clips_just_before_the_tensors(clip_rewards, limit):
    names = [type(c).__name__ for c in _learner_pipeline(clip_rewards=clip_rewards).connectors]
    assert names.index("ClipRewards") == names.index(NumpyToTensor.__name__) - 1
    assert names.index("ClipRewards") > names.index("BatchIndividualItems")
    (piece,) = [c for c in _learner_pipeline(clip_rewards=clip_rewards).connectors if isinstance(c, ClipRewards)]
    assert piece.limit == limit


@pytest.mark.parametrize("clip_rewards", [None, False])
def test_no_clipping_by_default_or_when_off(clip_rewards):
    assert IMPACTConfig().clip_rewards is None
    names = [type(c).__name__ for c in _learner_pipeline(clip_rewards=clip_rewards).connectors]
    assert "ClipRewards" not in names


@pytest.mark.parametrize("value", ["yes", 0.0, -1.0, float("inf"), [1.0]])
def test_validate_rejects_a_bad_clip_rewards(value):
    assert clip_rewards_error(value) is not None
    config = IMPACTConfig().environment("CartPole-v1")
    config.clip_rewards = value  # as update_from_dict / the CLI's --config would
    with pytest.raises(ValueError, match="clip_rewards"):
        config.validate()


@pytest.mark.parametrize("value", [None, False, True, 1, 2.5])
def test_validate_accepts_none_bool_and_positive_limits(value):
    assert clip_rewards_error(value) is None
    IMPACTConfig().environment("CartPole-v1", clip_rewards=value).validate()
