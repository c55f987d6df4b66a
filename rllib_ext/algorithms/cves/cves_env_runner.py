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
  which is biased for ∇J^γ when γ < 1 (see :func:`~rllib_ext.algorithms.cves.cves_learner.
  discounted_weights`). No baseline is subtracted (the paper's "unbiased" PG).

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

from typing import Any

import numpy as np
import torch
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.cves.cves_learner import discounted_weights
from rllib_ext.common.blackbox import BlackBoxEnvRunner, EpisodeFailed
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
        weights: w_t(γ_j), shape [m, T] (:func:`~rllib_ext.algorithms.cves.cves_learner.discounted_weights`).

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


class CVESEnvRunner(BlackBoxEnvRunner):
    """The black-box runner that also returns J^γ and ĝ^pg,γ per perturbation (module docstring).

    The driver publishes (θ_u, filter state, γ's) — the γ's are None when the control variate is
    off, and the runner then behaves exactly like :class:`BlackBoxEnvRunner`.
    """

    def __init__(self, *, config, **kwargs):
        self.gammas: np.ndarray | None = None
        self._recording = False
        self._episode_extras: list[dict[str, Any]] = []
        super().__init__(config=config, **kwargs)

    @override(BlackBoxEnvRunner)
    def make_env(self):
        super().make_env()
        self.env = TrajectoryRecorder(self.env)

    @override(BlackBoxEnvRunner)
    def publish(self, version: int, payload) -> None:
        """Adopts (θ_u, filter state, γ's) of update ``version``."""
        theta, filter_state, gammas = payload
        self.gammas = None if gammas is None else np.asarray(gammas, dtype=np.float64)
        super().publish(version, (theta, filter_state))

    @override(BlackBoxEnvRunner)
    def run_jobs(self, version: int, payload_ref, jobs: list[dict[str, Any]]) -> dict[str, Any]:
        """:meth:`BlackBoxEnvRunner.run_jobs`, each result extended by ``return_gamma``, ``g_pg``."""
        self._recording, self._episode_extras = True, []
        try:
            out = super().run_jobs(version, payload_ref, jobs)
        finally:
            self._recording = False
        # _run_episode adds one entry per episode, failed ones included, in the order of results.
        for result, extra in zip(out["results"], self._episode_extras, strict=True):
            result.update(extra)
        return out

    @override(BlackBoxEnvRunner)
    def _run_episode(self, explore: bool = False, record_obs: bool = True, seed=None):
        if not self._recording:
            return super()._run_episode(explore=explore, record_obs=record_obs, seed=seed)
        try:
            ret, length = super()._run_episode(explore=explore, record_obs=record_obs, seed=seed)
        except EpisodeFailed:
            self._episode_extras.append({})
            raise
        self._episode_extras.append({} if self.gammas is None else self._pg_terms())
        return ret, length

    def _pg_terms(self) -> dict[str, Any]:
        """J^{γ_j} and ĝ^pg,γ_j of the episode just recorded (Eq. 1, 5)."""
        rec: TrajectoryRecorder = self.env
        steps = len(rec.rewards)
        obs = np.stack([self.obs_filter(o, record=False) for o in rec.observations[:steps]])
        weights = discounted_weights(np.asarray(rec.rewards), self.gammas)  # [m, T]
        g_pg = policy_gradients(self.module.policy, obs, np.stack(rec.actions), weights)
        return {"return_gamma": weights[:, 0].tolist(), "g_pg": g_pg}  # w_0(γ) = J^γ
