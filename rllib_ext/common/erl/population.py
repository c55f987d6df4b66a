"""Separable (diagonal) Cross-Entropy Method: the population update of CEM-RL and ACEM-RL.

Paper 001 §2.3 (``../shared/papers/001_6bf500f1c5f7a9b5.txt``), after Pourchot & Sigaud (2019):
individuals z ~ N(μ, diag σ²); after a generation the K_e best ("elites", here the better half)
give

- Eq. (1): μ_{t+1} = Σ_i λ_i z_i,
- the variance, in one of two forms (``variance``, :data:`CEM_VARIANCES`), both around the *old*
  mean μ_t (the one the generation was sampled from):

  - ``"reference"`` (default): σ²_{t+1} = (1/K_e)·Σ_i λ_i (z_i − μ_t)² + ε — what both reference
    codes compute and what produced the papers' numbers: apourchot/CEM-RL ``ES.py``
    ``sepCEM.tell`` (``self.cov = 1 / self.parents * self.weights @ (z * z) + self.damp``) and
    KyunghyunLee/aes-rl ``core/population.py`` ``CemrlPopulation.tell`` / ``ACemrlPopulation.tell``
    (the same line);
  - ``"eq2"``: σ²_{t+1} = Σ_i λ_i (z_i − μ_t)² + ε, paper 001 Eq. (2) as printed (the diagonal of
    Eq. 1's covariance), K_e times larger (5× with CEM-RL's 10 individuals) for the same elites.

with λ_i = log(1 + K_e)/i normalised (rank weights) or 1/K_e (``weights="equal"``), and the
damping ε annealed as ε ← τ·ε + (1 − τ)·ε_limit *before* it is added, once per generation
(ε 1e-3 → 1e-5; τ 0.95 in apourchot ``ES.py`` ``sepCEM``, hard-coded; aes-rl's CEM-RL uses its
``cemrl_tau`` 0.90 instead, ``utils/util.py``). Used by CEMRL_EXT (one update per generation) and
by AESRL_EXT's asynchronous ``rank`` mean rule (App. E.1, Eq. 13: the same update over the last n
individuals, the mean step scaled by 1/n because it happens n times as often).

**Variance units.** ``var`` is σ² per parameter; ``sigma_init`` initialises it (Σ = σ_init·I,
paper 001 Algorithm 1 line 2, as in the reference code where σ_init is a variance).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: The two forms of the sep-CEM variance (module docstring): the reference codes' and Eq. (2)'s.
CEM_VARIANCES = ("reference", "eq2")


def rank_weights(num_elites: int, kind: str = "log") -> np.ndarray:
    """λ_1 … λ_{K_e} of Eq. (1): ``"log"``: log(1 + K_e)/i normalised; ``"equal"``: 1/K_e."""
    if num_elites < 1:
        raise ValueError(f"num_elites must be >= 1, got {num_elites}")
    if kind == "equal":
        return np.full(num_elites, 1.0 / num_elites)
    if kind != "log":
        raise ValueError(f"unknown CEM weights {kind!r}; valid: 'log', 'equal'")
    w = np.log((1.0 + num_elites) / np.arange(1, num_elites + 1))
    normalized: np.ndarray = w / w.sum()
    return normalized


def gaussian_individual(mu: np.ndarray, var: np.ndarray, seed: int) -> np.ndarray:
    """z = μ + √var ⊙ ε with ε ~ N(0, I) drawn from ``seed`` (float32, bit-reproducible).

    The driver and an env runner holding the same (μ, var) regenerate the same z from the
    seed, so an individual travels as a seed, never as a vector.
    """
    eps = np.random.default_rng(int(seed)).standard_normal(mu.shape[0], dtype=np.float32)
    z: np.ndarray = (mu + np.sqrt(var).astype(np.float32) * eps).astype(np.float32)
    return z


def elite_update(
    mu: np.ndarray, individuals: np.ndarray, fitness: npt.ArrayLike, weights: np.ndarray, variance: str = "reference"
) -> tuple[np.ndarray, np.ndarray]:
    """(μ_{t+1}, σ²_{t+1} − ε) from the best ``len(weights)`` individuals (Eq. 1 and the variance, no ε).

    Args:
        mu: μ_t, the mean the individuals were sampled around, [d].
        individuals: z_i, [n, d].
        fitness: f(z_i), [n] (higher is better).
        weights: λ_1 … λ_{K_e}, best first.
        variance: ``"reference"``: (1/K_e)·Σλ_i(z_i − μ_t)² (apourchot ``ES.py`` ``sepCEM.tell``,
            aes-rl ``CemrlPopulation.tell``); ``"eq2"``: Σλ_i(z_i − μ_t)² (Eq. 2 as printed).
    """
    if variance not in CEM_VARIANCES:
        raise ValueError(f"unknown sep-CEM variance {variance!r}; valid: {', '.join(CEM_VARIANCES)}")
    order = np.argsort(-np.asarray(fitness, dtype=np.float64), kind="stable")[: len(weights)]
    elites = np.asarray(individuals, dtype=np.float64)[order]
    new_mu: np.ndarray = weights @ elites  # Eq. (1)
    diff = elites - np.asarray(mu, dtype=np.float64)  # around the old mean μ_t, as Eq. (1)-(2) and both codes
    var: np.ndarray = weights @ (diff * diff)  # Eq. (2) without ε
    if variance == "reference":
        var = var / len(weights)  # the reference codes' 1/K_e (``1 / self.parents``)
    return new_mu, var


class SepCEM:
    """sep-CEM over a flat parameter vector (Eq. 1–2 with CEM-RL's damping schedule).

    Args:
        mu: Initial mean μ_0, [d].
        sigma_init: Initial variance σ²_0 (per parameter).
        population_size: Individuals per generation (CEM-RL: 10).
        num_elites: K_e (default: half the population, CEM-RL's ``parents``).
        weights: ``"log"`` (rank weights, CEM-RL) or ``"equal"``.
        damp_init, damp_limit, damp_tau: ε's schedule ε ← τε + (1−τ)ε_limit (1e-3, 1e-5, 0.95).
        antithetic: Sample ±ε pairs (CEM-RL's default; needs an even population).
        variance: ``"reference"`` (default) or ``"eq2"`` (module docstring).
    """

    def __init__(
        self,
        mu: np.ndarray,
        sigma_init: float = 1e-3,
        population_size: int = 10,
        num_elites: int | None = None,
        weights: str = "log",
        damp_init: float = 1e-3,
        damp_limit: float = 1e-5,
        damp_tau: float = 0.95,
        antithetic: bool = True,
        variance: str = "reference",
    ):
        if population_size < 2:
            raise ValueError(f"population_size must be >= 2, got {population_size}")
        if antithetic and population_size % 2:
            raise ValueError(f"antithetic sampling needs an even population_size, got {population_size}")
        if variance not in CEM_VARIANCES:
            raise ValueError(f"unknown sep-CEM variance {variance!r}; valid: {', '.join(CEM_VARIANCES)}")
        if not sigma_init > 0:
            raise ValueError(f"sigma_init must be > 0, got {sigma_init}")
        self.mu = np.asarray(mu, dtype=np.float32).copy()
        self.var = np.full_like(self.mu, float(sigma_init))
        self.population_size = int(population_size)
        self.num_elites = int(num_elites or population_size // 2)
        if not 1 <= self.num_elites <= self.population_size:
            raise ValueError(f"num_elites must be in [1, population_size], got {self.num_elites}")
        self.weights = rank_weights(self.num_elites, weights)
        self.damp = float(damp_init)
        self.damp_limit = float(damp_limit)
        self.damp_tau = float(damp_tau)
        self.antithetic = bool(antithetic)
        self.variance = variance
        self.generation = 0

    def ask(self, seed: int) -> np.ndarray:
        """One generation, [population_size, d], reproducible from ``seed``."""
        d, n = self.mu.shape[0], self.population_size
        rng = np.random.default_rng(int(seed))
        if self.antithetic:
            half = rng.standard_normal((n // 2, d), dtype=np.float32)
            eps = np.concatenate([half, -half])
        else:
            eps = rng.standard_normal((n, d), dtype=np.float32)
        generation: np.ndarray = (self.mu + eps * np.sqrt(self.var)).astype(np.float32)
        return generation

    def tell(self, individuals: np.ndarray, fitness: Sequence[float] | np.ndarray) -> None:
        """Eq. (1) and the variance (``variance``): the new μ and σ² from this generation's elites."""
        if len(individuals) != len(fitness) or len(fitness) < self.num_elites:
            raise ValueError(f"need >= {self.num_elites} (individual, fitness) pairs, got {len(fitness)}")
        # ε decays before it is added, as in both codes (ES.py sepCEM.tell, aes-rl CemrlPopulation.tell).
        self.damp = self.damp_tau * self.damp + (1.0 - self.damp_tau) * self.damp_limit
        new_mu, var = elite_update(self.mu, individuals, fitness, self.weights, self.variance)
        self.mu = new_mu.astype(np.float32)
        self.var = (var + self.damp).astype(np.float32)
        self.generation += 1

    def get_state(self) -> dict[str, Any]:
        return {"mu": self.mu.copy(), "var": self.var.copy(), "damp": self.damp, "generation": self.generation}

    def set_state(self, state: dict[str, Any]) -> None:
        self.mu = np.asarray(state["mu"], dtype=np.float32).copy()
        self.var = np.asarray(state["var"], dtype=np.float32).copy()
        self.damp = float(state["damp"])
        self.generation = int(state["generation"])
