"""Made-up replay data for the tests of :mod:`rllib_ext.common.refer` (unit and smoke tiers)."""

from __future__ import annotations

import numpy as np


def replay_episode(T, rng, d_s=3, d_a=2, terminated=False):
    """The keyword arguments of ``ReplayMemory.add_episode`` for one random episode of ``T`` steps."""
    return dict(
        obs=rng.standard_normal((T + 1, d_s)),
        actions=rng.standard_normal((T, d_a)),
        rewards=rng.standard_normal(T),
        mu=np.concatenate([np.zeros((T, d_a)), np.ones((T, d_a))], 1),
        terminated=terminated,
    )


def transition_rows(start, n, obs_dim=2):
    """``n`` transitions (obs, actions, rewards, next_obs, terminateds) numbered from ``start``:
    every entry of row ``i`` is ``i`` (next_obs ``i + 0.5``), terminated when ``i`` is even."""
    i = np.arange(start, start + n, dtype=np.float32)
    return (
        np.stack([i] * obs_dim, 1),
        i[:, None],
        i,
        np.stack([i + 0.5] * obs_dim, 1),
        (i % 2 == 0).astype(np.float32),
    )


def loss_batch(obs, pi_mean, pi_std, *, far=(), seed=0):
    """A minibatch for a paper-003 learner's loss, as ``ReplayMemory.sample`` gives it, as tensors.

    Row k's behaviour μ_k has π's σ and a mean 0.1σ off π's (near-policy: ρ_k ≈ 1, D_KL > 0) and
    its action is drawn from μ_k; rows in ``far`` have μ's mean 5σ off π's and the action at μ's
    mean (log ρ = −12.5 per action dimension: far-policy for every c_max of Eq. 13). Rewards,
    next states, Q̂^ret and V̂^tbc are random; no state is terminal; PER weights are ones.

    Args:
        obs: States s_k, a float tensor [B, d_S].
        pi_mean, pi_std: π's mean and σ at s_k, [B, d_A] (detached).
        far: Rows to make far-policy.
        seed: Seed of the random columns.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    B = obs.shape[0]
    far_rows = torch.zeros(B, dtype=torch.bool)
    far_rows[list(far)] = True
    shift = torch.where(far_rows[:, None], 5.0, 0.1) * pi_std
    mu_mean = pi_mean + shift
    noise = 0.5 * torch.randn(pi_mean.shape, generator=g)
    actions = mu_mean + torch.where(far_rows[:, None], 0.0, noise) * pi_std
    return {
        "obs": obs,
        "actions": actions,
        "mu": torch.cat([mu_mean, torch.log(pi_std)], -1),
        "rewards": torch.randn(B, generator=g),
        "next_obs": torch.randn(obs.shape, generator=g),
        "terminated": torch.zeros(B, dtype=torch.bool),
        "q_ret": torch.randn(B, generator=g),
        "v_tbc": torch.randn(B, generator=g),
        "weights": torch.ones(B),
    }
