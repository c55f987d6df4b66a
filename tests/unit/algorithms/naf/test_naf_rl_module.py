"""NAF's module (paper 003): Q = V − (a − m)ᵀ L Lᵀ (a − m) (Eq. 4), maximal at the mean."""

from __future__ import annotations

import gymnasium as gym
import torch


def test_naf_q_is_maximal_at_the_mean():
    from rllib_ext.algorithms.naf.naf_rl_module import NAFTorchRLModule

    torch.manual_seed(0)
    m = NAFTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (4,)), action_space=gym.spaces.Box(-1, 1, (3,)), model_config={}
    )
    obs = torch.randn(16, 4)
    with torch.no_grad():
        for p in m.net[-1].parameters():  # a non-trivial L, V and m
            p.add_(torch.randn_like(p))
        v, mean, L = m.naf_outputs(obs)
        assert torch.all(torch.triu(L, diagonal=1) == 0) and torch.all(torch.diagonal(L, dim1=1, dim2=2) > 0)
        d = torch.randn_like(mean)
        P = L @ L.transpose(1, 2)  # L Lᵀ
        expected = v - (d[:, None, :] @ P @ d[:, :, None])[:, 0, 0]  # Eq. (4), as matrices
        torch.testing.assert_close(m.q_value(v, mean, L, mean + d), expected, rtol=1e-5, atol=1e-5)
        wrong = v - (d[:, None, :] @ L.transpose(1, 2) @ L @ d[:, :, None])[:, 0, 0]  # Lᵀ L: not Eq. (4)
        assert not torch.allclose(expected, wrong, rtol=1e-3, atol=1e-3)
        q_at_mean = m.q_value(v, mean, L, mean)
        torch.testing.assert_close(q_at_mean, v)  # Eq. (4): Q(s, m) = V(s)
        for _ in range(20):
            a = mean + torch.randn_like(mean)
            assert torch.all(m.q_value(v, mean, L, a) < q_at_mean)
    a = mean.clone().requires_grad_(True)
    m.q_value(v, mean, L, a).sum().backward()
    assert a.grad.abs().max() < 1e-6  # stationary at a = m
