"""CVES's env runner: one episode of π_{θ_i} → J¹, J^γ and the policy gradient ĝ^pg,γ at θ_i.

Paper 002 §3.1 (``../shared/papers/002_0511cdacd6792c57.txt``): the reparameterized gradient of
the smoothed objective (Eq. 6) is estimated by averaging, over the perturbations θ_i = θ + σε_i,
a policy-gradient estimate ĝ^pg,γ at θ_i computed from the very rollout whose return ES uses
(Eq. 7). The runner therefore returns, per perturbation, besides the undiscounted return J¹:

- ``return_gamma``: J^{γ_j} = Σ_t γ_j^t r_t for each discount factor γ_j the driver published
  (the current γ first, then App. C.1's perturbed ones when γ is adapted);
- ``g_pg``: ĝ^pg,γ_j = Σ_t w_t(γ_j) ∇_θ log π_θ(a_t|s_t) at θ = θ_i, float32 [m, d], with
  w_t(γ) = Σ_{t'≥t} γ^{t'} r_{t'} = γ^t · (discounted reward-to-go): the exact, unbiased
  gradient of J^γ (Eq. 1). The printed Eq. 5 weights the *undiscounted* reward-to-go by γ^t,
  which is biased for ∇J^γ when γ < 1 (see :func:`~rllib_ext.algorithms.cves.control_variate.
  discounted_weights`). With ``pg_baseline="previous_batch"`` (the default) the weights are
  w_t(γ_j) − b_t(γ_j), b the driver's baseline from the previous batch (still unbiased; see
  :mod:`~rllib_ext.algorithms.cves.control_variate`, "Baseline"); with ``"none"``, Eq. 5's raw weights;
- ``rewards``: r_t of the episode, zero-padded to the runner's step cap (float32): the driver's
  next baseline is built from the batch's mean reward sequence.

This is the one black-box job whose result is a d-vector (m of them): 4·m·d bytes per episode
instead of ~100 (benchmarks/cves_bandwidth.py measures it).

**Clipped actions.** The policy's Box actions are clipped to the action bounds (``MLPPolicy.act``)
before the env sees them. log π is the log-likelihood of the action *the env received* under the
clipped ("censored") Gaussian: the Normal density inside the bounds, and the probability mass
log Φ((low − μ)/s) or log Φ((μ − high)/s) at a bound. The reward depends on the action only
through the clipped action, so this score function estimate is unbiased; the log-density of the
clipped action under the unclipped Gaussian, a common shortcut, would bias ĝ^pg and with it the
mean of the control variate.

**How the episode is recorded** without changing the shared episode loop: the runner's env is
wrapped in :class:`TrajectoryRecorder` (observations, actions, rewards of the current episode);
after :meth:`BlackBoxEnvRunner._run_episode` returns, the policy inputs are recomputed with the
observation filter (its normalization is fixed within a published θ_u), and one batched forward
pass plus m backward passes give the m gradients.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.cves.control_variate import discounted_weights, subtract_baseline
from rllib_ext.common.blackbox import BlackBoxEnvRunner
from rllib_ext.common.blackbox.protocol import EpisodeResult, Payload
from rllib_ext.common.policies import MLPPolicy
from rllib_ext.common.trajectory import TrajectoryRecorder


def action_log_probs(policy: MLPPolicy, obs: torch.Tensor, actions: np.ndarray) -> torch.Tensor:
    """log π_θ(a_t|s_t) of the actions the env received, shape [T] (differentiable in θ).

    Box actions: the censored Gaussian of the module docstring, summed over action dimensions.
    Discrete actions: the softmax policy's log-probabilities.
    """
    dist = policy.distribution(obs)
    if policy.discrete:
        return dist.log_prob(torch.as_tensor(np.asarray(actions), dtype=torch.long).reshape(-1))
    a = torch.as_tensor(np.asarray(actions, dtype=np.float32)).reshape(dist.loc.shape)
    low, high = policy._center - policy._half, policy._center + policy._half  # MLPPolicy.act's bounds
    inside = dist.log_prob(a)
    at_low = torch.special.log_ndtr((low - dist.loc) / dist.scale)  # log P(a_raw <= low)
    at_high = torch.special.log_ndtr((dist.loc - high) / dist.scale)  # log P(a_raw >= high)
    logp = torch.where(a <= low, at_low, torch.where(a >= high, at_high, inside))
    return logp.sum(-1)


def policy_gradients(policy: MLPPolicy, obs: np.ndarray, actions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ĝ^pg_j = Σ_t weights[j, t] ∇_θ log π_θ(a_t|s_t) for each row j (Eq. 5), θ's flat layout.

    Args:
        policy: The policy at θ_i.
        obs: Policy inputs s_t, shape [T, obs_dim].
        actions: Actions a_t as the env received them, shape [T, ...].
        weights: w_t(γ_j), shape [m, T] (:func:`~rllib_ext.algorithms.cves.control_variate.discounted_weights`).

    Returns:
        float32 array [m, d].
    """
    params = list(policy.parameters())
    logp = action_log_probs(policy, torch.as_tensor(np.asarray(obs, dtype=np.float32)), actions)
    w = torch.as_tensor(np.asarray(weights), dtype=torch.float64)
    out = np.empty((len(w), sum(p.numel() for p in params)), dtype=np.float32)
    for j in range(len(w)):
        surrogate = (w[j] * logp.double()).sum()
        grads = torch.autograd.grad(surrogate, params, retain_graph=j < len(w) - 1, allow_unused=True)
        out[j] = torch.cat(
            [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params, strict=True)]
        ).numpy()
    return out


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class CVESPayload(Payload):
    """θ_u, the filter state, the γ's whose PG terms the runners compute (None: CV off) and
    the PG baseline b_t(γ_j) for them, shape [m, T_b] (None: no baseline)."""

    gammas: np.ndarray | None = None
    pg_baseline: np.ndarray | None = None


