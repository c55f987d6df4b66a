"""Individuals from seeds and sep-CEM (paper 001 Eq. 1–2 and the reference codes' variance), against hand values."""

import numpy as np
import pytest

from rllib_ext.common.erl.population import SepCEM, elite_update, gaussian_individual, rank_weights


def test_individuals_are_reproducible_from_seeds():
    mu, var = np.arange(5, dtype=np.float32), np.full(5, 0.01, dtype=np.float32)
    assert np.array_equal(gaussian_individual(mu, var, 7), gaussian_individual(mu.copy(), var.copy(), 7))
    assert not np.array_equal(gaussian_individual(mu, var, 7), gaussian_individual(mu, var, 8))


TOY_POP = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]], dtype=np.float32)
TOY_FIT = [1.0, 0.0, 3.0, -5.0]


def toy_cem(**kwargs):
    return SepCEM(np.zeros(2), sigma_init=1.0, population_size=4, damp_init=0.1, damp_limit=0.0, damp_tau=0.5, **kwargs)


def test_sep_cem_default_variance_is_the_reference_codes_form():
    """σ² = (1/K_e)·Σλ_i(z_i − μ_t)² + ε (apourchot ES.py sepCEM.tell, aes-rl CemrlPopulation.tell)."""
    cem = toy_cem()
    cem.tell(TOY_POP, TOY_FIT)
    w = rank_weights(2)  # [log(3/1), log(3/2)] normalised
    assert w == pytest.approx(np.log([3.0, 1.5]) / np.log([3.0, 1.5]).sum())
    expected_mu = w[0] * TOY_POP[2] + w[1] * TOY_POP[0]  # Eq. (1): elites f=3 (index 2), f=1 (index 0)
    assert cem.mu == pytest.approx(expected_mu, rel=1e-6)
    damp = 0.5 * 0.1  # ε decays first: τ·ε + (1 − τ)·ε_limit, then is added
    k_e = 2
    assert cem.var == pytest.approx((w[0] * TOY_POP[2] ** 2 + w[1] * TOY_POP[0] ** 2) / k_e + damp, rel=1e-6)


def test_sep_cem_eq2_option_is_the_printed_equation():
    """cem_variance "eq2": σ² = Σλ_i(z_i − μ_t)² + ε, paper 001 Eq. (2), K_e times the reference's spread."""
    cem = toy_cem(variance="eq2")
    cem.tell(TOY_POP, TOY_FIT)
    w = rank_weights(2)
    assert cem.var == pytest.approx(w[0] * TOY_POP[2] ** 2 + w[1] * TOY_POP[0] ** 2 + 0.05, rel=1e-6)
    with pytest.raises(ValueError, match="variance"):
        toy_cem(variance="bogus")


def test_sep_cem_variance_is_around_the_old_mean():
    """Both forms measure the elites around μ_t (the sampling mean), not μ_{t+1}: equal elites give ε only if at μ_t."""
    cem = SepCEM(np.full(1, 3.0), sigma_init=1.0, population_size=2, damp_init=0.0, damp_limit=0.0, antithetic=False)
    cem.tell(np.array([[5.0], [5.0]]), [1.0, 0.0])  # K_e = 1: μ_{t+1} = 5, spread around μ_t = 3 is 4
    assert cem.mu == pytest.approx([5.0]) and cem.var == pytest.approx([4.0])


def test_sep_cem_antithetic_ask_and_elite_update():
    cem = SepCEM(np.ones(3), sigma_init=0.04, population_size=6)
    gen = cem.ask(seed=3)
    assert gen.shape == (6, 3)
    assert gen[:3] - 1.0 == pytest.approx(-(gen[3:] - 1.0), abs=1e-6)
    mu, var = elite_update(np.zeros(1), np.array([[1.0], [2.0], [3.0]]), [1, 2, 3], np.array([0.5, 0.5]))
    assert mu == pytest.approx([2.5]) and var == pytest.approx([(9.0 + 4.0) / 2 / 2])  # (1/K_e)·Σλ_i z_i²
    _, var = elite_update(np.zeros(1), np.array([[1.0], [2.0], [3.0]]), [1, 2, 3], np.array([0.5, 0.5]), "eq2")
    assert var == pytest.approx([6.5])
    with pytest.raises(ValueError, match="even"):
        SepCEM(np.zeros(2), population_size=5)
