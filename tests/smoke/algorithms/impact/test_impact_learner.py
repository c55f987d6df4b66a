"""IMPACT_EXT's learner on real CartPole batches (RLlib env runner + IMPACTTorchLearner).

Algorithm 1 of paper 004: target evaluation cached at a batch's first draw (line 7), at most K
draws per batch (line 10), a target sync exactly every n learner updates (line 11), and the KL
coefficient adapted at each sync in the right direction.
"""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.training_data import TrainingData

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from rllib_ext.algorithms.impact.impact_learner import TARGET_LOGP
from rllib_ext.algorithms.impact.torch.impact_torch_learner import BATCH_CONSTANTS


def _build(**training):
    # The learner in the caller's thread: these tests drive impact_update's draws one by one.
    training = {"train_batch_size_per_learner": 100, "lr": 1e-3, "learner_thread": False, **training}
    config = (
        IMPACTConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=50)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .training(**training)
        .debugging(seed=0)
    )
    return config.build_algo()


def _package(algo):
    """One train batch: a reference to the episodes of one local sample() call (100 steps)."""
    return [ray.put(algo.env_runner.sample(num_timesteps=100, explore=True))]


def _target_equals_main(learner) -> bool:
    module = learner.module["default_policy"].unwrapped()
    return all(
        all(torch.equal(a, b) for a, b in zip(main.parameters(), target.parameters(), strict=False))
        for main, target in module.get_target_network_pairs()
    )


@pytest.fixture
def algo_n4(ray_session):
    # n = 4 is in §4.1.1's "does not learn" range; forced here to see several syncs quickly.
    algo = _build(
        circular_buffer_num_batches=2,
        circular_buffer_iterations_per_batch=3,
        target_network_update_freq=4,
        force_target_network_update_freq=True,
    )
    yield algo
    algo.stop()


def test_target_sync_exactly_every_n_updates(algo_n4):
    learner = algo_n4.learner_group._learner
    assert _target_equals_main(learner)
    for _ in range(13):
        # A new batch each call: the cursor's next slot may be empty (round-robin traversal).
        out = learner.impact_update(packages=[_package(algo_n4)], timesteps={}, max_updates=1)
        assert out["num_updates"] == 1
        t = learner.num_updates
        assert learner.num_target_syncs == t // 4
        # Right after a sync θ' = θ; one update later they differ.
        assert _target_equals_main(learner) == (t % 4 == 0)


def test_each_batch_drawn_k_times_and_target_output_cached(algo_n4):
    learner = algo_n4.learner_group._learner
    out = learner.impact_update(packages=[_package(algo_n4), _package(algo_n4)], timesteps={}, max_updates=1)
    assert out["num_draws_left"] == 2 * 3 - 1
    ((drawn, draws),) = learner.buffer.entries
    assert draws == 1
    cached = drawn.policy_batches["default_policy"][TARGET_LOGP].clone()
    # The batch's V-trace GAE-λ operator was built at its first draw and is kept for the others.
    constants = drawn.policy_batches["default_policy"][BATCH_CONSTANTS]
    # A target sync between draws must not change the batch's target output (k = 0 only).
    learner.sync_target_networks()
    out = learner.impact_update(packages=[], timesteps={})
    assert out["num_updates"] == 5 and out["num_draws_left"] == 0 and len(learner.buffer) == 0
    assert torch.equal(drawn.policy_batches["default_policy"][TARGET_LOGP], cached)
    assert drawn.policy_batches["default_policy"][BATCH_CONSTANTS] is constants
    assert learner.buffer.num_draws == 6 and learner.buffer.num_evicted_used_up == 2
    stats = out["results"]["__all_modules__"]
    assert stats["circular_buffer_mean_draws_per_batch"].peek() == 3


@pytest.mark.parametrize("kl_target,expected", [(1e-9, 1.5), (1e3, 0.5)])
def test_kl_coeff_adapts_at_target_sync(ray_session, kl_target, expected):
    algo = _build(
        circular_buffer_num_batches=1,
        circular_buffer_iterations_per_batch=2,
        target_network_update_freq=2,
        force_target_network_update_freq=True,
        use_kl_loss=True,
        kl_coeff=1.0,
        kl_target=kl_target,
    )
    try:
        learner = algo.learner_group._learner
        learner.impact_update(packages=[_package(algo)], timesteps={})  # 2 updates -> 1 sync
        assert learner.num_target_syncs == 1
        assert learner.curr_kl_coeffs_per_module["default_policy"].item() == pytest.approx(expected)
    finally:
        algo.stop()


def _discounted(x, factor):
    """y_t = Σ_k factor^k x_{t+k} (backwards)."""
    out, acc = np.zeros(len(x)), 0.0
    for t in reversed(range(len(x))):
        acc = x[t] + factor * acc
        out[t] = acc
    return out


