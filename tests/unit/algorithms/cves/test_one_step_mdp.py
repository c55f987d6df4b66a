"""The one-step MDP of paper 002 App. B: closed-form variances against measured ones, Theorem 1."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.algorithms.cves import control_variate as cv
from rllib_ext.algorithms.cves import one_step_mdp

D, N, RHO, REPS = 16, 8, 1.0, 2000


def test_theory_values_by_hand():
    th = one_step_mdp.theory(D, N, RHO)
    assert th["var_vanilla"] == pytest.approx(33 / 8)  # ((1+1)·16 + 1)/8
    assert th["var_orthogonal"] == pytest.approx(26 / 8)  # ((1+1)·16 + 2 − 8)/8
    assert th["ratio_cv_bound"] == pytest.approx(1 - 28 / (33 * 2))
    assert th["ratio_cv_exact"] <= th["ratio_cv_bound"]


@pytest.fixture(scope="module")
def vanilla_draws():
    return one_step_mdp.draws(D, N, RHO, "gaussian", REPS, seed=1)


def test_vanilla_es_variance_matches_app_b2(vanilla_draws):
    x, _ = vanilla_draws
    measured = one_step_mdp.total_variance(x)
    assert measured == pytest.approx(one_step_mdp.theory(D, N, RHO)["var_vanilla"], rel=0.1)


def test_orthogonal_es_variance_matches_app_b1():
    x, _ = one_step_mdp.draws(D, N, RHO, "orthogonal", REPS, seed=2)
    measured = one_step_mdp.total_variance(x)
    assert measured == pytest.approx(one_step_mdp.theory(D, N, RHO)["var_orthogonal"], rel=0.1)


def test_cv_with_optimal_eta_is_within_theorem_1(vanilla_draws):
    x, y = vanilla_draws
    half = REPS // 2
    eta = cv.optimal_eta(x[:half], y[:half])  # fitted on one half, measured on the other
    ratio = one_step_mdp.total_variance(x[half:] + eta * y[half:]) / one_step_mdp.total_variance(x[half:])
    th = one_step_mdp.theory(D, N, RHO)
    assert ratio <= th["ratio_cv_bound"]
    assert ratio == pytest.approx(th["ratio_cv_exact"], rel=0.1)
    np.testing.assert_allclose(eta.mean(), -(RHO**2) / (1 + RHO**2), atol=0.05)  # −cov/V for this MDP
