"""The V-RACER value target V̂^tbc of paper 003 Eq. (8), vectorized over many episodes.

Eq. (8):  V̂^tbc_t = V(s_t) + ρ̄_t [ r_{t+1} + γ V̂^tbc_{t+1} − V(s_t) ],  ρ̄_t = min(1, ρ_t),

with V̂^tbc_T = V(s_T) after the last step of a truncated episode and 0 after a terminal state
(App. C, remarks on Algorithm 2). Written as the affine recurrence x_t = a_t + c_t x_{t+1} with
a_t = (1 − ρ̄_t) V(s_t) + ρ̄_t r_{t+1} and c_t = γ ρ̄_t, it is solved for all episodes at once by a
reverse doubling scan (log2 of the longest segment vectorized steps): segment boundaries are
cut by folding the boundary value into a and setting c = 0 at each segment's last step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["affine_reverse_scan", "retrace_tbc", "retrace_tbc_loop"]


def affine_reverse_scan(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Solves x_t = a_t + c_t · x_{t+1} (x_M = 0) for t = M−1 … 0 by recursive doubling.

    Elements with c_t = 0 start independent segments, so concatenated episodes are solved
    together. Cost O(M log L) with L the longest run of non-zero c.
    """
    a = np.array(a, dtype=np.float64)
    c = np.array(c, dtype=np.float64)
    n = len(a)
    d = 1
    while d < n and np.any(c[: n - d] != 0.0):
        # (a_t, c_t) ∘ (a_{t+d}, c_{t+d}) = (a_t + c_t a_{t+d}, c_t c_{t+d})
        a[: n - d] += c[: n - d] * a[d:]
        c[: n - d] *= c[d:]
        c[n - d :] = 0.0
        d *= 2
    return a


def retrace_tbc(
    rewards: np.ndarray,
    values: np.ndarray,
    rho: np.ndarray,
    gamma: float,
    segment_last: np.ndarray,
    boundary: np.ndarray,
) -> np.ndarray:
    """V̂^tbc (Eq. 8) for steps laid out as consecutive segments of episodes.

    Args:
        rewards: r_{t+1} of each step (already scaled), shape [M].
        values: V(s_t), shape [M].
        rho: ρ_t, shape [M] (clipped at 1 here: ρ̄_t).
        gamma: γ.
        segment_last: Boolean [M], True at the last step of each segment.
        boundary: [M]; at a segment's last step t, the value V̂^tbc_{t+1} that follows it (the
            bootstrap V(s_T), 0 after a terminal state, or a stored V̂^tbc); ignored elsewhere.

    Returns:
        V̂^tbc_t, float64 [M].
    """
    rho_bar = np.minimum(1.0, np.asarray(rho, dtype=np.float64))
    values = np.asarray(values, dtype=np.float64)
    a = (1.0 - rho_bar) * values + rho_bar * np.asarray(rewards, dtype=np.float64)
    c = gamma * rho_bar
    last = np.asarray(segment_last, dtype=bool)
    a[last] += c[last] * np.asarray(boundary, dtype=np.float64)[last]
    c[last] = 0.0
    return affine_reverse_scan(a, c)


def retrace_tbc_loop(rewards, values, rho, gamma: float, v_next: float) -> np.ndarray:
    """Eq. (8) for one episode by the plain backward loop (reference for tests)."""
    out = np.zeros(len(rewards))
    nxt = float(v_next)
    for t in range(len(rewards) - 1, -1, -1):
        rho_bar = min(1.0, float(rho[t]))
        out[t] = values[t] + rho_bar * (rewards[t] + gamma * nxt - values[t])  # Eq. (8)
        nxt = out[t]
    return out