def test_value_targets_on_real_batches_bootstrap_chunk_ends_and_stop_at_terminals(ray_session):
    """V-trace targets (``value_target="vtrace"``) and GAE-λ advantages on a real batch, against
    closed forms computed from the sampled episodes themselves (on-policy: πtarget = πworker, so
    ρ = c = 1); the default target V + A^{V-GAE} is checked too.

    RLlib's layout: each episode chunk gets one phantom step, the chunks are concatenated and
    cut into time-major rows of T = rollout_fragment_length steps (as in APPO). So every trace
    segment ends either at the chunk's end or at a row boundary, where it bootstraps from V of
    the next observation. For a segment [a, b) of a chunk with L steps:
    v_t = Σ_{t≤i<b} γ^(i−t) r_i + γ^(b−t) V_b and A_t = Σ_{t≤i<b} (γλ)^(i−t) δ_i,
    δ_i = r_i + γ V_{i+1} − V(s_i), where V_b (and V_L in δ_{L−1}) is V(s_b) inside the chunk,
    V(s_L) at a chunk cut before the episode's end and 0 after a terminal step.
    """
    gamma, lam, T = 0.9, 0.8, 50
    algo = _build(gamma=gamma, lambda_=lam, train_batch_size_per_learner=150, value_target="vtrace")
    try:
        learner = algo.learner_group._learner
        module = learner.module["default_policy"].unwrapped()
        # Random CartPole episodes are ~20 steps: the batch has terminated episodes and a
        # last chunk cut mid-episode, and rows of 50 cut some chunks in two.
        episodes = algo.env_runner.sample(num_timesteps=150, explore=True)
        chunks = [
            (np.asarray(e.get_rewards(), np.float64), np.asarray(e.get_observations(), np.float32), e.is_terminated)
            for e in episodes
        ]
        assert any(t for *_, t in chunks) and not chunks[-1][2]

        expected_vs, expected_adv, expected_values, offset, row_cuts = [], [], [], 0, 0
        with torch.no_grad():
            for rewards, obs, terminated in chunks:
                L = len(rewards)
                v = module.compute_values({Columns.OBS: torch.as_tensor(obs)}).double().numpy()
                v_next = v[1:] * np.r_[np.ones(L - 1), 0.0 if terminated else 1.0]
                cuts = [t for t in range(1, L) if (offset + t) % T == 0]
                row_cuts += len(cuts)
                for a, b in zip([0, *cuts], [*cuts, L], strict=False):
                    r, vn = rewards[a:b], v_next[a:b]
                    tail = gamma ** np.arange(b - a, 0, -1) * vn[-1]
                    expected_vs.append(_discounted(r, gamma) + tail)
                    expected_adv.append(_discounted(r + gamma * vn - v[a:b], gamma * lam))
                    expected_values.append(v[a:b])
                offset += L + 1  # the phantom step
        assert row_cuts > 0  # the layout case the formula above covers is exercised

        data = TrainingData(episodes_refs=[ray.put(episodes)])
        data.solve_refs()
        batch = learner._make_batch_if_necessary(training_data=data).policy_batches["default_policy"]
        batch[TARGET_LOGP] = batch[Columns.ACTION_LOGP]  # on-policy: πtarget = πworker
        config = learner.config.get_config_for_module("default_policy")
        with torch.no_grad():
            values = module.compute_values(batch)
            vs, adv = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
        n = len(batch[Columns.LOSS_MASK])
        real = batch[Columns.LOSS_MASK].numpy().astype(bool)
        assert n == offset and real.sum() == sum(len(r) for r, *_ in chunks)
        flat = lambda x: x.transpose(0, 1).reshape(-1)[:n].double().numpy()[real]  # noqa: E731
        np.testing.assert_allclose(flat(vs), np.concatenate(expected_vs), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(flat(adv), np.concatenate(expected_adv), rtol=1e-4, atol=1e-4)
        # The default critic target (Algorithm 1 line 8): V + A^{V-GAE} with the same λ.
        v_gae = config.copy(copy_frozen=False)
        v_gae.value_target = "v_gae"
        with torch.no_grad():
            targets, _ = learner.value_targets_and_advantages(config=v_gae, batch=batch, values=values)
        v_real = np.concatenate([v[: len(a)] for v, a in zip(expected_values, expected_adv, strict=True)])
        np.testing.assert_allclose(flat(targets), v_real + np.concatenate(expected_adv), rtol=1e-4, atol=1e-4)
    finally:
        algo.stop()


@pytest.mark.parametrize("standardize", [False, True])
def test_first_update_policy_loss_is_minus_mean_advantage_or_zero_when_standardized(ray_session, standardize):
    """At the first update θ = θ' = the workers' weights, so R3 = 1 and nothing is clipped: the
    policy loss is −mean(A). With the opt-in ``standardize_advantages`` (not in paper 004) that
    mean is 0. The logged ``advantages_mean`` stays the raw one either way."""
    algo = _build(
        standardize_advantages=standardize, circular_buffer_num_batches=1, circular_buffer_iterations_per_batch=1
    )
    try:
        learner = algo.learner_group._learner
        out = learner.impact_update(packages=[_package(algo)], timesteps={})
        assert out["num_updates"] == 1
        stats = out["results"]["default_policy"]
        raw_mean, pi_loss = stats["advantages_mean"].peek(), stats["policy_loss"].peek()
        assert abs(raw_mean) > 1e-3  # untrained critic, rewards of 1
        assert stats["ratio_r3_max"].peek() == pytest.approx(1.0, abs=1e-5)
        assert pi_loss == pytest.approx(0.0 if standardize else -raw_mean, abs=1e-5)
    finally:
        algo.stop()
