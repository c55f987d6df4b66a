"""DFD's estimator and its state: batch assembly, the parameter history and the delayed-FD gradient.

Paper 000 (``../shared/papers/000_918eb0e7bb8ca864.txt``) §3.1–3.2, App. A.2:

- :class:`ReturnBuffer` accepts returns as they arrive, drops those more than ``U_max``
  updates behind (or, for the FD ablation, any delayed return), and hands out batches of
  exactly N, carrying the extra returns over to the next update (App. A.2). It counts every
  return by its delay where it leaves the buffer (:attr:`ReturnBuffer.delay_counts`).
- :class:`ParameterHistory` keeps θ_{u−U_max} … θ_u for λ_i (Eq. 16–17).
- :func:`dfd_gradient` is g_DFD (Eq. 18) with the batch standardization of Algorithm 1 and the
  R(θ_u) approximation of Eq. 23.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from rllib_ext.common.blackbox.protocol import EpisodeResult, result_from_state, result_to_state
from rllib_ext.common.blackbox.shaping import standardize


class ParameterHistory:
    """θ_u for the last ``U_max + 1`` updates (what λ_i needs, Eq. 17).

    Args:
        u_max: U_max, the largest delay n_i still used.
    """

    def __init__(self, u_max: int):
        self.u_max = int(u_max)
        self._thetas: OrderedDict[int, np.ndarray] = OrderedDict()

    def add(self, u: int, theta: np.ndarray) -> None:
        self._thetas[int(u)] = np.array(theta, dtype=np.float32, copy=True)
        while len(self._thetas) > self.u_max + 1:
            self._thetas.popitem(last=False)

    def __getitem__(self, u: int) -> np.ndarray:
        return self._thetas[int(u)]

    def __contains__(self, u: int) -> bool:
        return int(u) in self._thetas

    def get_state(self) -> dict[str, Any]:
        return {"u_max": self.u_max, "thetas": [(u, t) for u, t in self._thetas.items()]}

    def set_state(self, state: dict[str, Any]) -> None:
        self.u_max = state["u_max"]
        self._thetas = OrderedDict((int(u), np.asarray(t, dtype=np.float32)) for u, t in state["thetas"])


class ReturnBuffer:
    """Returns waiting for an update: accept, drop the too-old, batch exactly N, carry the rest.

    Args:
        n: N, returns per update.
        u_max: U_max; a return of θ_{u−n} with n > U_max is dropped (counted).
        delayed_returns: False gives the FD ablation (Eq. 10): any return with n > 0 is dropped.

    Delays: every return is counted once, by its delay n = u − u_i where it leaves the buffer (u the
    update that takes it into its batch, or during which it is dropped): ``delay_counts[n]`` for
    n = 0 … U_max and ``delay_counts[U_max + 1]`` for every n > U_max (what DFD drops as too old);
    ``delay_max`` is the largest n seen. Returns still pending are not counted yet.
    """

    def __init__(self, n: int, u_max: int, delayed_returns: bool = True):
        self.n, self.u_max, self.delayed_returns = int(n), int(u_max), bool(delayed_returns)
        self.pending: list[EpisodeResult] = []
        self.num_dropped_stale = 0
        self.steps_dropped_stale = 0  # their env steps (wasted)
        self.delay_counts = np.zeros(self.u_max + 2, dtype=np.int64)
        self.delay_max = 0

    def _count_delays(self, results: Sequence[EpisodeResult], u: int) -> None:
        for r in results:
            delay = u - r.version
            self.delay_counts[min(max(delay, 0), self.u_max + 1)] += 1
            self.delay_max = max(self.delay_max, delay)

    def _too_old(self, r: EpisodeResult, u: int) -> bool:
        delay = u - r.version
        return delay > self.u_max or (not self.delayed_returns and delay > 0)

    def add(self, results: Sequence[EpisodeResult], u: int) -> int:
        """Adds returns (credited to ``r.version``); returns how many were dropped as too old."""
        dropped = []
        for r in results:
            if self._too_old(r, u):
                dropped.append(r)
                self.steps_dropped_stale += r.length
            else:
                self.pending.append(r)
        self.num_dropped_stale += len(dropped)
        self._count_delays(dropped, u)
        return len(dropped)

    def ready(self) -> bool:
        return len(self.pending) >= self.n

    def take_batch(self, u: int) -> list[EpisodeResult]:
        """The oldest N usable returns; the rest stay for the next update (App. A.2).

        Returns that became too old while waiting (delay grew past U_max) are dropped first.
        """
        kept: list[EpisodeResult] = []
        dropped: list[EpisodeResult] = []
        for r in self.pending:
            (dropped if self._too_old(r, u) else kept).append(r)
        self.num_dropped_stale += len(dropped)
        self.steps_dropped_stale += sum(r.length for r in dropped)
        batch, self.pending = kept[: self.n], kept[self.n :]
        self._count_delays(dropped, u)
        self._count_delays(batch, u)
        return batch

    def get_state(self) -> dict[str, Any]:
        return {
            "pending": [result_to_state(r) for r in self.pending],
            "num_dropped_stale": self.num_dropped_stale,
            "steps_dropped_stale": self.steps_dropped_stale,
            "delay_counts": self.delay_counts.tolist(),
            "delay_max": self.delay_max,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.pending = [result_from_state(r) for r in state["pending"]]  # also pre-protocol dicts
        self.num_dropped_stale = state["num_dropped_stale"]
        self.steps_dropped_stale = state.get("steps_dropped_stale", 0)  # absent before step accounting
        counts = state.get("delay_counts")  # absent before the delay histogram: counted from here on
        self.delay_counts = np.zeros(self.u_max + 2, dtype=np.int64)
        if counts is not None and len(counts) == len(self.delay_counts):
            self.delay_counts[:] = counts
        self.delay_max = int(state.get("delay_max", 0))


def dfd_gradient(
    rewards: np.ndarray,
    sigma_eps: np.ndarray,
    delays: np.ndarray,
    history: ParameterHistory,
    u: int,
    versions: np.ndarray,
) -> tuple[np.ndarray, dict[str, float]]:
    """g_DFD (Eq. 18) for one batch.

    Args:
        rewards: Raw returns R(α_i), [N].
        sigma_eps: σε_i, [N, d].
        delays: n_i = u − u_i, [N].
        history: θ of the versions in the batch.
        u: The current update index.
        versions: u_i, [N].

    Returns:
        (g, info) with info ``r_theta_u`` (the standardized R(θ_u) used), ``current_fraction``
        (B/N of Eq. 23) and ``lambda_norm_mean``.

    R(θ_u) follows Eq. 23: the mean standardized reward of the batch's current-policy returns
    (n_i = 0). A batch with none (every return delayed) uses the batch mean, i.e. 0 after
    standardization — the estimator then centres on the batch, as ES does.
    """
    # Algorithm 1: R(α_i) ← (R(α_i) − μ_R) / σ_R; a constant batch maps to zeros.
    r_std = standardize(rewards)
    current = delays == 0
    r_theta_u = float(r_std[current].mean()) if current.any() else float(r_std.mean())  # Eq. (23)
    theta_u = history[u]
    lam = np.array(sigma_eps, dtype=np.float64, copy=True)
    for i, (n_i, u_i) in enumerate(zip(delays, versions, strict=True)):
        if n_i:
            lam[i] += history[u_i] - theta_u  # Eq. (17): λ = σε + θ_{u−n} − θ_u
    sq_norms = np.maximum(np.einsum("ij,ij->i", lam, lam), 1e-30)
    g = ((r_std - r_theta_u) / sq_norms) @ lam / len(r_std)  # Eq. (18)
    info = {
        "r_theta_u": r_theta_u,
        "current_fraction": float(current.mean()),
        "lambda_norm_mean": float(np.sqrt(sq_norms).mean()),
    }
    return g.astype(np.float32), info
