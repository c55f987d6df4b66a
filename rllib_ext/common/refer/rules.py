"""The ReF-ER rules of paper 003 (Novati & Koumoutsakos 2019, §3) as pure functions and one class.

Names follow the paper:

* ρ_t = π^w(a_t|s_t) / μ_t(a_t|s_t): the importance weight of a stored step (§2);
* c_max: the clipping bound; a step is *near-policy* iff 1/c_max < ρ_t < c_max (Rule 1);
* n_far / N: the fraction of far-policy steps in a replay memory of N steps;
* D: the tolerated far-policy fraction; β ∈ [0, 1] the weight of the objective against the
  penalty (Rule 2, Eq. 10-12);
* C, A, η: the clipping constant, the annealing constant and the initial learning rate of
  Eq. (13).

Replay modes (``REPLAY_MODES``): ``"refer"`` (Rules 1 and 2), ``"refer1"`` (Rule 1 only),
``"refer2"`` (Rule 2 only), ``"er"`` (plain uniform replay) and ``"per"`` (rank-based
prioritized replay, Schaul et al. 2016); the last two use neither rule.

The torch parts (:func:`diag_gaussian_log_rho`, :func:`diag_gaussian_kl`,
:func:`refer_loss`) work on any float tensors; they are what the three learners' losses call.
"""

from __future__ import annotations

import dataclasses
from typing import Any, overload

import numpy as np
import torch

__all__ = [
    "REPLAY_MODES",
    "ReFER",
    "anneal",
    "beta_update",
    "c_max_schedule",
    "diag_gaussian_kl",
    "diag_gaussian_log_rho",
    "near_policy_mask",
    "refer_loss",
]

#: mode -> (uses Rule 1, uses Rule 2).
REPLAY_MODES: dict[str, tuple[bool, bool]] = {
    "refer": (True, True),
    "refer1": (True, False),
    "refer2": (False, True),
    "er": (False, False),
    "per": (False, False),
}

LOG_2PI = float(np.log(2.0 * np.pi))


def diag_gaussian_log_rho(
    actions: torch.Tensor,
    pi_mean: torch.Tensor,
    pi_std: torch.Tensor,
    mu_mean: torch.Tensor,
    mu_std: torch.Tensor,
) -> torch.Tensor:
    """log ρ = log π(a|s) − log μ(a|s) for diagonal Gaussians (§2), summed over action dims.

    The policies are sampled as normals truncated at ±3σ (App. A); the truncation constant is
    the same for every σ, so it cancels in ρ for actions inside both supports, and ρ is
    computed from the untruncated densities (as smarties does).

    Args:
        actions: a_t, shape [B, d_A].
        pi_mean, pi_std: Mean and standard deviation of π^w(·|s_t), [B, d_A].
        mu_mean, mu_std: Mean and standard deviation of the stored behaviour μ_t, [B, d_A].

    Returns:
        log ρ_t, shape [B].
    """
    z_pi = (actions - pi_mean) / pi_std
    z_mu = (actions - mu_mean) / mu_std
    return (-0.5 * (z_pi**2 - z_mu**2) - torch.log(pi_std) + torch.log(mu_std)).sum(-1)


def diag_gaussian_kl(
    mu_mean: torch.Tensor, mu_std: torch.Tensor, pi_mean: torch.Tensor, pi_std: torch.Tensor
) -> torch.Tensor:
    """D_KL(μ_t ‖ π^w(·|s_t)) of two diagonal Gaussians (the penalty of Eq. 11), shape [B].

    D_KL = Σ_i [ log(σ_π,i/σ_μ,i) + (σ_μ,i² + (m_μ,i − m_π,i)²) / (2 σ_π,i²) − 1/2 ].
    """
    var_ratio = (mu_std / pi_std) ** 2
    return (0.5 * (var_ratio + ((mu_mean - pi_mean) / pi_std) ** 2 - 1.0) - torch.log(mu_std / pi_std)).sum(-1)


@overload
def near_policy_mask(rho: torch.Tensor, c_max: float) -> torch.Tensor: ...
@overload
def near_policy_mask(rho: np.ndarray, c_max: float) -> np.ndarray: ...
def near_policy_mask(rho: torch.Tensor | np.ndarray, c_max: float) -> torch.Tensor | np.ndarray:
    """Rule 1 (§3): True where 1/c_max < ρ < c_max (near-policy), False for far-policy steps.

    Works on numpy arrays and torch tensors alike.
    """
    return (rho > 1.0 / c_max) & (rho < c_max)


def c_max_schedule(C: float, A: float, t: float) -> float:
    """c_max(t) = 1 + C / (1 + A·t), Eq. (13), paper 003 §3."""
    return 1.0 + C / (1.0 + A * t)


def anneal(eta: float, A: float, t: float) -> float:
    """η(t) = η / (1 + A·t), Eq. (13), paper 003 §3."""
    return eta / (1.0 + A * t)


def beta_update(beta: float, far_fraction: float, D: float, rate: float) -> float:
    """One step of Eq. (12): β ← (1−η)β if n_far/N > D, else (1−η)β + η.

    Fixed points: β = 0 while the far-policy fraction stays above D, β = 1 while it stays at
    or below D.

    Args:
        beta: Current β ∈ [0, 1].
        far_fraction: n_far / N of the replay memory.
        D: The tolerated far-policy fraction, in (0, 1).
        rate: The step η of Eq. (12): the paper uses the network's learning rate; smarties a
            fixed 1e-4 (paper era) or 0.1·B/N (today) (see :class:`ReFER`).
    """
    if far_fraction > D:
        return (1.0 - rate) * beta
    return (1.0 - rate) * beta + rate


