"""Dynamic SGD (DSGD), Eq. (20)–(22) of paper 000 (``000_918eb0e7bb8ca864``, §4.1)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from rllib_ext.optim.base import ADAM_STEP_FRACTION, NormalizedStepOptimizer
from rllib_ext.optim.sgd import DEFAULT_LR

# Paper 000 Table 3.
DEFAULT_EPS1 = 0.03080
DEFAULT_EPS2 = 0.01026
DEFAULT_RHO = 1.035
# M, the length of the reward window of Eq. (20), is not given in paper 000 (Table 3 lists no
# M); 10 is this package's choice.
DEFAULT_M = 10
#: How ε1, ε2 move η_u: "eta0" (steps of ε·η0, the authors' code; the default) or "absolute"
#: (Eq. 21 as printed). See the class docstring, "Scales".
EPS_UNITS = ("eta0", "absolute")

_STATE_KEY = "dsgd"  # top-level key of state_dict() holding the controller


class DSGD(NormalizedStepOptimizer):
    """Dynamic SGD: a fixed-norm step whose size η_u follows the policy's reward (paper 000 §4.1).

    Each ``step()`` at update u

    1. moves θ by ``-η_u·√d·grad/‖grad‖`` (Eq. 22 with torch's minimizing sign; ``d`` and
       ``‖grad‖`` over all param groups jointly, see
       :class:`~rllib_ext.optim.base.NormalizedStepOptimizer`; a zero gradient moves nothing);
    2. then, if a reward R(θ_u) was reported for this update, sets η_{u+1} by Eq. (21):
       η_u − ε1·η0 if R(θ_u) > ρ·R_avg, else η_u + ε2·η0 (``eps_units="eta0"``; see "Scales"),
       clipped to [0.23·η0, η0], where R_avg is the mean reward of the previous M updates
       (Eq. 20), and appends R(θ_u) to that window.

    As in the paper's indices, the step of update u uses η_u, and R(θ_u) decides η_{u+1}.
    η_u starts at η0. While fewer than M rewards have been seen, R_avg averages those there are;
    with none (the first report), η is left unchanged.

    **Feeding the reward.** Call :meth:`report_reward` with R(θ_u) before each ``step()``:

    * the black-box family (ES_EXT, DFD_EXT, CVES_EXT, ARS_EXT): R̄, an exponential running mean
      (weight ``eval_return_ema`` = 0.9 on the old value) of the unperturbed evaluation returns,
      folded in as they arrive — one signal for all of them, and the one the authors' code feeds
      its controller (AechPro/distrib-rl: a running mean of occasional policy evaluations). The
      algorithms therefore require ``eval_episodes >= 1`` with DSGD
      (``BlackBoxAlgorithm.observe_evaluations``);
    * a gradient-based learner (IMPACT_EXT, TD3_EXT, ...): the mean episode return of the episodes
      finished since its last update (e.g. RLlib's ``episode_return_mean``), reported once per
      optimizer step.

    A ``step()`` without a report — or after ``report_reward(nan)``, e.g. when no episode
    finished — leaves η_u and the window unchanged. Use raw (unstandardized) returns: the rule
    compares a reward with a ratio of past rewards.

    **Rewards ≤ 0.** Eq. (21) as printed tests R(θ_u) > ρ·R_avg, which means "improved by the
    factor ρ" only for R_avg > 0; for R_avg < 0 it would accept a *lower* reward as improvement.
    This class tests R(θ_u) > R_avg + (ρ − 1)·|R_avg| instead, identical to the paper for
    R_avg ≥ 0 and, for R_avg < 0, asking for an improvement by the fraction ρ − 1 of |R_avg|
    (R_avg = 0: any positive reward counts).

    **At a return ceiling** (InvertedPendulum's 1000, a capped episode): once R(θ_u) = R_avg at
    the maximum, "R > ρ·R_avg" cannot hold, so η_u climbs back to η0 by ε2·η0 per update and stays
    there. The authors' controller does the same (no ceiling case in distrib-rl's AdaptiveOmega);
    we keep it. Its effect: the largest steps at the optimum; Adam's settled steps are ~0.23·η0√d.

    **Scales** (``eps_units``). Read as printed, Eq. (21) adds ε1, ε2 to η_u as absolute amounts
    (``"absolute"``). With Table 3's values (η0 = 0.01, ε1 = 0.0308, ε2 = 0.01026) either move then
    crosses the whole clip range [0.0023, 0.01], and η_u jumps between the two bounds on every
    noisy comparison. Table 3's ε's are exactly 0.77/25 and 0.77/75: fractions of the clip range
    [0.23, 1] of a knob ω with η_u = η0·(0.23 + 0.77ω) that moves by 1/25 towards its minimum and
    by 1/75 back, which is how the authors' public code runs it (AechPro/distrib-rl,
    ``AdaptiveOmega`` with steps_to_min 25 and steps_to_max 75). So the default ``"eta0"`` moves
    η_u by ε·η0: ~25 improving updates from η0 to 0.23·η0 and ~75 back. ``"absolute"`` keeps the
    literal reading.

    **Learning-rate schedules.** ``param_groups[g]["lr"]`` is η0, the value the rule scales from
    (RLlib's TorchLearner overwrites it each update when a schedule is configured); η_u lives in
    ``param_groups[g]["eta_u"]`` and is re-clipped to [0.23·lr, lr] whenever it is used. Each
    group has its own η_u; the reward test is shared.

    **Checkpoints.** ``state_dict()`` holds η_u (in the param groups) and, under the top-level key
    ``"dsgd"``, the reward window, a pending reward and u, as plain Python numbers;
    ``load_state_dict()`` restores them (tensors or numpy scalars are accepted there too).

    Sign convention: minimizes (steps along ``-param.grad``); ES-style callers holding an ascent
    estimate ĝ set ``param.grad = -ĝ``.

    Args:
        params: Parameters or parameter groups.
        lr: η0, the typical learning rate and upper clip of η_u (Table 3: 0.01).
        eps1: ε1 ∈ [0, 1], the decrease of η when the reward improved (Table 3: 0.03080).
        eps2: ε2 ∈ [0, 1], the increase of η otherwise (Table 3: 0.01026).
        rho: ρ > 1, the improvement factor (Table 3: 1.035).
        M: Number of past updates in R_avg (Eq. 20); not given by the paper, default 10.
        min_fraction: The 0.23 of the lower clip 0.23·η0.
        eps_units: ``"eta0"`` (ε's are fractions of η0; default) or ``"absolute"`` (Eq. 21 as printed).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = DEFAULT_LR,
        eps1: float = DEFAULT_EPS1,
        eps2: float = DEFAULT_EPS2,
        rho: float = DEFAULT_RHO,
        M: int = DEFAULT_M,
        min_fraction: float = ADAM_STEP_FRACTION,
        eps_units: str = "eta0",
    ):
        if not lr > 0.0:
            raise ValueError(f"DSGD: lr (η0) must be > 0, got {lr}")
        for name, value in (("eps1", eps1), ("eps2", eps2)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"DSGD: {name} must be in [0, 1] (paper 000 §4.1), got {value}")
        if not rho > 1.0:
            raise ValueError(f"DSGD: rho must be > 1 (paper 000 §4.1), got {rho}")
        if int(M) != M or M < 1:
            raise ValueError(f"DSGD: M must be a positive integer, got {M}")
        if not 0.0 < min_fraction <= 1.0:
            raise ValueError(f"DSGD: min_fraction must be in (0, 1], got {min_fraction}")
        if eps_units not in EPS_UNITS:
            raise ValueError(f"DSGD: eps_units must be one of {', '.join(EPS_UNITS)}, got {eps_units!r}")
        super().__init__(params, dict(lr=lr, eta_u=None))
        self.eps1 = float(eps1)
        self.eps2 = float(eps2)
        self.rho = float(rho)
        self.M = int(M)
        self.min_fraction = float(min_fraction)
        self.eps_units = eps_units
        self._rewards: list[float] = []  # R(θ_{u-M}), ..., R(θ_{u-1}); Eq. (20)
        self._pending_reward: float | None = None  # R(θ_u), reported for this update
        self.u = 0  # number of steps taken

    # -- the controller ------------------------------------------------------------------------

    def report_reward(self, reward: float) -> None:
        """Reports R(θ_u), the current policy's reward, for the next ``step()``.

        Args:
            reward: The raw return of the current parameters. NaN (or None) means "no reward
                this update": η_u is left unchanged by the next step.
        """
        reward = None if reward is None else float(reward)
        self._pending_reward = reward if reward is not None and math.isfinite(reward) else None

    @property
    def eta_u(self) -> float:
        """η_u of the first param group (the others: ``param_groups[g]["eta_u"]``)."""
        return self._eta(self.param_groups[0])

    @property
    def R_avg(self) -> float | None:
        """Mean reward of the last M updates (Eq. 20), or None before the first report."""
        return sum(self._rewards) / len(self._rewards) if self._rewards else None

    def _clip(self, eta: float, group: dict[str, Any]) -> float:
        """Clips η to [0.23·η0, η0], η0 the group's current lr (paper 000 §4.1, after Eq. 21)."""
        eta0: float = group["lr"]
        return min(max(eta, self.min_fraction * eta0), eta0)

    def _eta(self, group: dict[str, Any]) -> float:
        """η_u of a group (η0 before the first step), clipped."""
        return self._clip(group["lr"] if group["eta_u"] is None else group["eta_u"], group)

    def _step_factors(self) -> list[float]:
        etas = [self._eta(group) for group in self.param_groups]
        for group, eta in zip(self.param_groups, etas, strict=True):
            group["eta_u"] = eta
        return etas  # η_u of Eq. (22)

    def _after_step(self) -> None:
        reward, self._pending_reward = self._pending_reward, None
        self.u += 1
        if reward is None:
            return
        R_avg = self.R_avg  # Eq. (20), paper 000 §4.1
        if R_avg is not None:
            # Eq. (21): R(θ_u) > ρ·R_avg, written so that it also means "improved" for R_avg ≤ 0.
            improved = reward > R_avg + (self.rho - 1.0) * abs(R_avg)
            delta = -self.eps1 if improved else self.eps2
            for group in self.param_groups:
                scale = group["lr"] if self.eps_units == "eta0" else 1.0  # ε·η0 (authors' code) or ε
                group["eta_u"] = self._clip(self._eta(group) + delta * scale, group)
        self._rewards = (self._rewards + [reward])[-self.M :]

    # -- checkpoints ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """torch's optimizer state plus the controller (reward window, pending reward, u)."""
        state = super().state_dict()
        state[_STATE_KEY] = {
            "rewards": list(self._rewards),
            "pending_reward": self._pending_reward,
            "u": self.u,
        }
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores torch's optimizer state and the controller saved by :meth:`state_dict`."""
        state_dict = dict(state_dict)
        controller = state_dict.pop(_STATE_KEY, None)
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            if group.get("eta_u") is not None:
                group["eta_u"] = float(group["eta_u"])
        if controller is not None:
            self._rewards = [float(r) for r in controller["rewards"]][-self.M :]
            pending = controller["pending_reward"]
            self._pending_reward = None if pending is None else float(pending)
            self.u = int(controller["u"])
