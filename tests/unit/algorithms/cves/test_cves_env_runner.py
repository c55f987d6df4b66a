"""CV-ES's env runner: the policy gradient of Eq. 5 with clipped actions; the runner built locally (no Ray)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext.algorithms.cves import control_variate as cv
from rllib_ext.algorithms.cves.cves_env_runner import action_log_probs, policy_gradients
from rllib_ext.common.policies import MLPPolicy


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
    mean_clipped = (
        m * (std_normal.cdf(b) - std_normal.cdf(a))
        + s * (std_normal.log_prob(a).exp() - std_normal.log_prob(b).exp())
        - std_normal.cdf(a)
        + 1
        - std_normal.cdf(b)
    )
    exact = torch.cat([g.reshape(-1) for g in torch.autograd.grad(mean_clipped, list(policy.parameters()))]).numpy()

    generator = torch.Generator().manual_seed(1)
    samples = 4000
    actions = np.stack([policy.act(obs[0], explore=True, generator=generator) for _ in range(samples)])
    rewards = actions[:, 0].astype(np.float64)
    # Independent one-step episodes side by side: weights w_0 = r (Eq. 5 with T = 1), averaged.
    g = policy_gradients(policy, np.repeat(obs, samples, 0), actions, rewards[None, :])[0] / samples
    assert np.linalg.norm(g - exact) < 0.1 * np.linalg.norm(exact)
    # The unclipped Gaussian's density at the clipped action (the common shortcut) is biased here.
    naive_logp = (
        policy.distribution(torch.as_tensor(np.repeat(obs, samples, 0))).log_prob(torch.as_tensor(actions)).sum(-1)
    )
    naive = torch.autograd.grad(
        (torch.as_tensor(rewards) * naive_logp.double()).sum() / samples, list(policy.parameters())
    )
    naive = torch.cat([n.reshape(-1) for n in naive]).numpy()
    assert np.linalg.norm(naive - exact) > 2 * np.linalg.norm(g - exact)


def local_runner(env_config=None, env="rllib_ext/VariableLength-v0"):
    import rllib_ext  # noqa: F401 - registers the envs
    from rllib_ext import CVESConfig
    from rllib_ext.algorithms.cves.cves_env_runner import CVESEnvRunner

    config = CVESConfig().environment(env, env_config=env_config or {"continuous": True, "min_len": 5, "max_len": 9})
    config = config.training(policy_hiddens=[8]).debugging(seed=0)
    config.validate()
    return CVESEnvRunner(config=config)


def call(version, n, episodes=1):
    from rllib_ext.common.blackbox import Call, PerturbationJob

    jobs = tuple(PerturbationJob(id=i, version=version, seed=3, n=n, index=i, episodes=episodes) for i in range(n))
    return Call(payload_ref=None, jobs=jobs)


def payload(runner, gammas):
    from rllib_ext.algorithms.cves.cves_env_runner import CVESPayload

    return CVESPayload(theta=runner.module.get_flat(), filter_state=runner.obs_filter.get_state(), gammas=gammas)


def test_runner_returns_j_gamma_and_one_pg_vector_per_gamma():
    runner = local_runner()
    theta = runner.module.get_flat()
    runner.adopt(0, payload(runner, [0.99, 0.5]))
    last = runner.run_jobs(call(0, 2)).results[-1]
    rewards = np.array(runner.env.rewards)  # the recorder holds the last episode
    assert last.ret == pytest.approx(rewards.sum())
    np.testing.assert_allclose(
        last.return_gamma,
        [(0.99 ** np.arange(len(rewards)) * rewards).sum(), (0.5 ** np.arange(len(rewards)) * rewards).sum()],
    )
    assert last.g_pg.shape == (2, theta.size) and last.g_pg.dtype == np.float32
    assert np.any(last.g_pg != 0)
    # Control variate off: plain black-box results, and `sample` (rllib evaluate) never computes PGs.
    runner.adopt(1, payload(runner, None))
    assert runner.run_jobs(call(1, 2)).results[0].g_pg is None
    assert len(runner.sample(num_episodes=1)) == 1


def test_the_control_variate_terms_of_several_episodes_are_averaged_with_their_returns():
    """episodes_per_job = k: J^γ and ĝ^pg are the means over the k episodes, as the return is."""
    runner = local_runner()
    runner.adopt(0, payload(runner, [0.9]))
    per_episode = []
    original = runner.episode_extras

    def spy():
        extras = original()
        per_episode.append((runner.env.rewards.copy(), extras))
        return extras

    runner.episode_extras = spy
    result = runner.run_jobs(call(0, 2, episodes=3)).results[-1]
    per_episode = per_episode[3:]  # the second job's episodes
    assert len(per_episode) == 3 and len(result.returns) == 3
    np.testing.assert_allclose(result.returns, [sum(r) for r, _ in per_episode])
    np.testing.assert_allclose(result.return_gamma, np.mean([e["return_gamma"] for _, e in per_episode], axis=0))
    np.testing.assert_allclose(result.g_pg, np.mean([e["g_pg"] for _, e in per_episode], axis=0), rtol=1e-6)


def test_runner_keeps_results_aligned_when_episodes_fail():
    runner = local_runner({"fault": "raise", "fault_prob": 0.5, "continuous": True}, env="rllib_ext/Faulty-v0")
    runner.adopt(0, payload(runner, [0.99]))
    results = runner.run_jobs(call(0, 12)).results
    assert any(r.failed for r in results) and not all(r.failed for r in results)
    for r in results:
        assert (r.g_pg is not None) == (not r.failed)


def test_the_pg_baseline_keeps_the_gradient_unbiased_and_cuts_its_variance():
    """Closed form: one-step bandit r(a) = a + K, a ~ N(μ, s²) (no clipping: |μ| + 50 s < 1).

    Per episode, the score-function estimate of ∂E[r]/∂β (β the output bias, μ = tanh β) is
    (r − b)·(a − μ)/s²·μ'. With a = μ + s·z its mean is μ' for every b independent of the episode,
    and its variance μ'²·((μ + K − b)²/s² + 2): with K = 10, s = 0.01, b = 0 gives 1e6 + 2, the
    baseline b = mean reward of an earlier, independent batch gives about 2 + 1/n_prev.
    """
    policy = bandit_policy(mean_unit=0.0, std=0.01)
    K, n_prev, n = 10.0, 100, 1500
    obs = np.zeros((1, 2), dtype=np.float32)
    gen = torch.Generator().manual_seed(2)
    prev = np.stack([policy.act(obs[0], explore=True, generator=gen) for _ in range(n_prev)])[:, 0] + K
    baseline = cv.discounted_weights(cv.mean_reward_sequence(prev[:, None]), [0.99])  # T = 1
    actions = np.stack([policy.act(obs[0], explore=True, generator=gen) for _ in range(n)])
    rewards = actions[:, 0].astype(np.float64) + K
    sizes = [p.numel() for p in policy.parameters()]
    bias = sum(sizes[: [p is policy.net[-1].bias for p in policy.parameters()].index(True)])  # β's flat index
    raw, based = [], []
    for a, r in zip(actions, rewards, strict=True):
        w = cv.discounted_weights([r], [0.99])
        raw.append(policy_gradients(policy, obs, a[None], w)[0, bias])
        based.append(policy_gradients(policy, obs, a[None], cv.subtract_baseline(w, baseline))[0, bias])
    raw, based = np.array(raw), np.array(based)
    assert abs(based.mean() - 1.0) < 4 * based.std() / np.sqrt(n)  # unbiased: μ' = 1 at β = 0
    assert abs(raw.mean() - 1.0) < 4 * raw.std() / np.sqrt(n)
    assert raw.var() == pytest.approx(1e6 + 2, rel=0.15)
    assert based.var() < 3.0  # ≈ 2 + 1/n_prev: a 3e5-fold reduction


def test_the_runner_pg_is_eq5_at_the_perturbed_theta_minus_the_shipped_baseline():
    """ĝ^pg of a result is Σ_t (w_t(γ) − b_t(γ)) ∇log π_{θ_u+σε_i}(a_t|s_t) of that episode, recomputed
    here from the recorded trajectory with a fresh policy holding θ_u + σε_i (not θ_u); the rewards
    come back zero-padded to the step cap."""
    runner = local_runner()
    gammas = np.array([0.9, 0.5])
    baseline = np.array([[3.0, 2.0, 1.0], [1.5, 1.0, 0.5]])
    p = payload(runner, gammas)
    runner.adopt(0, type(p)(theta=p.theta, filter_state=p.filter_state, gammas=gammas, pg_baseline=baseline))
    result = runner.run_jobs(call(0, 2)).results[1]  # the recorder holds this (the last) episode
    rec = runner.env
    steps = len(rec.rewards)
    np.testing.assert_array_equal(result.rewards[:steps], np.asarray(rec.rewards, dtype=np.float32))
    assert result.rewards.shape == (runner.step_cap,) and not result.rewards[steps:].any()
    theta_i = runner.perturbed_theta(3, 2, 1)
    assert not np.allclose(theta_i, p.theta)
    obs_dim, action_space = runner.env.observation_space.shape[0], runner.env.action_space
    policy = MLPPolicy(obs_dim, action_space, hiddens=[8], activation="relu", head="gaussian")
    policy.set_flat(theta_i)
    weights = cv.subtract_baseline(cv.discounted_weights(rec.rewards, gammas), baseline)
    obs = np.stack(rec.observations[:steps]).astype(np.float32)  # no observation filter in §4
    expected = policy_gradients(policy, obs, np.stack(rec.actions), weights)
    np.testing.assert_allclose(result.g_pg, expected, rtol=1e-5, atol=1e-6)
    at_theta_u = MLPPolicy(obs_dim, action_space, hiddens=[8], activation="relu", head="gaussian")
    at_theta_u.set_flat(p.theta)
    assert not np.allclose(result.g_pg, policy_gradients(at_theta_u, obs, np.stack(rec.actions), weights), rtol=1e-3)
