"""AES-RL's framework-neutral state: the asynchronous population and the RL/ES controller.

Paper 001 (Lee et al. 2020, ``../shared/papers/001_6bf500f1c5f7a9b5.txt``). The population is a
diagonal Gaussian N(μ, diag σ²) over the actor's flat parameters. Every finished individual z
with fitness f(z) updates it at once (§3.1, Fig. 1c), by a *mean rule* (§3.3) giving the update
ratio p of Eq. (4), μ ← (1 − p)·μ + p·z, and a *variance rule* (§3.4). Any combination works
(the paper's Table 2 grid).

Mean rules (``mean_rule``):

- ``one_plus_one``: (1+1)-ES, Eq. (5): p = 1 if f(μ) < f(z), else 0.
- ``rank``: asynchronous rank-based update (ACEM-RL, App. E.1, Eq. 13): the last n individuals
  are kept; once n are stored each new one moves μ by 1/n of the way to the sep-CEM mean of their
  elites (:func:`~rllib_ext.common.erl.population.elite_update`); p is reported as 1/n (the
  reference's ``ACemrlPopulation.tell`` returns 0).
- ``fixed_linear``: Eq. (6)–(7): p = p_sg·clip((f(z) − f(μ))/r, −1, 1).
- ``fixed_sigmoid``: Eq. (8): p = p_sg·Sigmoid((f(z) − f(μ))/r). The reference code drops p_sg
  here (a worse z still moves μ by up to 0.5); we follow the printed equation.
- ``baseline_absolute``: Eq. (9): p = clip((f(z) − f_b)/[(f(μ) − f_b) + (f(z) − f_b)], −1, 1),
  with p = 0 when f(z) < f_b (the reference code's cut-off; Eq. 9's ratio is meaningless there)
  and p = 0 when the denominator is ≤ 0 (μ far below the baseline: the reference computes
  clip(1 − (f(μ) − f_b)/denominator, 0, 1), which is 0 there; aes-rl ``core/population.py``,
  ``AesrlPopulation.tell``, the ``baseline-absolute`` branch).
- ``baseline_relative`` (default): Eq. (10) with f_rb = f(μ) − f_b:
  p = p_sg·clip((f(z) − f_rb)/(f_b + f(z) − f_rb), −1, 1), p_sg = p_positive if f(z) ≥ f_rb
  else p_negative, and p = 0 for f(z) < f_rb − f_b (the paper's cut-off, where the denominator
  would change sign).

p_sg (Eq. 7): ``p_positive`` (1.0) when z is better, ``p_negative`` (0.0, App. C) otherwise.

**The scale r / f_b.** Table 5 gives r and |f_b| per task ("about 1/6 of the maximum reward",
App. C). Where a task has none, ``fixed_range`` / ``fitness_baseline`` = ``"adaptive"`` derives
the scale from the fitness differences the rule itself sees (ours; not in the paper or the
reference): s = ``scale_factor`` × mean |f(z_j) − f(μ_j)| over the last ``scale_window``
individuals told, the current one included (so the first individual has a scale, and one outlier
raises s to at most (its |d| + the others)/window). It replaces r in Eq. (6), (8) and f_b in
Eq. (10): the relative rule then gives p = (d + s)/(d + 2s) for d = f(z) − f(μ) ≥ −s, i.e. p = 0
one typical difference below f(μ), 0.5 at f(μ) and 2/3 one typical difference above — the same
selection pressure on any task, whatever its return scale. The absolute rule (Eq. 9) needs a
return *level*, not a spread, so it has no adaptive form. The value used is ``last_scale``
(AESRL_EXT logs it as ``blackbox/mean_rule_scale``).

Variance rules (``variance_rule``), on var = σ² per parameter, floored at ``var_limit``:

- ``success_rule``: Rechenberg's 1/5 rule (§3.4, [34]): after every ``success_window``
  individuals (success: f(z) > f(μ)), σ ← σ/c if their success rate exceeds
  ``success_threshold`` (1/5), else σ ← σ·c, with c = ``success_factor`` (0.85; Schwefel's range
  0.817–1). (The reference code stops appending once its window is full, freezing the rate.)
- ``online_fixed``: Welford's update with a fixed n, Eq. (11):
  σ²_t = σ²_{t−1} + [(z − μ_{t−1}) ⊙ (z − μ_t) − σ²_{t−1}]/n, n = ``online_n``.
- ``online_adaptive`` (default): Eq. (11) with n = max((1 − p)/p, 1), Eq. (12).
- ``elite``: the rank rule's own sep-CEM variance, only with ``rank``: σ² is replaced by the
  elites' variance around the current (old) μ plus ε, in the form ``cem_variance`` —
  ``"reference"`` (default): (1/K_e)·Σλ_i(z_i − μ)² + ε, as aes-rl ``core/population.py``
  ``ACemrlPopulation.tell`` computes it (``1 / self.parents * self.weights @ (z * z) + damp``);
  ``"eq2"``: Σλ_i(z_i − μ)² + ε, Eq. (2) as printed. ε decays before it is added, by τ^(1/n) per
  update once n individuals are stored, with the reference's τ = 0.90 (its ``cemrl_tau``,
  ``utils/util.py``; apourchot's synchronous CEM-RL uses 0.95 per generation).

Both online rules leave σ² unchanged when p < ``p_min`` (1e-3): "When p = 0 […] the variance
remains unchanged" (§3.4); a negative p (``p_negative`` > 0) also leaves it unchanged, as in the
reference code.

Population control, Eq. (3): p_rl = clip(−K_rl·[n_rl/(n_rl + n_es) − p_desired] + 0.5, 0, 1)
(:func:`p_rl`).
"""

