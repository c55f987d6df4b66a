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

#: Surrogate ratios of the §4.1 ablation: R1 = πθ/πtarget, R2 = πθ/πworker,
#: R3 = πθ/max(πtarget, β·πworker) (IMPACT); see :func:`surrogate_log_ratio`.
SURROGATE_RATIOS = ("r1", "r2", "r3")

#: Critic targets: "v_gae" = V(s_t) + A^{V-GAE}_t with the advantage's λ (Algorithm 1 line 8's
#: V̂_{V-GAE}); "vtrace" = the λ = 1 V-trace target v_s (IMPALA; the authors' APPO code); see
#: :class:`VGAETraces`.
VALUE_TARGETS = ("v_gae", "vtrace")

#: Block length W of :class:`TraceOperator` for rows longer than 2·TRACE_BLOCK steps (shorter
#: rows are one block). Per draw the operator costs T·B·W multiply-adds plus T/W − 1 sequential
#: steps and holds T·B·W numbers. Measured on the loaded 2-core machine (one thread, per draw):
#: T = 50, B = 4: one block 0.07 ms (the recursion: 0.66 ms); T = 200: W = 32 0.18 ms (2.0 ms);
#: T = 1024, B = 33: W = 16 1.5 ms, W = 32 2.1 ms, W = 64 3.4 ms (10 ms).
TRACE_BLOCK = 32


