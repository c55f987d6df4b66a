"""Observation standardization for the black-box runners (paper 000 App. A.2).

Runners standardize each observation with *frozen* running statistics, ``clip((o − μ) / σ, ±c)``
(c = 5 in paper 000), and accumulate the raw observations they saw; the driver merges every
runner's delta into the global statistics (RLlib's :class:`~ray.rllib.utils.filter.RunningStat`,
Chan et al.'s parallel merge) and ships the merged statistics with the next parameters. This is
Salimans et al.'s ES scheme: the per-step cost on a runner is one subtract, divide and clip,
instead of two Welford updates per step as in RLlib's ``MeanStdFilter``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from ray.rllib.utils.filter import RunningStat

_STD_FLOOR = 1e-8


def running_stat_from_batch(batch: np.ndarray) -> RunningStat:
    """A fresh RunningStat holding the count, mean and sum of squared deviations of ``batch`` [n, ...]."""
    batch = np.asarray(batch, dtype=np.float64)
    stat = RunningStat(batch.shape[1:])
    n = batch.shape[0]
    if n == 0:
        return stat
    mean = batch.mean(axis=0)
    m2 = ((batch - mean) ** 2).sum(axis=0)
    # A delta that RunningStat.update() merges (it reads the *_delta fields).
    stat.num_pushes = stat.num_pushes_delta = n
    stat.mean_array, stat.mean_delta_array = mean.copy(), mean.copy()
    stat.sum_sq_diff_array, stat.sum_sq_diff_delta_array = m2.copy(), m2.copy()
    return stat


class ObservationFilter:
    """Frozen mean/std standardization with clipping, plus the delta of what was seen since sync.

    Args:
        shape: Observation shape.
        clip: Clip standardized values to [−clip, clip]; None or 0 disables clipping.
        enabled: False makes :meth:`__call__` the identity (paper 002 runs without a filter).
    """

    def __init__(self, shape: Iterable[int], clip: float | None = 5.0, enabled: bool = True):
        self.shape = tuple(shape)
        self.clip = clip
        self.enabled = enabled
        self.stats = RunningStat(self.shape)
        self._mean = np.zeros(self.shape, np.float32)
        self._inv_std = np.ones(self.shape, np.float32)
        self._seen: list[np.ndarray] = []
        self._set_bounds()

    def _set_bounds(self) -> None:
        # ±clip as arrays: np.minimum/np.maximum with array operands cost about a third of np.clip
        # on observation-sized arrays (the filter runs once per env step).
        self._hi: np.ndarray | None = np.full(self.shape, self.clip, np.float32) if self.clip else None
        self._lo: np.ndarray | None = -self._hi if self._hi is not None else None

    def __call__(self, obs: np.ndarray, record: bool = True) -> np.ndarray:
        # An own copy: it is recorded, and an env may reuse its observation buffer.
        obs = np.array(obs, dtype=np.float32)
        if not self.enabled:
            return obs
        if record:
            self._seen.append(obs)
        out = obs - self._mean
        out *= self._inv_std
        if self._hi is not None and self._lo is not None:
            np.minimum(out, self._hi, out=out)
            np.maximum(out, self._lo, out=out)
        return out

    def _refresh(self) -> None:
        if self.stats.n > 1:
            self._mean = self.stats.mean.astype(np.float32)
            self._inv_std = (1.0 / np.maximum(self.stats.std, _STD_FLOOR)).astype(np.float32)
        else:
            self._mean = np.zeros(self.shape, np.float32)
            self._inv_std = np.ones(self.shape, np.float32)

    def pop_delta(self) -> RunningStat | None:
        """Statistics of the observations seen since the last call (None when disabled/empty)."""
        if not self.enabled or not self._seen:
            self._seen = []
            return None
        delta = running_stat_from_batch(np.stack(self._seen))
        self._seen = []
        return delta

    def merge(self, delta: RunningStat | None) -> None:
        """Driver side: folds a runner's delta into the global statistics."""
        if delta is not None and delta.num_pushes_delta > 0:
            self.stats.update(delta)
            self._refresh()

    def get_state(self) -> dict[str, Any]:
        return {"stats": self.stats.to_state(), "clip": self.clip, "enabled": self.enabled}

    def set_state(self, state: dict[str, Any]) -> None:
        self.stats = RunningStat.from_state(state["stats"])
        # Deltas are counted from here on: the global statistics are the new base.
        self.stats.num_pushes_delta = 0
        self.clip = state["clip"]
        self.enabled = state["enabled"]
        self._set_bounds()
        self._refresh()
