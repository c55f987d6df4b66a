"""Individuals from seeds and sep-CEM (paper 001 Eq. 1–2), against hand values."""

import numpy as np
import pytest

from rllib_ext.common.population import SepCEM, elite_update, gaussian_individual, rank_weights


def test_individuals_are_reproducible_from_seeds():
    mu, var = np.arange(5, dtype=np.float32), np.full(5, 0.01, dtype=np.float32)
    assert np.array_equal(gaussian_individual(mu, var, 7), gaussian_individual(mu.copy(), var.copy(), 7))
    assert not np.array_equal(gaussian_individual(mu, var, 7), gaussian_individual(mu, var, 8))


def test_sep_cem_on_toy_population():
    cem = SepCEM(np.zeros(2), sigma_init=1.0, population_size=4, damp_init=0.1, damp_limit=0.0, damp_tau=0.5)
    pop = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]], dtype=np.float32)
    fit = [1.0, 0.0, 3.0, -5.0]
    cem.tell(pop, fit)
    w = rank_weights(2)  # [log(3/1), log(3/2)] normalised
    assert w == pytest.approx(np.log([3.0, 1.5]) / np.log([3.0, 1.5]).sum())
    expected_mu = w[0] * pop[2] + w[1] * pop[0]
    assert cem.mu == pytest.approx(expected_mu, rel=1e-6)
    damp = 0.5 * 0.1  # tau*damp + (1 - tau)*limit
    assert cem.var == pytest.approx(w[0] * pop[2] ** 2 + w[1] * pop[0] ** 2 + damp, rel=1e-6)


def test_sep_cem_antithetic_ask_and_elite_update():
    cem = SepCEM(np.ones(3), sigma_init=0.04, population_size=6)
    gen = cem.ask(seed=3)
    assert gen.shape == (6, 3)
    assert gen[:3] - 1.0 == pytest.approx(-(gen[3:] - 1.0), abs=1e-6)
    mu, var = elite_update(np.zeros(1), np.array([[1.0], [2.0], [3.0]]), [1, 2, 3], np.array([1.0]))
    assert mu == pytest.approx([3.0]) and var == pytest.approx([9.0])
    with pytest.raises(ValueError, match="even"):
        SepCEM(np.zeros(2), population_size=5)