def refer_loss(
    loss_per_sample: torch.Tensor,
    kl_per_sample: torch.Tensor,
    near: torch.Tensor,
    beta: float,
    *,
    rule1: bool,
    rule2: bool,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The scalar loss whose gradient is the ReF-ER estimate ĝ^ReF-ER of Eq. (10).

    With ĝ = −∇L (the algorithm's ascent direction) and ĝ^D = ∇D_KL (Eq. 11), Eq. (10) is the
    negative gradient of  β·mean_i[near_i · L_i] + (1−β)·mean_i[D_KL,i]  over the B samples:
    far-policy samples keep only the penalty term (Rule 1).

    Args:
        loss_per_sample: L_i, the algorithm's per-sample loss (off-PG + value loss for V-RACER,
            Q-learning or DPG loss for DDPG and NAF), shape [B].
        kl_per_sample: D_KL(μ_i ‖ π^w(·|s_i)), shape [B] (ignored without Rule 2).
        near: Boolean near-policy mask of Rule 1, shape [B] (ignored without Rule 1).
        beta: β of Eq. (10); without Rule 2 the loss is L alone (β = 1).
        rule1: Whether Rule 1 zeroes the far samples' gradients.
        rule2: Whether the penalty of Rule 2 is added.
        weights: Optional per-sample importance weights (PER), shape [B].

    Returns:
        The scalar loss.
    """
    per_sample = loss_per_sample
    if weights is not None:
        per_sample = per_sample * weights
    if rule1:
        per_sample = torch.where(near, per_sample, torch.zeros_like(per_sample))  # Rule 1
    if not rule2:
        return per_sample.mean()
    return beta * per_sample.mean() + (1.0 - beta) * kl_per_sample.mean()  # Eq. (10)-(11)


@dataclasses.dataclass
class ReFER:
    """The state of ReF-ER: β (Eq. 12), and c_max and η annealed with t (Eq. 13).

    η is annealed only in the ReF-ER modes (§3 anneals "ReF-ER's c_max and the NN's learning
    rate"); ``er`` and ``per`` (the paper's baselines) keep it fixed: paper 003 §5.1, "annealing
    η worsened the instability of DDPG with regular ER and PER"; paper-era smarties sets
    epsAnneal = 0 for DPG without ReF-ER (``AllLearners.h``). (Its NAF keeps annealing with ER.)

    Attributes:
        mode: One of :data:`REPLAY_MODES`.
        C: c_max(0) = 1 + C; must be > 0.
        A: Annealing constant of Eq. (13) (0 disables annealing).
        D: Tolerated far-policy fraction, in (0, 1).
        eta: Initial learning rate η of Eq. (13).
        beta_rate: Step of the β update (Eq. 12); 1e-4, fixed, as the paper-era smarties
            (today's smarties: 0.1·B/N, ≈ 1e-4 for B 256, N 2^18). None uses the annealed
            learning rate η(t) (the paper's text: "η is the NN's learning rate").
        beta: Current β (starts at 1: no penalty while the memory is near-policy).
        t: The time-step index of Eq. (13) (env steps since learning started).
    """

    mode: str = "refer"
    C: float = 4.0
    A: float = 5e-7
    D: float = 0.1
    eta: float = 1e-4
    beta_rate: float | None = 1e-4
    beta: float = 1.0
    t: int = 0

    def __post_init__(self) -> None:
        if self.mode not in REPLAY_MODES:
            raise ValueError(f"Unknown replay mode {self.mode!r}; valid are {', '.join(REPLAY_MODES)}")

    @property
    def rule1(self) -> bool:
        """Whether far-policy samples' gradients are zeroed (Rule 1)."""
        return REPLAY_MODES[self.mode][0]

    @property
    def rule2(self) -> bool:
        """Whether the D_KL penalty and the β update are active (Rule 2)."""
        return REPLAY_MODES[self.mode][1]

    @property
    def rho_clip(self) -> float | None:
        """Upper clip of ρ: 10³ for ``refer2`` (§5.3: "the results of ReF-ER-2 are obtained by
        clipping all importance weights ρ_t ← min(ρ_t, 10³)"), None otherwise."""
        return 1e3 if self.mode == "refer2" else None

    @property
    def c_max(self) -> float:
        """c_max(t), Eq. (13)."""
        return c_max_schedule(self.C, self.A, self.t)

    @property
    def anneals_lr(self) -> bool:
        """Whether η is annealed (Eq. 13): with ReF-ER, not in ``er``/``per`` (§5.1)."""
        return self.rule1 or self.rule2

    @property
    def lr(self) -> float:
        """η(t), Eq. (13); η itself in ``er``/``per`` (see :attr:`anneals_lr`)."""
        return anneal(self.eta, self.A, self.t) if self.anneals_lr else self.eta

    def update_beta(self, far_fraction: float) -> float:
        """Eq. (12) with the current rate; β stays 1 without Rule 2. Returns the new β."""
        if self.rule2:
            rate = self.lr if self.beta_rate is None else self.beta_rate
            self.beta = beta_update(self.beta, far_fraction, self.D, rate)
        return self.beta

    def get_state(self) -> dict[str, Any]:
        """β and t (the only quantities that evolve)."""
        return {"beta": float(self.beta), "t": int(self.t)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`'s output."""
        self.beta = float(state["beta"])
        self.t = int(state["t"])