from __future__ import annotations

import collections
import math
from typing import Any

import numpy as np

from rllib_ext.common.erl.population import CEM_VARIANCES, elite_update, gaussian_individual, rank_weights

MEAN_RULES = ("one_plus_one", "rank", "fixed_linear", "fixed_sigmoid", "baseline_absolute", "baseline_relative")
VARIANCE_RULES = ("success_rule", "online_fixed", "online_adaptive", "elite")
# Mean rules that need f(μ), the fitness of the current mean.
RULES_NEEDING_F_MU = ("one_plus_one", "fixed_linear", "fixed_sigmoid", "baseline_absolute", "baseline_relative")
# Mean rules with a scale: r (Eq. 6, 8) or f_b (Eq. 9, 10).
RANGE_RULES = ("fixed_linear", "fixed_sigmoid")
BASELINE_RULES = ("baseline_absolute", "baseline_relative")
#: ``fixed_range`` / ``fitness_baseline`` value: derive the scale from recent fitness differences.
ADAPTIVE = "adaptive"
#: The adaptive scale never falls below this (all differences 0: p = 0.5 at d = 0, as with any scale).
SCALE_FLOOR = 1e-8


def p_rl(n_rl: int, n_es: int, k_rl: float = 50.0, p_desired: float = 0.5) -> float:
    """Eq. (3): the probability that the next individual is an RL one (0.5 before any)."""
    total = n_rl + n_es
    ratio = p_desired if total == 0 else n_rl / total
    return float(min(max(-k_rl * (ratio - p_desired) + 0.5, 0.0), 1.0))


def _clip(x: float, lo: float = -1.0, hi: float = 1.0) -> float:
    return float(min(max(x, lo), hi))


