"""CVES's control variate: the estimator and the η, γ adaptation.

Paper 002 (``../shared/papers/002_0511cdacd6792c57.txt``), "Variance Reduction for Evolution
Strategies via Structured Control Variates". Names follow the paper:

- θ ∈ R^d, σ (``noise_stdev``), ε_i the perturbations (rows of a sampler batch), N rollouts.
- J¹, J^γ: undiscounted and discounted returns of one rollout of π_{θ+σε_i} (Eq. 1).
- ĝ^es,γ = (1/N) Σ_i J^γ_i ε_i / σ (Eq. 4), computed by
  :func:`rllib_ext.common.blackbox.es_gradient.es_gradient`; ĝ^es,1 is the same with J¹.
- ĝ^pg,γ_i: the policy-gradient estimate of ∇J^γ at θ_i from that rollout (Eq. 5, computed on
  the env runner, see :mod:`rllib_ext.algorithms.cves.cves_env_runner`); ĝ^re,γ = mean_i ĝ^pg,γ_i
  (Eq. 7).
- X = ĝ^es,1, Y = ĝ^es,γ − ĝ^re,γ (the control variate, E[Y] = 0 since both terms estimate
  ∇F^{σ,γ}, Eq. 6), and ĝ^cv = X + η ⊙ Y (Eq. 8).
- η ∈ R^d: online gradient descent on a Monte-Carlo estimate of Eq. 9,
  ∇_η V[ĝ^cv] = 2η ⊙ E[Y²] + 2E[Y ⊙ X], from all S samples (antithetic pairs) of a batch:
  (2/S)·mean_k(η⊙y_k² + y_k⊙x_k) (:func:`eta_gradient`). Its fixed point in expectation is
  η_p = −cov(X_p, Y_p)/V[Y_p] (E[Y] = 0), the per-coordinate optimum of App. A. The paper does not
  say how E[·] is estimated; the product of the batch means (one draw per update) has the same
  expectation and far more noise.
- **Baseline** (``pg_baseline``; not in the paper): ĝ^pg,γ weights ∇log π(a_t|s_t) by
  w_t(γ) − b_t(γ), with b_t(γ) the mean w_t(γ) of the *previous* batch's episodes (zero reward
  after an episode's end), computed by the driver for the current γ's and shipped with θ_u. It is
  independent of the episode it is used in, so E[b_t ∇log π(a_t|s_t)] = 0: ĝ^pg stays unbiased
  and the control variate keeps E[Y] = 0. Eq. 5 has none; without it, once η → −1 the estimator's
  noise is REINFORCE's, whose weights on Pendulum are large negative rewards-to-go.
- γ = 1 − exp(φ) (§3.2, App. C.1); φ is adapted by ES on F(γ) = Σ_i [ĝ^cv(γ)]_i² (Eq. 13) with
  N_φ perturbations φ + σ_φ ε_j, here antithetic pairs (so the constant part of F cancels exactly).

**Return normalization** (App. C.2; ``shaping``):

- ``"standardize"`` (default, App. C.2): X uses J̃¹ = (J¹ − mean J¹)/σ(J¹). "We divide the original
  control variate by σ(J)": Y = [ĝ^es,γ(J^γ − mean J^γ) − ĝ^re,γ] / σ(J¹). Both terms are divided
  by the *same* σ(J¹) (the paper's J is the return of the ES estimate, J¹), so ĝ^cv is Eq. 8
  divided as a whole by σ(J¹) and the optimal η is the η of the unnormalized estimator. Subtracting
  the batch mean of J^γ is the ES baseline: exact with antithetic pairs (it cancels), otherwise
  the usual O(1/N) approximation (Salimans et al. 2017).
- ``"centered_rank"`` (§3.2 "Practical considerations"): X is computed from the centered ranks of
  J¹; Y as for ``"standardize"``.
- ``"none"``: raw Eq. 4, 7, 8 (no baseline, no scaling): App. A's analysis and the tests.

**Per-sample form.** An estimate is a mean over *samples*: single rows, or the antithetic pairs
(2k, 2k + 1) of a sampler batch, which are the independent draws. :func:`cv_terms` returns the
per-sample terms x_k, y_k whose means are X and Y; from them :func:`cv_estimate` also gives the
batch estimates of V[ĝ^es,1] and V[ĝ^cv] (Σ_p sample variance / #samples; for coupled samplers,
orthogonal/QMC, this ignores the coupling between samples) and the correlation of X and Y.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.shaping import shape_returns

__all__ = [
    "CVEstimate",
    "cv_estimate",
    "cv_terms",
    "discounted_weights",
    "eta_gradient",
    "gamma_of",
    "mean_reward_sequence",
    "optimal_eta",
    "phi_gradient",
    "phi_of",
    "phi_perturbations",
    "return_scale",
    "subtract_baseline",
    "update_eta",
    "update_phi",
]

SHAPINGS = ("standardize", "centered_rank", "none")
#: ĝ^pg's baseline (module docstring, "Baseline"): none (Eq. 5 as printed) or the previous batch's.
PG_BASELINES = ("previous_batch", "none")
# γ = 1 − exp(φ) is kept in [GAMMA_MIN, gamma_max] (φ clipped): the PG terms need γ < 1 to stay
# stable (§3.2), and a γ far below the horizon's scale makes the control variate useless.
# GAMMA_MAX bounds the ``gamma_max`` setting (default DEFAULT_GAMMA_MAX, see CVESConfig).
GAMMA_MIN, GAMMA_MAX = 0.5, 0.9999
DEFAULT_GAMMA_MAX = 0.995


# ---------------------------------------------------------------------------------------------
# Discounting (Eq. 1, 5) and γ = 1 − exp(φ).
# ---------------------------------------------------------------------------------------------
def discounted_weights(rewards: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """w_t(γ) = Σ_{t' ≥ t} γ^{t'} r_{t'} for each γ: the weights of ∇log π(a_t|s_t) in ĝ^pg,γ.

    This is the exact policy gradient of J^γ = E[Σ_t γ^t r_t] (Eq. 1): γ^t times the
    *discounted* reward-to-go Σ_{t'≥t} γ^{t'−t} r_{t'}. The printed Eq. 5 weights the
    *undiscounted* reward-to-go by γ^t, which is not an unbiased estimate of ∇J^γ for γ < 1 (both
    agree at γ = 1); the control variate needs E[ĝ^re,γ] = E[ĝ^es,γ] = ∇F^{σ,γ} (Eq. 6), so we
    use the exact form. ``w_0(γ)`` is the discounted return J^γ.

    Args:
        rewards: r_0 … r_{T−1} of one episode.
        gammas: The discount factors, shape [m].

    Returns:
        float64 array [m, T].
    """
    r = np.asarray(rewards, dtype=np.float64)
    g = np.asarray(gammas, dtype=np.float64).reshape(-1, 1)
    discounted = g ** np.arange(len(r)) * r  # γ^{t'} r_{t'}
    return np.cumsum(discounted[:, ::-1], axis=1)[:, ::-1].copy()  # Σ_{t' ≥ t}; a copy: positive strides for torch


def mean_reward_sequence(rewards: np.ndarray) -> np.ndarray:
    """The mean over episodes of r_t (zero after an episode's end), trailing zeros dropped.

    Args:
        rewards: One row per episode, zero-padded to a common length, shape [n, T].

    Returns:
        float64 array [T'] (T' ≤ T), from which :func:`discounted_weights` gives the mean
        w_t(γ) over the episodes for any γ (the weights are linear in the rewards).
    """
    mean = np.asarray(rewards, dtype=np.float64).reshape(len(rewards), -1).mean(0)
    nonzero = np.flatnonzero(mean)
    return mean[: nonzero[-1] + 1 if nonzero.size else 0]


def subtract_baseline(weights: np.ndarray, baseline: np.ndarray | None) -> np.ndarray:
    """w_t(γ_j) − b_t(γ_j) over an episode's T steps; b_t = 0 where the baseline is shorter.

    Args:
        weights: w_t(γ_j) of the episode, shape [m, T] (:func:`discounted_weights`).
        baseline: b_t(γ_j), shape [m, T_b], or None (no baseline).
    """
    if baseline is None:
        return weights
    baseline = np.asarray(baseline, dtype=np.float64)
    steps = min(weights.shape[1], baseline.shape[1])
    out = weights.copy()
    out[:, :steps] -= baseline[:, :steps]
    return out


def gamma_of(phi: float) -> float:
    """γ = 1 − exp(φ) (paper 002 App. C.1)."""
    return 1.0 - math.exp(phi)


def phi_of(gamma: float) -> float:
    """φ = log(1 − γ), the inverse of :func:`gamma_of`."""
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"γ must be in (0, 1) to be written as 1 − exp(φ), got {gamma}")
    return math.log(1.0 - gamma)


# ---------------------------------------------------------------------------------------------
# The estimator (Eq. 4, 7, 8 with App. C.2).
# ---------------------------------------------------------------------------------------------
def return_scale(j1: np.ndarray, shaping: str) -> float:
    """σ(J¹), the std of the batch's undiscounted returns (App. C.2); 1 for ``"none"``.

    A batch of equal returns has σ(J¹) = 0: it is given scale 1 (its standardized returns are 0
    anyway, and its control variate is then used unscaled rather than divided by zero).
    """
    if shaping == "none":
        return 1.0
    j1 = np.asarray(j1, dtype=np.float64)
    std = float(j1.std())
    return std if std > 1e-8 * max(1.0, float(np.abs(j1).max(initial=0.0))) else 1.0


def cv_terms(
    j1: np.ndarray,
    j_gamma: np.ndarray,
    g_pg: np.ndarray,
    eps: np.ndarray,
    sigma: float,
    shaping: str = "standardize",
    group: int = 1,
):
    """Per-sample terms x_k, y_k^(j) whose means over samples are X = ĝ^es,1 and Y^(j).

    Args:
        j1: J¹ of each row, shape [n].
        j_gamma: J^{γ_j} of each row for m discount factors γ_0 … γ_{m−1}, shape [n, m].
        g_pg: ĝ^pg,γ_j of each row, shape [n, m, d] (Eq. 5).
        eps: The rows ε_i of the sampler batch, shape [n, d].
        sigma: σ.
        shaping: ``"standardize"`` | ``"centered_rank"`` | ``"none"`` (module docstring).
        group: Rows per independent sample: 2 for antithetic pairs (rows 2k, 2k + 1), else 1.

    Returns:
        (x [n/group, d], y [n/group, m, d], scale σ(J¹)). ``x.mean(0)`` is
        ``es_gradient(shaped J¹, eps, sigma)`` (Eq. 4); ``y.mean(0)[j]`` is
        (ĝ^es,γ_j − ĝ^re,γ_j)/σ(J¹) (Eq. 4, 7 and App. C.2).
    """
    if shaping not in SHAPINGS:
        raise ValueError(f"CVES return shaping must be one of {SHAPINGS}, got {shaping!r}")
    eps = np.asarray(eps, dtype=np.float64)
    j1 = np.asarray(j1, dtype=np.float64)
    j_gamma = np.asarray(j_gamma, dtype=np.float64).reshape(len(j1), -1)
    g_pg = np.asarray(g_pg, dtype=np.float64).reshape(len(j1), j_gamma.shape[1], eps.shape[1])
    n = len(j1)
    if eps.shape[0] != n or n % group:
        raise ValueError(f"cv_terms: {n} returns for {eps.shape[0]} rows in samples of {group}")
    scale = return_scale(j1, shaping)
    f1 = j1 if shaping == "none" else shape_returns(j1, shaping).astype(np.float64)
    f_gamma = j_gamma if shaping == "none" else (j_gamma - j_gamma.mean(0)) / scale
    # Row i contributes F_i ε_i / σ to Eq. 4 (es_gradient is the mean over rows of these).
    x_rows = f1[:, None] * eps / sigma
    y_rows = f_gamma[:, :, None] * eps[:, None, :] / sigma - g_pg / scale  # Eq. 4 − Eq. 7 per row
    x = x_rows.reshape(n // group, group, -1).mean(1)
    y = y_rows.reshape(n // group, group, *y_rows.shape[1:]).mean(1)
    return x, y, scale


@dataclasses.dataclass
class CVEstimate:
    """ĝ^cv of one batch and what the adaptation and the metrics need.

    Attributes:
        g_cv: ĝ^cv = X + η ⊙ Y^(0) (Eq. 8), shape [d].
        x: X = ĝ^es,1, shape [d].
        y: Y^(j) = ĝ^es,γ_j − ĝ^re,γ_j (scaled), shape [m, d]; j = 0 is the current γ.
        f_gamma: F(γ_j) = ‖X + η ⊙ Y^(j)‖² for j = 1 … m−1 (App. C.1), shape [m − 1].
        var_es: Batch estimate of V[ĝ^es,1] = Σ_p V[X_p].
        var_cv: Batch estimate of V[ĝ^cv] with the current η.
        corr: Mean over coordinates of the batch correlation of X_p and Y_p (nan if < 2 samples).
    """

    g_cv: np.ndarray
    x: np.ndarray
    y: np.ndarray
    f_gamma: np.ndarray
    var_es: float
    var_cv: float
    corr: float


def _batch_variance(samples: np.ndarray) -> float:
    """Σ_p V̂[mean of the samples' p-th coordinate] = Σ_p s²_p / S (nan with fewer than 2 samples)."""
    s = len(samples)
    return float(samples.var(axis=0, ddof=1).sum() / s) if s > 1 else float("nan")


def cv_estimate(x: np.ndarray, y: np.ndarray, eta: np.ndarray) -> CVEstimate:
    """ĝ^cv = ĝ^es,1 + η ⊙ (ĝ^es,γ − ĝ^re,γ) (Eq. 8) from the per-sample terms of :func:`cv_terms`.

    Args:
        x: x_k, shape [S, d].
        y: y_k^(j), shape [S, m, d].
        eta: η, shape [d].
    """
    X, Y = x.mean(0), y.mean(0)
    g_cv = X + eta * Y[0]  # Eq. (8), paper 002 §3.2
    f_gamma = ((X + eta * Y[1:]) ** 2).sum(axis=1)  # F(γ_j), App. C.1
    cv_samples = x + eta * y[:, 0]
    corr = float("nan")
    if len(x) > 1:
        xc, yc = x - X, y[:, 0] - Y[0]
        den = np.sqrt((xc**2).sum(0) * (yc**2).sum(0))
        ok = den > 0
        if ok.any():
            corr = float(((xc * yc).sum(0)[ok] / den[ok]).mean())
    return CVEstimate(g_cv, X, Y, f_gamma, _batch_variance(x), _batch_variance(cv_samples), corr)


# ---------------------------------------------------------------------------------------------
# η (Eq. 9) and φ (App. C.1, Eq. 13).
# ---------------------------------------------------------------------------------------------
def eta_gradient(x: np.ndarray, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Monte-Carlo estimate of ∇_η V[ĝ^cv] = 2η ⊙ E[Y²] + 2E[Y ⊙ X] (Eq. 9) from every sample.

    X and Y are means of S independent samples x_k, y_k (single rows, or antithetic pairs), and
    E[y] = 0, so E[Y²] = E[y²]/S and E[XY] = E[xy]/S. The estimate (2/S)·mean_k(η ⊙ y_k² + y_k ⊙ x_k)
    therefore has the expectation of the one-draw estimate 2η ⊙ Y² + 2Y ⊙ X (same α_η scale) but
    averages S products instead of one product of two means, whose S² − S cross terms are pure
    noise. With S = 1 both are the same.

    Args:
        x: Samples x_k of X = ĝ^es,1, shape [S, d] (or [d]: one draw).
        y: The same samples' y_k of the control variate Y, shape [S, d] (or [d]).
        eta: η, shape [d].
    """
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    return 2.0 * (eta * y**2 + y * x).mean(0) / len(y)  # Eq. (9), paper 002 §3.2


def update_eta(eta: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float) -> np.ndarray:
    """η ← η − α_η ∇_η V[ĝ^cv] (§3.2, "Coefficient η"), on the samples of one batch (:func:`eta_gradient`)."""
    return eta - lr * eta_gradient(x, y, eta)


def optimal_eta(x_draws: np.ndarray, y_draws: np.ndarray) -> np.ndarray:
    """Per-coordinate η_p = −cov(X_p, Y_p)/V[Y_p] from many draws of (X, Y) (App. A).

    Args:
        x_draws: Draws of X, shape [R, d].
        y_draws: The same draws of Y, shape [R, d].
    """
    xc, yc = x_draws - x_draws.mean(0), y_draws - y_draws.mean(0)
    return -(xc * yc).mean(0) / np.maximum((yc**2).mean(0), 1e-300)


def phi_perturbations(phi: float, eps_phi: np.ndarray, sigma_phi: float) -> np.ndarray:
    """γ_j = 1 − exp(φ + σ_φ ε_j): the discount factors whose F(γ_j) App. C.1 evaluates."""
    return 1.0 - np.exp(phi + sigma_phi * np.asarray(eps_phi, dtype=np.float64).reshape(-1))


def phi_gradient(f_gamma: np.ndarray, eps_phi: np.ndarray, sigma_phi: float) -> float:
    """ĝ_φ = (1/N_φ) Σ_j F(γ_j) ε_j / σ_φ (Eq. 13, applied to φ as App. C.1 does)."""
    eps_phi = np.asarray(eps_phi, dtype=np.float64).reshape(-1, 1)
    return float(es_gradient(f_gamma, eps_phi, sigma_phi)[0])  # Eq. (13), paper 002 App. C.1


def update_phi(phi: float, grad: float, lr: float, gamma_max: float = DEFAULT_GAMMA_MAX) -> float:
    """φ ← φ − α_φ ĝ_φ (descent on the variance), kept so that γ ∈ [GAMMA_MIN, gamma_max]."""
    lo, hi = phi_of(gamma_max), phi_of(GAMMA_MIN)
    return float(np.clip(phi - lr * grad, lo, hi))
