"""CVES_EXT without Ray: the estimator (Eq. 4, 7, 8, App. C.2), the one-step MDP of §3.4 / App. A–B,
the η (Eq. 9) and φ (App. C.1) updates, the policy gradient (Eq. 5) with clipped actions, the runner."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.algorithms.cves import cves_learner as cv
from rllib_ext.algorithms.cves import one_step_mdp
from rllib_ext.algorithms.cves.cves_env_runner import action_log_probs, policy_gradients
from rllib_ext.common.es_gradient import es_gradient
from rllib_ext.common.policies import MLPPolicy
from rllib_ext.common.samplers import make_sampler
from rllib_ext.common.shaping import shape_returns

# ------------------------------------------------------------------------------------------
# Discounting and the estimator.
# ------------------------------------------------------------------------------------------


def test_discounted_weights_are_gamma_t_times_the_discounted_reward_to_go():
    w = cv.discounted_weights([1.0, 2.0, 3.0], [0.5, 1.0])
    # γ = 0.5: w_t = Σ_{t'≥t} 0.5^{t'} r_{t'} = [1 + 1 + 0.75, 1 + 0.75, 0.75]; w_0 = J^γ.
    np.testing.assert_allclose(w, [[2.75, 1.75, 0.75], [6.0, 5.0, 3.0]])


def test_gamma_phi_round_trip_and_clipping():
    assert cv.gamma_of(cv.phi_of(0.99)) == pytest.approx(0.99)
    assert cv.gamma_of(cv.update_phi(cv.phi_of(0.99), 1e9, 1.0)) == pytest.approx(cv.GAMMA_MAX)
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


# ------------------------------------------------------------------------------------------
# The one-step MDP (§3.4, App. A–B), with the project's samplers and estimator.
# ------------------------------------------------------------------------------------------

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
    np.testing.assert_allclose(eta.mean(), -RHO**2 / (1 + RHO**2), atol=0.05)  # −cov/V for this MDP


# ------------------------------------------------------------------------------------------
# η (Eq. 9) and φ (App. C.1).
# ------------------------------------------------------------------------------------------


def test_eta_update_moves_to_minus_cov_over_var():
    rng = np.random.default_rng(0)
    d, steps = 4, 20000
    slope = np.array([0.8, -0.5, 0.0, 2.0])
    eta = np.zeros(d)
    ys = rng.normal(size=(steps, d))  # E[Y] = 0, like a control variate
    xs = 1.0 + slope * ys + rng.normal(size=(steps, d))
    for x, y in zip(xs, ys):
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


# ------------------------------------------------------------------------------------------
# The policy gradient of Eq. 5 with clipped actions.
# ------------------------------------------------------------------------------------------


def bandit_policy(mean_unit=0.7, std=0.6):
    torch.manual_seed(0)
    policy = MLPPolicy(2, gym.spaces.Box(-1.0, 1.0, (1,)), hiddens=[4], head="gaussian")
    with torch.no_grad():
        policy.net[-1].bias.fill_(float(np.arctanh(mean_unit)))
        policy.net[-1].weight.zero_()
        policy.log_std.fill_(float(np.log(std)))
    return policy


def test_censored_log_prob_inside_and_at_the_bounds():
    policy = bandit_policy()
    obs = torch.zeros(3, 2)
    logp = action_log_probs(policy, obs, np.array([[0.2], [1.0], [-1.0]], dtype=np.float32))
    normal = torch.distributions.Normal(0.7, 0.6)
    assert logp[0].item() == pytest.approx(normal.log_prob(torch.tensor(0.2)).item(), rel=1e-5)
    assert logp[1].item() == pytest.approx(np.log(1 - normal.cdf(torch.tensor(1.0)).item()), rel=1e-4)
    assert logp[2].item() == pytest.approx(np.log(normal.cdf(torch.tensor(-1.0)).item()), rel=1e-4)


def test_policy_gradient_of_clipped_actions_is_unbiased():
    """One-step bandit r(a) = a with a = clip(N(μ, s²)) hitting the bound 31% of the time."""
    policy = bandit_policy()
    obs = np.zeros((1, 2), dtype=np.float32)
    # Exact ∇θ E[clip(a, −1, 1)] through the closed form of the censored mean.
    dist = policy.distribution(torch.as_tensor(obs))
    m, s = dist.loc[0, 0], dist.scale[0, 0]
    std_normal = torch.distributions.Normal(0.0, 1.0)
    a, b = (-1 - m) / s, (1 - m) / s
    mean_clipped = m * (std_normal.cdf(b) - std_normal.cdf(a)) + s * (
        std_normal.log_prob(a).exp() - std_normal.log_prob(b).exp()) - std_normal.cdf(a) + 1 - std_normal.cdf(b)
    exact = torch.cat([g.reshape(-1) for g in torch.autograd.grad(mean_clipped, list(policy.parameters()))]).numpy()

    generator = torch.Generator().manual_seed(1)
    samples = 4000
    actions = np.stack([policy.act(obs[0], explore=True, generator=generator) for _ in range(samples)])
    rewards = actions[:, 0].astype(np.float64)
    # Independent one-step episodes side by side: weights w_0 = r (Eq. 5 with T = 1), averaged.
    g = policy_gradients(policy, np.repeat(obs, samples, 0), actions, rewards[None, :])[0] / samples
    assert np.linalg.norm(g - exact) < 0.1 * np.linalg.norm(exact)
    # The unclipped Gaussian's density at the clipped action (the common shortcut) is biased here.
    naive_logp = policy.distribution(torch.as_tensor(np.repeat(obs, samples, 0))).log_prob(torch.as_tensor(actions)).sum(-1)
    naive = torch.autograd.grad((torch.as_tensor(rewards) * naive_logp.double()).sum() / samples, list(policy.parameters()))
    naive = torch.cat([n.reshape(-1) for n in naive]).numpy()
    assert np.linalg.norm(naive - exact) > 2 * np.linalg.norm(g - exact)


# ------------------------------------------------------------------------------------------
# The env runner, built locally (no Ray).
# ------------------------------------------------------------------------------------------


def local_runner(env_config=None, env="rllib_ext/VariableLength-v0"):
    import rllib_ext  # noqa: F401 - registers the envs
    from rllib_ext import CVESConfig
    from rllib_ext.algorithms.cves.cves_env_runner import CVESEnvRunner

    config = CVESConfig().environment(env, env_config=env_config or {"continuous": True, "min_len": 5, "max_len": 9})
    config = config.training(policy_hiddens=[8]).debugging(seed=0)
    config.validate()
    return CVESEnvRunner(config=config)


def jobs(n):
    return [{"id": i, "seed": 3, "n": n, "index": i} for i in range(n)]


def test_runner_returns_j_gamma_and_one_pg_vector_per_gamma():
    runner = local_runner()
    theta = runner.module.get_flat()
    runner.publish(0, (theta, runner.obs_filter.get_state(), [0.99, 0.5]))
    out = runner.run_jobs(0, None, jobs(2))
    last = out["results"][-1]
    rewards = np.array(runner.env.rewards)  # the recorder holds the last episode
    assert last["return"] == pytest.approx(rewards.sum())
    np.testing.assert_allclose(last["return_gamma"], [(0.99 ** np.arange(len(rewards)) * rewards).sum(),
                                                      (0.5 ** np.arange(len(rewards)) * rewards).sum()])
    assert last["g_pg"].shape == (2, theta.size) and last["g_pg"].dtype == np.float32
    assert np.any(last["g_pg"] != 0)
    # Control variate off: plain black-box results, and `sample` (rllib evaluate) never computes PGs.
    runner.publish(1, (theta, runner.obs_filter.get_state(), None))
    assert "g_pg" not in runner.run_jobs(1, None, jobs(2))["results"][0]
    assert len(runner.sample(num_episodes=1)) == 1


def test_runner_keeps_results_aligned_when_episodes_fail():
    runner = local_runner({"fault": "raise", "fault_prob": 0.5, "continuous": True}, env="rllib_ext/Faulty-v0")
    theta = runner.module.get_flat()
    runner.publish(0, (theta, runner.obs_filter.get_state(), [0.99]))
    results = runner.run_jobs(0, None, jobs(12))["results"]
    assert any(r["failed"] for r in results) and not all(r["failed"] for r in results)
    for r in results:
        assert ("g_pg" in r) == (not r["failed"])
