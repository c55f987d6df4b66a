"""ARS's estimator: the top-b, reward-std-scaled finite-difference direction.

Mania, Guy, Recht (2018), "Simple random search provides a competitive approach to reinforcement
learning" (arXiv:1803.07055; not in ``../shared/papers``), Algorithm 2 (ARS, versions V1, V1-t,
V2, V2-t). Names follow the paper:

- M (here the flat θ), ν the exploration noise (``noise_stdev``), δ_k ∈ R^d with i.i.d. standard
  normal entries, k = 1..N (``num_directions``), b ≤ N the directions used (``top_directions``).
- r(π_{j,k,±}): the returns of the two policies M_j ± ν·δ_k (step 5).
- Step 6: sort the directions by max{r(π_{j,k,+}), r(π_{j,k,−})}; δ_(k) is the k-th largest.
- Step 7: M_{j+1} = M_j + α/(b·σ_R) Σ_{k=1..b} [r(π_{j,(k),+}) − r(π_{j,(k),−})] δ_(k), with σ_R
  the standard deviation of the 2b returns used in the update.

:func:`ars_gradient` returns the ascent direction ĝ = 1/(b·σ_R) Σ_{k≤b} (r⁺_(k) − r⁻_(k)) δ_(k), so
that one ``sgd`` step with learning rate α (θ ← θ + α·ĝ, :mod:`rllib_ext.optim.sgd`) is exactly
step 7. Unlike ES (paper 000 Eq. 8) there is no 1/ν: δ is the unit-variance direction, ν only
scales the perturbation the runners evaluate (θ ± ν·δ).

Batch layout: the rows of an ``antithetic`` sampler batch (:mod:`rllib_ext.common.blackbox.samplers`),
row 2k = +δ_k and row 2k + 1 = −δ_k, with one return per row in the same order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ars_gradient"]

# σ_R below this fraction of the returns' scale: the selected returns are all equal (up to
# rounding), every r⁺ − r⁻ is 0, and the step is 0 rather than 0/0 (the authors' code would
# divide by 0; RLlib's old ARS skipped the division).
_STD_FLOOR = 1e-8


def ars_gradient(returns: np.ndarray, eps: np.ndarray, top_b: int) -> tuple[np.ndarray, dict[str, float]]:
    """ĝ = 1/(b·σ_R) Σ_{k≤b} (r⁺_(k) − r⁻_(k)) δ_(k) (ARS, Algorithm 2, steps 6–7).

    Args:
        returns: The 2N returns in row order: returns[2k] = r(θ + νδ_k), returns[2k+1] =
            r(θ − νδ_k).
        eps: The 2N rows of the antithetic batch, [2N, d]: eps[2k] = δ_k, eps[2k+1] = −δ_k.
        top_b: b, the number of directions kept (1 ≤ b ≤ N); b = N is ARS V1/V2, b < N the
            "-t" versions.

    Returns:
        (ĝ, shape [d], in ``eps``'s floating dtype; metrics: ``ars_sigma_r`` (σ_R),
        ``ars_selected_fraction`` (b/N), ``ars_selected_return_mean`` (mean of the 2b returns
        used), ``ars_cutoff_return`` (max(r⁺, r⁻) of the b-th direction), ``ars_zero_std_step``
        (1 when σ_R ≈ 0 made the step 0)).

    Raises:
        ValueError: Shapes that are not 2N returns and 2N antithetic rows, or b outside [1, N].
    """
    r = np.asarray(returns, dtype=np.float64)
    eps = np.asarray(eps)
    if eps.ndim != 2 or r.shape != (eps.shape[0],) or r.size == 0 or r.size % 2:
        raise ValueError(f"ars_gradient: need 2N returns and 2N rows of eps (N >= 1), got {r.shape} and {eps.shape}")
    n = r.size // 2
    if isinstance(top_b, bool) or int(top_b) != top_b or not 1 <= top_b <= n:
        raise ValueError(f"ars_gradient: top_b (b) must be an integer in [1, N={n}], got {top_b!r}")
    if not np.array_equal(eps[1::2], -eps[0::2]):
        raise ValueError("ars_gradient: eps must be antithetic pairs (row 2k+1 == -row 2k)")
    b = int(top_b)
    pairs = r.reshape(n, 2)  # [:, 0] = r⁺, [:, 1] = r⁻
    # Step 6: rank directions by max(r⁺, r⁻); ties keep the lower direction index (stable sort).
    order = np.argsort(-pairs.max(axis=1), kind="stable")[:b]
    used = pairs[order]
    sigma_r = float(used.std())  # σ_R: (population) std of the 2b returns used (step 7)
    info = {
        "ars_sigma_r": sigma_r,
        "ars_selected_fraction": b / n,
        "ars_selected_return_mean": float(used.mean()),
        "ars_cutoff_return": float(used[-1].max()),
        "ars_zero_std_step": 0.0,
    }
    out_dtype = eps.dtype if np.issubdtype(eps.dtype, np.floating) else np.float64
    if sigma_r <= _STD_FLOOR * max(1.0, float(np.abs(used).max())):
        info["ars_zero_std_step"] = 1.0
        return np.zeros(eps.shape[1], dtype=out_dtype), info
    deltas = eps[0::2][order].astype(np.float64)  # δ_(1) … δ_(b)
    g = (used[:, 0] - used[:, 1]) @ deltas / (b * sigma_r)  # step 7 (without α)
    return g.astype(out_dtype), info
