"""Made-up replay data for the tests of :mod:`rllib_ext.common.replay` (unit and smoke tiers)."""

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
