"""The one-step MDP of paper 002 §3.4 / App. A–B: how much variance each estimator has.

One action a ∈ R^d, reward r(a) = αᵀa, Gaussian policy a ~ N(μ', σ2² I) with mean parameter μ'
(θ = μ), ES smoothing θ' = μ + σ1 ε1, ρ = σ2/σ1. With αᵀμ = 0 (here μ = 0) the paper derives,
per unit ‖α‖²:

- vanilla ES, i.i.d. ε1:            V = ((1 + ρ²)d + 1)/N                      (App. B.2)
- orthogonal ES:                      V = ((1 + ρ²)d + 2 − N)/N                  (App. B.1)
- CV with the per-coordinate optimal η: V_cv/V_es ≤ 1 − ρ²[(1 + ρ²)d − 4]/([(1 + ρ²)d + 1](1 + ρ²))
  (Theorem 1).

Exact value of the CV ratio (derived here, not in the paper): per coordinate p and per sample,
V[x_p] = (1 + ρ²)‖α‖² + α_p², V[y_p] = (2 + ρ² + 1/ρ²)‖α‖², cov(x_p, y_p) = (1 + ρ²)‖α‖²
(y = ĝ^es − ĝ^re), so the optimal η leaves V[x_p] − cov²/V[y_p] = ‖α‖² + α_p², i.e.
V_cv/V_es = (d + 1)/((1 + ρ²)d + 1): the variance of ES with a deterministic policy (ρ → 0).
Theorem 1's bound exceeds it by 4ρ²/([(1 + ρ²)d + 1](1 + ρ²)).

:func:`draws` simulates the MDP with the project's own estimator code (the samplers,
:func:`~rllib_ext.algorithms.cves.control_variate.cv_terms` over Eq. 4/7/8 without normalization,
:func:`~rllib_ext.algorithms.cves.control_variate.discounted_weights` for the PG weights); the tests
and ``benchmarks/cves_variance.py`` compare its variances with the formulas.
"""

from __future__ import annotations

import math

import numpy as np

from rllib_ext.algorithms.cves.control_variate import cv_terms, discounted_weights
from rllib_ext.common.blackbox.samplers import make_sampler


def theory(d: int, n: int, rho: float) -> dict[str, float]:
    """The closed forms above (per unit ‖α‖²), their ratios, and ρ0 of Eq. 12."""
    k = (1.0 + rho**2) * d
    vanilla = (k + 1.0) / n  # App. B.2
    orthogonal = (k + 2.0 - n) / n  # App. B.1
    cv_bound = 1.0 - rho**2 * (k - 4.0) / ((k + 1.0) * (1.0 + rho**2))  # Theorem 1
    rho0 = math.sqrt((n + 3 - d + math.sqrt((d - n - 3) ** 2 + 4 * (n - 1) * d)) / (2 * d))  # Eq. 12
    return {
        "var_vanilla": vanilla,
        "var_orthogonal": orthogonal,
        "ratio_orthogonal": orthogonal / vanilla,
        "ratio_cv_bound": cv_bound,
        "ratio_cv_exact": (d + 1.0) / (k + 1.0),
        "rho0": rho0,
    }


def draws(
    d: int,
    n: int,
    rho: float,
    sampler: str,
    reps: int,
    *,
    sigma1: float = 0.1,
    gamma: float = 0.99,
    seed: int = 0,
    alpha: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` independent draws of (X, Y) = (ĝ^es, ĝ^es,γ − ĝ^re,γ) on the one-step MDP.

    Each draw: ε1_i = rows of ``sampler``'s batch (no antithetic pairs, as App. A), θ_i = σ1 ε1_i
    (μ = 0), a_i = θ_i + σ2 ε2_i, J¹_i = J^γ_i = αᵀa_i (one step), ĝ^pg_i = w_0 ∇_μ log N(a_i; θ_i,
    σ2² I) = w_0 (a_i − θ_i)/σ2² (Eq. 5 with T = 1).

    Args:
        d: Dimension of a and μ.
        n: N, perturbations per estimate.
        rho: ρ = σ2/σ1.
        sampler: ``"gaussian"`` (vanilla) or ``"orthogonal"`` (any sampler name works).
        reps: Number of draws.
        sigma1: σ1 (the ratios do not depend on it).
        gamma: γ (irrelevant with one step; passed through the PG weights).
        seed: Seed of the draws (batch seeds ``seed·reps + r``, policy noise, α).
        alpha: α; default a fixed random unit vector.

    Returns:
        (X [reps, d], Y [reps, d]).
    """
    rng = np.random.default_rng([seed, 1])
    if alpha is None:
        alpha = rng.standard_normal(d)
        alpha /= np.linalg.norm(alpha)
    sigma2 = rho * sigma1
    batch = make_sampler(sampler, d, antithetic=False)
    xs, ys = np.empty((reps, d)), np.empty((reps, d))
    for r in range(reps):
        eps1 = batch.sample(seed * reps + r, n).astype(np.float64)
        theta_i = sigma1 * eps1
        actions = theta_i + sigma2 * rng.standard_normal((n, d))
        rewards = actions @ alpha
        w0 = np.array([discounted_weights([ri], [gamma])[0, 0] for ri in rewards])  # T = 1
        g_pg = (w0[:, None] * (actions - theta_i) / sigma2**2)[:, None, :]  # Eq. (5): w_0 ∇_μ log π
        x, y, _ = cv_terms(rewards, rewards[:, None], g_pg, eps1, sigma1, "none")
        xs[r], ys[r] = x.mean(0), y.mean(0)[0]
    return xs, ys


def total_variance(draws_: np.ndarray) -> float:
    """V[g] = Σ_p V[g_p] (§3.4's definition) from draws [R, d]."""
    return float(draws_.var(axis=0, ddof=1).sum())
