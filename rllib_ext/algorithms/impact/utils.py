"""IMPACT's formulas as plain torch functions (paper 004, §3.1, §4.1, Algorithm 1 line 8).

Names follow the paper:
    ``pi_theta``   the learner policy being trained (πθ),
    ``pi_target``  the target network's policy (πtarget), evaluated once per batch (k = 0),
    ``pi_worker``  the behaviour policy of the worker that sampled the batch (πworker_i),
    ``rho``        target-worker clipping ρ ≥ 1 (``target_worker_clipping``), ``beta`` = 1/ρ,
    ``lam``        λ of V-trace GAE-λ (``lambda_``), ``c_bar`` / ``rho_bar`` the V-trace
                   truncation levels c̄ and ρ̄.
All tensors are time-major [T, B] (as RLlib's ``vtrace_torch``) and work on log-probabilities.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rllib_ext.algorithms.impact.impact import SURROGATE_RATIOS, VALUE_TARGETS


def vtrace_gae_lambda(
    *,
    target_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_values: torch.Tensor,
    lam: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> torch.Tensor:
    """V-trace GAE-λ advantages (paper 004 §3.1, after Han & Sung 2019).

    A_t = Σ_{i≥t} (λγ)^{i-t} (Π_{j=t}^{i-1} c_j) δ_i V, with the importance-sampled TD error
    δ_i V = ρ_i (r_i + γ V(s_{i+1}) − V(s_i)), ρ_i = min(ρ̄, π_target/π_worker) and
    c_j = min(c̄, π_target/π_worker). Computed backwards as A_t = δ_t + λ γ_t c_t A_{t+1}
    (γ_t = ``discounts``, which is 0 across terminal steps).

    Special cases (tested): π_target = π_worker gives GAE-λ (Schulman et al. 2015b); λ = 1 with
    ρ̄ = c̄ gives V-trace's v_s − V(s_t), which equals V-trace's policy-gradient advantage
    ρ_t (r_t + γ v_{t+1} − V(s_t)) when ρ̄ = c̄ (as returned by RLlib's ``vtrace_torch``).

    Args:
        target_logp: log π_target(a_t|s_t), [T, B].
        behaviour_logp: log π_worker(a_t|s_t), [T, B].
        discounts: γ_t, [T, B].
        rewards: r_t, [T, B].
        values: V(s_t), [T, B] (treated as constants).
        bootstrap_values: V(s_T), [B].
        lam: λ in [0, 1].
        rho_bar: Truncation ρ̄ of the importance weight on δ.
        c_bar: Truncation c̄ of the trace coefficients.

    Returns:
        The advantages, [T, B], without gradient.
    """
    with torch.no_grad():
        ratio = torch.exp(target_logp - behaviour_logp)
        rhos = torch.clamp(ratio, max=rho_bar)
        cs = torch.clamp(ratio, max=c_bar)
        values_tp1 = torch.cat([values[1:], bootstrap_values.unsqueeze(0)], dim=0)
        deltas = rhos * (rewards + discounts * values_tp1 - values)
        advantages = torch.empty_like(deltas)
        acc = torch.zeros_like(bootstrap_values)
        coeff = lam * discounts * cs
        for t in range(deltas.shape[0] - 1, -1, -1):
            acc = deltas[t] + coeff[t] * acc
            advantages[t] = acc
    return advantages


def value_targets_and_advantages(
    *,
    value_target: str,
    lam: float,
    values: torch.Tensor,
    **trace_inputs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The critic's targets and the policy's A^{V-GAE} (paper 004 Algorithm 1 line 8, §3.1).

    The advantage is :func:`vtrace_gae_lambda` with the given λ. The critic target V̂_{V-GAE}
    of Algorithm 1 line 8 is, with ``value_target``:

    * ``"v_gae"``: V(s_t) + A^{V-GAE}_t, the off-policy λ-return consistent with the advantage
      (with π_target = π_worker it is GAE's λ-return, the target of PPO's critic);
    * ``"vtrace"``: V(s_t) + A^{V-GAE}_t at λ = 1, which is IMPALA's V-trace target v_s
      (Σ γ^{i−t} Π c_j ρ_i δ_i). RLlib's ``vtrace_torch`` computes the same with c̄ fixed
      at 1; this recursion honours c̄ (the tests compare the two at c̄ = 1).

    Args:
        value_target: "v_gae" or "vtrace".
        lam: λ of the advantage.
        values: V(s_t), [T, B] (treated as constants).
        **trace_inputs: The other arguments of :func:`vtrace_gae_lambda`.

    Returns:
        ``(value_targets, advantages)``, both [T, B] and without gradient.
    """
    advantages = vtrace_gae_lambda(lam=lam, values=values, **trace_inputs)
    if value_target == "v_gae" or lam == 1.0:
        returns_minus_v = advantages
    elif value_target == "vtrace":
        returns_minus_v = vtrace_gae_lambda(lam=1.0, values=values, **trace_inputs)
    else:
        raise ValueError(f"value_target must be one of {VALUE_TARGETS}, got {value_target!r}")
    return values.detach() + returns_minus_v, advantages


def surrogate_log_ratio(
    kind: str,
    *,
    logp_theta: torch.Tensor,
    logp_target: torch.Tensor,
    logp_worker: torch.Tensor,
    rho: float,
) -> torch.Tensor:
    """log of the surrogate ratio of the ablation in paper 004 §4.1.

    R1 = πθ / πtarget, R2 = πθ / πworker, and IMPACT's
    R3 = πθ / max(πtarget, β πworker) with β = 1/ρ (§3.1, J_AIS; Algorithm 1 line 8), which
    equals min(πworker/πtarget, ρ) · πθ/πworker (Appendix E).

    Args:
        kind: "r1", "r2" or "r3".
        logp_theta: log πθ(a|s) (carries the gradient).
        logp_target: log πtarget(a|s).
        logp_worker: log πworker(a|s).
        rho: ρ ≥ 1 (only used by R3).

    Returns:
        log R, same shape as the inputs.
    """
    if kind == "r1":
        return logp_theta - logp_target
    if kind == "r2":
        return logp_theta - logp_worker
    if kind == "r3":
        # log max(πtarget, β πworker) = max(log πtarget, log πworker − log ρ).
        return logp_theta - torch.maximum(logp_target, logp_worker - math.log(rho))
    raise ValueError(f"surrogate_ratio must be one of {SURROGATE_RATIOS}, got {kind!r}")


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_param: float) -> torch.Tensor:
    """PPO's ε-clipped surrogate min(R·A, clip(R, 1−ε, 1+ε)·A) (paper 004 §2.1, §4.1), per step."""
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1.0 - clip_param, 1.0 + clip_param) * advantages)


