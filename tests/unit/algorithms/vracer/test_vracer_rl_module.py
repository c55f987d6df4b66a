"""V-RACER's module: network shape, initial outputs, truncated sampling."""

from __future__ import annotations

import pytest
import torch


def test_module_network_and_truncated_sampling():
    import gymnasium as gym

    from rllib_ext.algorithms.vracer.vracer_rl_module import VRACERTorchRLModule
    from rllib_ext.common.refer.distributions import TruncatedDiagGaussian

    m = VRACERTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (3,)), action_space=gym.spaces.Box(-1, 1, (2,)), model_config={}
    )
    assert [l.out_features for l in m.net if isinstance(l, torch.nn.Linear)] == [128, 128, 3]
    assert sum(isinstance(l, torch.nn.Softsign) for l in m.net) == 2
    v, mean, sigma = m.value_and_policy(torch.randn(5, 3))
    torch.testing.assert_close(sigma, torch.full((5, 2), 0.2**0.5))  # σ² = 0.2: Σ = 0.2 I (App. A)
    assert v.abs().max() < 0.5 and mean.abs().max() < 0.5  # near-zero outputs at init (App. A)
    dist = TruncatedDiagGaussian(loc=torch.zeros(20000, 2), scale=torch.full((20000, 2), 0.5))
    a = dist.sample()
    assert a.abs().max() <= 1.5 + 1e-5 and a.abs().max() > 1.3  # truncated at 3σ
    assert a.std().item() == pytest.approx(0.5 * 0.9865, rel=0.03)  # truncated-normal std
