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


def test_frozen_critic_passes_the_action_gradient_only():
    """q_value(frozen=True) (the DPG of Eq. 3): the value and the gradient with respect to the action
    equal those with detached parameters; no gradient reaches the critic, whose weights stay trainable."""
    from rllib_ext.algorithms.ddpg.ddpg_rl_module import DDPGTorchRLModule

    torch.manual_seed(0)
    m = DDPGTorchRLModule(observation_space=gym.spaces.Box(-1, 1, (3,)), action_space=gym.spaces.Box(-1, 1, (2,)))
    obs = torch.randn(8, 3)
    a1 = torch.randn(8, 2, requires_grad=True)
    a2 = a1.detach().clone().requires_grad_(True)
    frozen = m.q_value(obs, a1, frozen=True)
    detached = m.q_value(obs, a2, params={n: p.detach() for n, p in m.critic.named_parameters()})
    torch.testing.assert_close(frozen, detached, rtol=0, atol=0)
    frozen.sum().backward()
    detached.sum().backward()
    torch.testing.assert_close(a1.grad, a2.grad, rtol=0, atol=0)
    assert all(p.grad is None and p.requires_grad for p in m.critic.parameters())