class TraceOperator:
    """The fixed linear map x ↦ A with A_t = Σ_{i≥t} (Π_{j=t}^{i−1} κ_j) x_i, per column of [T, B].

    This is the backward recursion A_t = x_t + κ_t A_{t+1} of V-trace and of V-trace GAE-λ
    (paper 004 §3.1, κ_j = λ γ_j c_j) written as a matrix. Its coefficients κ depend only on
    π_target, π_worker and the discounts, which are fixed from a batch's first draw (Algorithm 1
    line 7), so it is built once per batch and applied on each of the K draws to the new TD
    errors (which change with the critic).

    Layout: the T steps of a column are cut into blocks of W steps; within a block the map is a
    dense upper-triangular W×W matrix L (L[t, i] = Π_{j=t}^{i−1} κ_j), and block k adds
    ``carry[k, t]`` = Π_{j=t}^{W−1} κ_j times the result F_{k+1} at the first step of block
    k+1. The F_k obey the same recursion one level up, F_k = y_k[0] + carry[k, 0] F_{k+1} (y_k:
    block k's own result), so they come from a TraceOperator over the T/W blocks (``outer``),
    and so on: one batched matmul per level, log_W(T) levels, instead of T (or T/W) sequential
    steps. IMPACT's learner runs the whole train batch as one column (T = M plus one phantom
    step per chunk: 32k steps for Table 2's M), where T/W sequential steps would cost ~10 ms
    per draw. Exact up to float rounding (tests compare it with the recursion).
    """

    def __init__(self, kappa: torch.Tensor, block: int | None = None):
        """Builds the operator from κ, [T, B] (no gradient)."""
        T, B = kappa.shape
        W = block or (T if T <= 2 * TRACE_BLOCK else TRACE_BLOCK)
        W = min(W, T)
        self.T, self.W, self.num_blocks = T, W, math.ceil(T / W)
        self.pad = self.num_blocks * W - T
        with torch.no_grad():
            k = self._blocks(kappa)  # [nb, B, W]
            steps = torch.arange(W, device=kappa.device)
            upper = steps[None, :] >= steps[:, None]  # [t, j]: j ≥ t
            # P[..., t, i] = Π_{j=t}^{i} κ_j for i ≥ t (1 for i < t).
            prods = torch.cumprod(torch.where(upper, k.unsqueeze(-2), torch.ones_like(k).unsqueeze(-2)), dim=-1)
            self.matrix = torch.cat([torch.ones_like(prods[..., :1]), prods[..., :-1]], dim=-1) * upper
            self.carry = prods[..., W - 1]  # [nb, B, W]
            # F_k = y_k[0] + carry[k, 0] F_{k+1} over the blocks: the same map one level up.
            self.outer = TraceOperator(self.carry[..., 0], block) if self.num_blocks > 1 else None

    def _blocks(self, x: torch.Tensor) -> torch.Tensor:
        """[T, B] -> zero-padded [num_blocks, B, W]."""
        if self.pad:
            x = torch.cat([x, x.new_zeros((self.pad, x.shape[1]))], dim=0)
        return x.reshape(self.num_blocks, self.W, x.shape[1]).permute(0, 2, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """A = L x for x of shape [T, B] (no gradient)."""
        with torch.no_grad():
            y = torch.matmul(self.matrix, self._blocks(x).unsqueeze(-1)).squeeze(-1)  # [nb, B, W]
            if self.outer is not None:
                first = self.outer(y[..., 0])  # F_k, [nb, B]
                y[:-1] += self.carry[:-1] * first[1:].unsqueeze(-1)
            return y.permute(0, 2, 1).reshape(self.num_blocks * self.W, -1)[: self.T]


class VGAETraces:
    """Per-batch V-trace GAE-λ (paper 004 §3.1) and the critic target of Algorithm 1 line 8.

    A_t = Σ_{i≥t} (λγ)^{i-t} (Π_{j=t}^{i-1} c_j) δ_i V, with the importance-sampled TD error
    δ_i V = ρ_i (r_i + γ V(s_{i+1}) − V(s_i)), ρ_i = min(ρ̄, π_target/π_worker) and
    c_j = min(c̄, π_target/π_worker); equivalently A_t = δ_t + λ γ_t c_t A_{t+1} (γ_t =
    ``discounts``, 0 across terminal steps). Everything but V is fixed for a batch from its first
    draw on, so this object holds ρ, γ_t, r and the :class:`TraceOperator` of κ = λγc, and each
    call only forms δ from the current values and applies the operator.

    The critic target V̂_{V-GAE} (``value_target``):

    * ``"v_gae"``: V(s_t) + A^{V-GAE}_t, the off-policy λ-return consistent with the advantage
      (with π_target = π_worker it is GAE's λ-return, the target of PPO's critic);
    * ``"vtrace"``: V(s_t) + A^{V-GAE}_t at λ = 1, which is IMPALA's V-trace target v_s
      (Σ γ^{i−t} Π c_j ρ_i δ_i). RLlib's ``vtrace_torch`` computes the same with c̄ fixed at 1;
      this honours c̄ (the tests compare the two at c̄ = 1).

    Special cases (tested): π_target = π_worker gives GAE-λ (Schulman et al. 2015b); λ = 1 with
    ρ̄ = c̄ gives V-trace's v_s − V(s_t), which equals V-trace's policy-gradient advantage
    ρ_t (r_t + γ v_{t+1} − V(s_t)) when ρ̄ = c̄ (as returned by RLlib's ``vtrace_torch``).

    Args:
        target_logp: log π_target(a_t|s_t), [T, B].
        behaviour_logp: log π_worker(a_t|s_t), [T, B].
        discounts: γ_t, [T, B].
        rewards: r_t, [T, B].
        lam: λ in [0, 1].
        rho_bar: Truncation ρ̄ of the importance weight on δ.
        c_bar: Truncation c̄ of the trace coefficients.
        value_target: "v_gae" or "vtrace".
        valid: Optional [T, B] mask; δ is 0 where it is 0 (RLlib's phantom and padding steps),
            so such a step passes nothing back to the step before it.
    """

    def __init__(
        self,
        *,
        target_logp: torch.Tensor,
        behaviour_logp: torch.Tensor,
        discounts: torch.Tensor,
        rewards: torch.Tensor,
        lam: float,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
        value_target: str = "v_gae",
        valid: torch.Tensor | None = None,
    ):
        if value_target not in VALUE_TARGETS:
            raise ValueError(f"value_target must be one of {VALUE_TARGETS}, got {value_target!r}")
        with torch.no_grad():
            ratio = torch.exp(target_logp - behaviour_logp)
            self.rhos = torch.clamp(ratio, max=rho_bar)
            if valid is not None:
                self.rhos = self.rhos * valid
            self.discounts, self.rewards = discounts, rewards
            discounted_cs = discounts * torch.clamp(ratio, max=c_bar)
            self.advantage_op = TraceOperator(lam * discounted_cs)
            # V-trace's v_s needs the λ = 1 operator unless the advantage's is already that.
            self.target_op = None if value_target == "v_gae" or lam == 1.0 else TraceOperator(discounted_cs)

    def __call__(self, values: torch.Tensor, bootstrap_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(value_targets, advantages)``, both [T, B] and without gradient, for V(s_t) = ``values``
        [T, B] and V(s_T) = ``bootstrap_values`` [B]."""
        with torch.no_grad():
            values = values.detach()
            values_tp1 = torch.cat([values[1:], bootstrap_values.detach().unsqueeze(0)], dim=0)
            deltas = self.rhos * (self.rewards + self.discounts * values_tp1 - values)
            advantages = self.advantage_op(deltas)
            returns_minus_v = advantages if self.target_op is None else self.target_op(deltas)
            return values + returns_minus_v, advantages


def vtrace_gae_lambda(*, values: torch.Tensor, bootstrap_values: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """V-trace GAE-λ advantages A^{V-GAE} (paper 004 §3.1), [T, B]; arguments of :class:`VGAETraces`."""
    return VGAETraces(**kwargs)(values, bootstrap_values)[1]


def value_targets_and_advantages(
    *, values: torch.Tensor, bootstrap_values: torch.Tensor, **kwargs: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """The critic's targets V̂_{V-GAE} and A^{V-GAE} (Algorithm 1 line 8, §3.1); see :class:`VGAETraces`."""
    return VGAETraces(**kwargs)(values, bootstrap_values)


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