def update_ratio(
    rule: str,
    f_z: float,
    f_mu: float,
    *,
    r: float = 1.0,
    f_b: float = 1.0,
    p_positive: float = 1.0,
    p_negative: float = 0.0,
) -> float:
    """The update ratio p of Eq. (4) for a fitness-based mean rule (Eq. 5–10).

    Args:
        rule: One of ``one_plus_one``, ``fixed_linear``, ``fixed_sigmoid``,
            ``baseline_absolute``, ``baseline_relative``.
        f_z: f(z), the new individual's fitness.
        f_mu: f(μ_t), the current mean's fitness.
        r: The fixed range (Eq. 6, 8; Table 5).
        f_b: The fitness baseline (Eq. 9, 10; Table 5).
        p_positive, p_negative: p_sg's two values (Eq. 7, 10).
    """
    if rule == "one_plus_one":  # Eq. (5)
        return 1.0 if f_mu < f_z else 0.0
    if rule in ("fixed_linear", "fixed_sigmoid"):
        p_sg = p_positive if f_mu < f_z else p_negative  # Eq. (7)
        x = (f_z - f_mu) / r
        if rule == "fixed_linear":
            return p_sg * _clip(x)  # Eq. (6)
        return p_sg / (1.0 + math.exp(-_clip(x, -50.0, 50.0)))  # Eq. (8)
    if rule == "baseline_absolute":  # Eq. (9)
        a, b = f_z - f_b, f_mu - f_b
        if a < 0 or a + b <= 0:  # below the baseline, or μ so far below it that Eq. (9)'s sign flips:
            return 0.0  # the reference's clip(1 − b/(a + b), 0, 1) is 0 there (aes-rl AesrlPopulation.tell)
        return _clip(a / (a + b))
    if rule == "baseline_relative":  # Eq. (10)
        f_rb = f_mu - f_b
        if f_z < f_rb - f_b:  # the cut-off below Eq. (10)
            return 0.0
        p_sg = p_positive if f_z >= f_rb else p_negative
        denom = f_b + (f_z - f_rb)
        return 0.0 if denom <= 0 else p_sg * _clip((f_z - f_rb) / denom)
    raise ValueError(f"unknown fitness-based mean rule {rule!r}; valid: {', '.join(RULES_NEEDING_F_MU)}")


def adaptive_scale(abs_diffs, factor: float = 1.0) -> float:
    """The adaptive r / f_b: ``factor`` × mean |f(z) − f(μ)| of ``abs_diffs`` (module docstring)."""
    return max(float(factor) * float(np.mean(abs_diffs)), SCALE_FLOOR) if len(abs_diffs) else SCALE_FLOOR


def adaptive_n(p: float) -> float:
    """Eq. (12): n = max((1 − p)/p, 1) (p > 0)."""
    return max((1.0 - p) / p, 1.0)


def welford_variance(var: np.ndarray, z: np.ndarray, mu_old: np.ndarray, mu_new: np.ndarray, n: float) -> np.ndarray:
    """Eq. (11): σ²_t = σ²_{t−1} + [(z − μ_{t−1}) ⊙ (z − μ_t) − σ²_{t−1}]/n (element-wise)."""
    return var + ((z - mu_old) * (z - mu_new) - var) / n