@dataclasses.dataclass(kw_only=True, slots=True)
class CVESResult(EpisodeResult):
    """A perturbation's result with its control-variate terms, averaged over the job's episodes.

    Attributes:
        return_gamma: J^{γ_j}(θ_u + σε) per γ_j, shape [m] (Eq. 1).
        g_pg: ĝ^pg,γ_j per γ_j, shape [m, d] (Eq. 5, minus the baseline's term).
        rewards: r_t, zero-padded to the runner's step cap, shape [T_cap] (float32).
    """

    return_gamma: np.ndarray | None = None
    g_pg: np.ndarray | None = None
    rewards: np.ndarray | None = None


class CVESEnvRunner(BlackBoxEnvRunner):
    """The black-box runner that also returns J^γ and ĝ^pg,γ per perturbation (module docstring).

    The driver publishes (θ_u, filter state, γ's) — the γ's are None when the control variate is
    off, and the runner then behaves exactly like :class:`BlackBoxEnvRunner`.
    """

    result_cls = CVESResult

    def __init__(self, *, config, **kwargs):
        self.gammas: np.ndarray | None = None
        self.pg_baseline: np.ndarray | None = None
        super().__init__(config=config, **kwargs)

    @override(BlackBoxEnvRunner)
    def make_env(self):
        super().make_env()
        self.env = TrajectoryRecorder(self.env)

    @override(BlackBoxEnvRunner)
    def adopt(self, version: int, payload: CVESPayload) -> None:
        """Adopts (θ_u, filter state, γ's, PG baseline) of update ``version``."""
        self.gammas = None if payload.gammas is None else np.asarray(payload.gammas, dtype=np.float64)
        self.pg_baseline = payload.pg_baseline
        super().adopt(version, payload)

    @override(BlackBoxEnvRunner)
    def episode_extras(self) -> dict[str, Any]:
        """J^γ and ĝ^pg,γ of the episode just run (none when the control variate is off)."""
        return {} if self.gammas is None else self._pg_terms()

    def _pg_terms(self) -> dict[str, Any]:
        """J^{γ_j}, ĝ^pg,γ_j (Eq. 1, 5) and the rewards of the episode just recorded."""
        rec: TrajectoryRecorder = self.env
        steps = len(rec.rewards)
        obs = np.stack([self.obs_filter(o, record=False) for o in rec.observations[:steps]])
        weights = discounted_weights(np.asarray(rec.rewards), self.gammas)  # [m, T]
        self.sync_module()  # ∇ log π at θ_u + σε: the torch module must hold the perturbed θ
        g_pg = policy_gradients(
            self.module.policy, obs, np.stack(rec.actions), subtract_baseline(weights, self.pg_baseline)
        )
        rewards = np.zeros(max(self.step_cap, steps), dtype=np.float32)  # one length for every episode
        rewards[:steps] = rec.rewards
        return {"return_gamma": weights[:, 0], "g_pg": g_pg, "rewards": rewards}  # w_0(γ) = J^γ
