"""The ES gradient estimator of paper 000 Eq. (9), shared by ES_EXT and CVES_EXT."""

from __future__ import annotations

import numpy as np

__all__ = ["es_gradient", "es_gradient_antithetic"]


def es_gradient(returns: np.ndarray, eps: np.ndarray, sigma: float) -> np.ndarray:
    """ĝ = (1/(σN)) Σ_i F_i ε_i, the ES estimate of ∇J(θ) (paper 000 Eq. 9; paper 002 §2).

    Works for every sampler of :mod:`rllib_ext.common.blackbox.samplers`: pass the whole batch
    (``sampler.sample(seed, n)``) and one (shaped) return per row. On the antithetic layout
    (rows 2k, 2k+1 = ε_k, −ε_k) it equals the pairwise form of :func:`es_gradient_antithetic`
    with N = n/2 pairs.

    This is an *ascent* direction. torch optimizers minimize, so set ``param.grad = -ĝ``
    before ``optimizer.step()``.

    Args:
        returns: F_i, shape [N]: the (shaped) returns R(θ + σε_i).
        eps: ε_i, shape [N, d].
        sigma: σ > 0, the perturbation scale of α = θ + σε (Eq. 7).

    Returns:
        ĝ, shape [d], in ``eps``'s floating dtype (float32 for the samplers).
    """
    F = np.asarray(returns, dtype=np.float64)
    eps = np.asarray(eps)
    if eps.ndim != 2 or F.shape != (eps.shape[0],):
        raise ValueError(f"es_gradient: need returns [N] and eps [N, d], got {F.shape} and {eps.shape}")
    if not sigma > 0:
        raise ValueError(f"es_gradient: sigma must be > 0, got {sigma}")
    g: np.ndarray = F @ eps / (sigma * len(F))  # Eq. (9), paper 000 §2.2
    return g.astype(eps.dtype if np.issubdtype(eps.dtype, np.floating) else np.float64)


def es_gradient_antithetic(
    returns_pos: np.ndarray, returns_neg: np.ndarray, eps: np.ndarray, sigma: float
) -> np.ndarray:
    """ĝ = (1/(2σN)) Σ_i (F⁺_i − F⁻_i) ε_i over N antithetic pairs (Salimans et al. 2017).

    F⁺_i = R(θ + σε_i), F⁻_i = R(θ − σε_i). The same number as :func:`es_gradient` on the 2N
    rows (ε_i, −ε_i); an ascent direction (set ``param.grad = -ĝ`` for torch).

    Args:
        returns_pos: F⁺, shape [N].
        returns_neg: F⁻, shape [N].
        eps: The N directions ε_i, shape [N, d] (e.g. ``sampler.sample(seed, 2N)[0::2]``).
        sigma: σ > 0.

    Returns:
        ĝ, shape [d].
    """
    diff = np.asarray(returns_pos, dtype=np.float64) - np.asarray(returns_neg, dtype=np.float64)
    # (1/(2σN)) Σ (F⁺ − F⁻) ε = es_gradient over N rows with σ replaced by 2σ.
    return es_gradient(diff, eps, 2.0 * sigma)
