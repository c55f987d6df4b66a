"""CV-ES's estimator (paper 002): discounting, Eq. 4–9, η (Eq. 9) and φ (App. C.1), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.algorithms.cves import control_variate as cv
from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.samplers import make_sampler
from rllib_ext.common.blackbox.shaping import shape_returns


def test_discounted_weights_are_gamma_t_times_the_discounted_reward_to_go():
    w = cv.discounted_weights([1.0, 2.0, 3.0], [0.5, 1.0])
    # γ = 0.5: w_t = Σ_{t'≥t} 0.5^{t'} r_{t'} = [1 + 1 + 0.75, 1 + 0.75, 0.75]; w_0 = J^γ.
    np.testing.assert_allclose(w, [[2.75, 1.75, 0.75], [6.0, 5.0, 3.0]])


def test_gamma_phi_round_trip_and_clipping():
    assert cv.gamma_of(cv.phi_of(0.99)) == pytest.approx(0.99)
    assert cv.gamma_of(cv.update_phi(cv.phi_of(0.99), 1e9, 1.0)) == pytest.approx(cv.DEFAULT_GAMMA_MAX)
    assert cv.gamma_of(cv.update_phi(cv.phi_of(0.99), 1e9, 1.0, gamma_max=cv.GAMMA_MAX)) == pytest.approx(0.9999)
    assert cv.gamma_of(cv.update_phi(cv.phi_of(0.99), -1e9, 1.0)) == pytest.approx(cv.GAMMA_MIN)
    with pytest.raises(ValueError, match="γ"):
        cv.phi_of(1.0)


def batch(n=8, d=5, m=2, seed=0, antithetic=True):
    rng = np.random.default_rng(seed)
    eps = make_sampler("gaussian", d, antithetic=antithetic).sample(seed, n).astype(np.float64)
    return rng.normal(5, 2, n), rng.normal(3, 1, (n, m)), rng.normal(size=(n, m, d)), eps


@pytest.mark.parametrize("shaping", ["standardize", "centered_rank", "none"])
def test_cv_terms_means_are_eq4_and_eq7_with_app_c2_scaling(shaping):
    j1, jg, g_pg, eps = batch()
    sigma = 0.02
    x, y, scale = cv.cv_terms(j1, jg, g_pg, eps, sigma, shaping, group=2)
    f1 = j1 if shaping == "none" else shape_returns(j1, shaping)
    np.testing.assert_allclose(x.mean(0), es_gradient(f1, eps, sigma), rtol=1e-5)  # Eq. 4
    s = 1.0 if shaping == "none" else j1.std()
    assert scale == pytest.approx(s)
    for j in range(2):
        f_gamma = jg[:, j] if shaping == "none" else (jg[:, j] - jg[:, j].mean()) / s
        expected = es_gradient(f_gamma, eps, sigma) - g_pg[:, j].mean(0) / s  # (Eq. 4 − Eq. 7)/σ(J¹)
        np.testing.assert_allclose(y.mean(0)[j], expected, rtol=1e-5)
    # Pairs are the samples: the means do not depend on the grouping.
    x1, y1, _ = cv.cv_terms(j1, jg, g_pg, eps, sigma, shaping, group=1)
    np.testing.assert_allclose(x1.mean(0), x.mean(0))
    assert x.shape == (4, 5) and x1.shape == (8, 5) and y.shape == (4, 2, 5)


def test_cv_estimate_is_eq8_and_batch_variances():
    j1, jg, g_pg, eps = batch(n=40, d=3)
    x, y, _ = cv.cv_terms(j1, jg, g_pg, eps, 0.1, "standardize", group=2)
    eta = np.array([-0.5, 0.0, 0.3])
    est = cv.cv_estimate(x, y, eta)
    np.testing.assert_allclose(est.g_cv, x.mean(0) + eta * y.mean(0)[0])
    np.testing.assert_allclose(est.f_gamma, [((x.mean(0) + eta * y.mean(0)[1]) ** 2).sum()])
    assert est.var_es == pytest.approx(x.var(0, ddof=1).sum() / 20)
    assert est.var_cv == pytest.approx((x + eta * y[:, 0]).var(0, ddof=1).sum() / 20)
    assert -1.0 <= est.corr <= 1.0
    zero = cv.cv_estimate(x, y, np.zeros(3))
    assert zero.var_cv == pytest.approx(zero.var_es)


def test_equal_returns_do_not_divide_by_zero():
    j1, jg, g_pg, eps = batch()
    x, y, scale = cv.cv_terms(np.full(8, 3.0), jg, g_pg, eps, 0.02, "standardize", group=2)
    assert scale == 1.0 and np.all(x == 0) and np.all(np.isfinite(y))


def test_eta_update_moves_to_minus_cov_over_var():
    rng = np.random.default_rng(0)
    d, steps = 4, 20000
    slope = np.array([0.8, -0.5, 0.0, 2.0])
    eta = np.zeros(d)
    ys = rng.normal(size=(steps, d))  # E[Y] = 0, like a control variate
    xs = 1.0 + slope * ys + rng.normal(size=(steps, d))
    for x, y in zip(xs, ys, strict=False):
        eta = cv.update_eta(eta, x, y, lr=1e-3)
    target = -np.array([np.cov(xs[:, p], ys[:, p])[0, 1] / ys[:, p].var() for p in range(d)])
    np.testing.assert_allclose(eta, target, atol=0.1)
    np.testing.assert_allclose(cv.eta_gradient(np.ones(d), np.full(d, 2.0), np.ones(d)), 2 * 4 + 2 * 2)


def test_phi_es_update_descends_the_variance_objective():
    sampler = make_sampler("antithetic", 1)
    phi_star, phi, sigma_phi = -3.0, -4.6, 0.02

    def f(gammas):  # a variance with its minimum at γ* = 1 − exp(φ*)
        return (np.log(1.0 - np.asarray(gammas)) - phi_star) ** 2

    for u in range(300):
        eps = sampler.sample(u, 10)[:, 0]
        grad = cv.phi_gradient(f(cv.phi_perturbations(phi, eps, sigma_phi)), eps, sigma_phi)  # Eq. 13
        phi = cv.update_phi(phi, grad, lr=0.05)
    assert phi == pytest.approx(phi_star, abs=0.05)


def test_the_baseline_is_the_previous_batchs_mean_weight_per_time_step():
    # Two episodes of lengths 3 and 2 (zero-padded to 4): r̄ = [2, 2, 1.5] (the padding's zeros dropped).
    rewards = np.array([[1.0, 2.0, 3.0, 0.0], [3.0, 2.0, 0.0, 0.0]])
    r_bar = cv.mean_reward_sequence(rewards)
    np.testing.assert_allclose(r_bar, [2.0, 2.0, 1.5])
    gammas = np.array([0.5, 1.0])
    b = cv.discounted_weights(r_bar, gammas)  # the weights are linear in the rewards
    mean_w = np.mean([cv.discounted_weights(r, gammas) for r in rewards], axis=0)
    np.testing.assert_allclose(b, mean_w[:, :3])
    # An episode longer than the baseline keeps its own weights past the baseline's end.
    w = cv.discounted_weights([1.0, 1.0, 1.0, 1.0, 1.0], gammas)
    out = cv.subtract_baseline(w, b)
    np.testing.assert_allclose(out[:, :3], w[:, :3] - b)
    np.testing.assert_allclose(out[:, 3:], w[:, 3:])
    assert cv.subtract_baseline(w, None) is w
    assert cv.mean_reward_sequence(np.zeros((2, 3))).size == 0


def test_the_eta_update_uses_every_pair_with_the_one_draw_expectation():
    rng = np.random.default_rng(1)
    S, d = 5, 3
    x, y, eta = rng.normal(size=(S, d)), rng.normal(size=(S, d)), rng.normal(size=d)
    expected = 2.0 / S**2 * (eta * y**2 + y * x).sum(0)  # (2/S)·mean_k(η y_k² + y_k x_k)
    np.testing.assert_allclose(cv.eta_gradient(x, y, eta), expected)
    np.testing.assert_allclose(cv.update_eta(eta, x, y, 0.1), eta - 0.1 * expected)
    # One sample: the one-draw form 2ηY² + 2YX.
    np.testing.assert_allclose(cv.eta_gradient(x[0], y[0], eta), 2 * eta * y[0] ** 2 + 2 * y[0] * x[0])
    # Same expectation as the one-draw estimate on the batch means, less spread: x = 1 + 0.8y + noise.
    draws = 4000
    ys = rng.normal(size=(draws, S, d))
    xs = 1.0 + 0.8 * ys + rng.normal(size=(draws, S, d))
    every = np.array([cv.eta_gradient(xs[r], ys[r], eta) for r in range(draws)])
    one = np.array([cv.eta_gradient(xs[r].mean(0), ys[r].mean(0), eta) for r in range(draws)])
    truth = 2 * eta / S + 2 * 0.8 / S  # 2η E[Y²] + 2 E[XY], E[Y²] = 1/S, E[XY] = 0.8/S
    np.testing.assert_allclose(every.mean(0), truth, atol=4 * every.std(0).max() / np.sqrt(draws))
    np.testing.assert_allclose(one.mean(0), truth, atol=4 * one.std(0).max() / np.sqrt(draws))
    assert np.all(every.var(0) < 0.5 * one.var(0))