def adapt_kl_coeff(kl_coeff: float, kl: float, kl_target: float) -> float:
    """Adaptive KL penalty coefficient (PPO, Schulman et al. 2017 §4; RLlib PPO's rule).

    η ← 1.5 η if KL > 2 · kl_target; η ← 0.5 η if KL < 0.5 · kl_target; else unchanged.
    """
    if kl > 2.0 * kl_target:
        return kl_coeff * 1.5
    if kl < 0.5 * kl_target:
        return kl_coeff * 0.5
    return kl_coeff


def masked_mean(x: torch.Tensor, mask: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the entries where ``mask`` is 1 (``count`` = mask.sum()).

    NaN-safe: masked entries are replaced by 0 rather than multiplied by 0 (0·inf = NaN, and a
    phantom step pairs a_{T−1} with s_T under three policies, so its ratio can overflow), and a
    fully masked batch has mean 0 (count clamped to 1) instead of 0/0.
    """
    return torch.sum(torch.where(mask > 0, x, torch.zeros_like(x))) / torch.clamp(count, min=1.0)


def masked_standardize(x: torch.Tensor, mask: torch.Tensor, count: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x − mean) / (std + eps) with mean and (population) std over the entries where ``mask`` is 1."""
    mean = masked_mean(x, mask, count)
    std = torch.sqrt(masked_mean(torch.square(x - mean), mask, count))
    return (x - mean) / (std + eps)


def ratio_stats(name: str, log_ratio: torch.Tensor, mask: torch.Tensor, count: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean and max of exp(log_ratio) over the valid (mask = 1) steps, for logging."""
    with torch.no_grad():
        r = torch.exp(log_ratio)
        return {
            f"{name}_mean": masked_mean(r, mask, count),
            f"{name}_max": torch.max(torch.where(mask > 0, r, torch.zeros_like(r))),
        }
