"""DDPG's module: a tanh-bounded policy, OU noise only without ReF-ER."""

from __future__ import annotations

import gymnasium as gym
import torch

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig


def test_ddpg_policy_is_tanh_bounded_and_ou_only_without_refer():
    from rllib_ext.algorithms.ddpg.ddpg_rl_module import DDPGTorchRLModule

    assert DDPGConfig().training(replay_mode="er").model_config["ou_noise"] is True
    assert DDPGConfig().model_config["ou_noise"] is False
    m = DDPGTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (3,)),
        action_space=gym.spaces.Box(-1, 1, (2,)),
        model_config={"ou_noise": True},
    )
    with torch.no_grad():
        for p in m.actor[-1].parameters():
            p.add_(10.0)
        assert m.policy_mean(torch.randn(8, 3)).abs().max() <= 1.0
        out = m.forward_exploration({"obs": torch.randn(8, 3)})
    assert out["actions"].shape == (8, 2)  # OU noise acts directly
