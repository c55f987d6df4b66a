"""TD3's module: exploration and inference actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.algorithms.td3.td3_rl_module import TD3TorchRLModule


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