class AsyncPopulation:
    """N(μ, diag σ²) updated by one individual at a time (module docstring for the rules).

    Args:
        mu: μ_0 (the initial actor's flat parameters).
        sigma_init: σ²_0 per parameter (Σ = σ_init·I, Algorithm 1 line 2).
        mean_rule, variance_rule: See the module docstring.
        fixed_range: r of Eq. (6), (8), or ``"adaptive"`` (module docstring).
        fitness_baseline: f_b of Eq. (9), (10), or ``"adaptive"`` (Eq. 10 only).
        scale_window, scale_factor: The adaptive scale's window and factor.
        p_positive, p_negative: Eq. (7).
        online_n: n of ``online_fixed``.
        rank_population: n of ``rank`` (individuals kept).
        success_window, success_threshold, success_factor: ``success_rule``.
        var_limit: Floor of σ² (keeps exploration alive; CEM-RL's damping limit 1e-5).
        p_min: Below this p an online variance rule leaves σ² unchanged.
        cem_damp_init, cem_damp_limit, cem_damp_tau: The ``elite`` variance's damping ε
            (1e-3 → 1e-5; τ 0.90 as aes-rl's ACEM-RL, applied as τ^(1/n) per update, App. E.1).
        cem_variance: The ``elite`` variance's form, ``"reference"`` or ``"eq2"`` (module docstring).
    """

    def __init__(
        self,
        mu: np.ndarray,
        sigma_init: float = 1e-3,
        mean_rule: str = "baseline_relative",
        variance_rule: str = "online_adaptive",
        fixed_range: float | str = 1.0,
        fitness_baseline: float | str = 1.0,
        scale_window: int = 20,
        scale_factor: float = 1.0,
        p_positive: float = 1.0,
        p_negative: float = 0.0,
        online_n: float = 10.0,
        rank_population: int = 10,
        success_window: int = 10,
        success_threshold: float = 0.2,
        success_factor: float = 0.85,
        var_limit: float = 1e-5,
        p_min: float = 1e-3,
        cem_damp_init: float = 1e-3,
        cem_damp_limit: float = 1e-5,
        cem_damp_tau: float = 0.90,
        cem_variance: str = "reference",
    ):
        if mean_rule not in MEAN_RULES:
            raise ValueError(f"unknown mean_rule {mean_rule!r}; valid: {', '.join(MEAN_RULES)}")
        if variance_rule not in VARIANCE_RULES:
            raise ValueError(f"unknown variance_rule {variance_rule!r}; valid: {', '.join(VARIANCE_RULES)}")
        if variance_rule == "elite" and mean_rule != "rank":
            raise ValueError("variance_rule 'elite' is the rank rule's own variance: use it with mean_rule 'rank'")
        self.mu = np.asarray(mu, dtype=np.float32).copy()
        self.var = np.full_like(self.mu, float(sigma_init))
        self.mean_rule, self.variance_rule = mean_rule, variance_rule
        if mean_rule == "baseline_absolute" and fitness_baseline == ADAPTIVE:
            raise ValueError(
                "fitness_baseline: the absolute baseline (Eq. 9) is a return level, it has no adaptive form"
            )
        self.fixed_range = fixed_range if fixed_range == ADAPTIVE else float(fixed_range)
        self.fitness_baseline = fitness_baseline if fitness_baseline == ADAPTIVE else float(fitness_baseline)
        self.scale_factor = float(scale_factor)
        self._abs_diffs: collections.deque = collections.deque(maxlen=int(scale_window))  # |f(z) − f(μ)|
        self.last_scale: float | None = None  # the r or f_b the last fitness-based tell used
        self.p_positive, self.p_negative = float(p_positive), float(p_negative)
        self.online_n = float(online_n)
        self.rank_population = int(rank_population)
        self.success_threshold, self.success_factor = float(success_threshold), float(success_factor)
        self.var_limit, self.p_min = float(var_limit), float(p_min)
        self.cem_damp = float(cem_damp_init)
        self.cem_damp_limit = float(cem_damp_limit)
        self.cem_damp_tau = float(cem_damp_tau) ** (1.0 / self.rank_population)
        if cem_variance not in CEM_VARIANCES:
            raise ValueError(f"unknown cem_variance {cem_variance!r}; valid: {', '.join(CEM_VARIANCES)}")
        self.cem_variance = cem_variance
        self._rank_weights = rank_weights(max(self.rank_population // 2, 1))
        self._recent: collections.deque = collections.deque(maxlen=self.rank_population)  # (z, f(z))
        self._successes: collections.deque = collections.deque(maxlen=int(success_window))
        self.f_mu: float | None = None  # f(μ): set by the caller (see AESRL's mean_fitness)
        self.num_updates = 0

    @property
    def needs_f_mu(self) -> bool:
        return self.mean_rule in RULES_NEEDING_F_MU or self.variance_rule == "success_rule"

    def sample(self, seed: int) -> np.ndarray:
        """z ~ N(μ, diag σ²), reproducible from ``seed``."""
        return gaussian_individual(self.mu, self.var, seed)

    def tell(self, z: np.ndarray, f_z: float) -> float:
        """Updates μ and σ² with one finished individual; returns its update ratio p.

        Raises:
            ValueError: The rule needs f(μ) and none was set.
        """
        z = np.asarray(z, dtype=np.float32)
        if self.needs_f_mu and self.f_mu is None:
            raise ValueError(f"mean rule {self.mean_rule!r} / variance rule {self.variance_rule!r} need f(μ) first")
        mu_old = self.mu
        if self.mean_rule == "rank":
            p = self._tell_rank(z, f_z)
        else:
            self._abs_diffs.append(abs(float(f_z) - float(self.f_mu)))
            r, f_b = self._resolve(self.fixed_range), self._resolve(self.fitness_baseline)
            if self.mean_rule in RANGE_RULES:
                self.last_scale = r
            elif self.mean_rule in BASELINE_RULES:
                self.last_scale = f_b
            p = update_ratio(
                self.mean_rule,
                f_z,
                self.f_mu,
                r=r,
                f_b=f_b,
                p_positive=self.p_positive,
                p_negative=self.p_negative,
            )
            self.mu = ((1.0 - p) * mu_old + p * z).astype(np.float32)  # Eq. (4)
        if self.variance_rule in ("online_fixed", "online_adaptive"):
            if p >= self.p_min:
                n = self.online_n if self.variance_rule == "online_fixed" else adaptive_n(p)
                self.var = welford_variance(self.var, z, mu_old, self.mu, n).astype(np.float32)
        elif self.variance_rule == "success_rule":
            self._successes.append(1.0 if f_z > self.f_mu else 0.0)
            if len(self._successes) == self._successes.maxlen:  # once per window (Rechenberg)
                c = self.success_factor
                scale = 1.0 / c**2 if np.mean(self._successes) > self.success_threshold else c**2
                self.var = (self.var * scale).astype(np.float32)
                self._successes.clear()
        self.var = np.maximum(self.var, self.var_limit).astype(np.float32)
        self.num_updates += 1
        return float(p)

    def _resolve(self, setting) -> float:
        """A fixed r / f_b, or the adaptive scale from the recent fitness differences."""
        return adaptive_scale(self._abs_diffs, self.scale_factor) if setting == ADAPTIVE else setting

    def _tell_rank(self, z: np.ndarray, f_z: float) -> float:
        """App. E.1, Eq. (13): sep-CEM over the last n individuals, 1/n of the step per individual."""
        self._recent.append((z, float(f_z)))
        n = self.rank_population
        if len(self._recent) < n:
            return 0.0
        individuals = np.stack([ind for ind, _ in self._recent])
        fitness = np.array([f for _, f in self._recent])
        elite_mu, elite_var = elite_update(self.mu, individuals, fitness, self._rank_weights, self.cem_variance)
        self.mu = (self.mu + (elite_mu - self.mu) / n).astype(np.float32)  # Eq. (13): 1/n of Eq. (1)'s step
        if self.variance_rule == "elite":  # ε decays first, then σ² = elites' variance + ε (ACemrlPopulation)
            self.cem_damp = self.cem_damp_tau * self.cem_damp + (1.0 - self.cem_damp_tau) * self.cem_damp_limit
            self.var = (elite_var + self.cem_damp).astype(np.float32)
        return 1.0 / n

    def get_state(self) -> dict[str, Any]:
        return {
            "mu": self.mu.copy(),
            "var": self.var.copy(),
            "f_mu": self.f_mu,
            "num_updates": self.num_updates,
            "recent": [(z.copy(), f) for z, f in self._recent],
            "successes": list(self._successes),
            "cem_damp": self.cem_damp,
            "abs_diffs": list(self._abs_diffs),
            "last_scale": self.last_scale,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.mu = np.asarray(state["mu"], dtype=np.float32).copy()
        self.var = np.asarray(state["var"], dtype=np.float32).copy()
        self.f_mu = state["f_mu"]
        self.num_updates = int(state["num_updates"])
        self._recent.clear()
        self._recent.extend((np.asarray(z, dtype=np.float32), float(f)) for z, f in state["recent"])
        self._successes.clear()
        self._successes.extend(state["successes"])
        self.cem_damp = float(state["cem_damp"])
        self._abs_diffs.clear()
        self._abs_diffs.extend(state.get("abs_diffs", ()))  # absent in checkpoints before the adaptive scale
        self.last_scale = state.get("last_scale")
