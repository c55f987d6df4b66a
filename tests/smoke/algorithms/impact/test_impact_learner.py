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


def _build(model=None, **training):
    # The learner in the caller's thread: these tests drive impact_update's draws one by one.
    training = {"train_batch_size_per_learner": 100, "lr": 1e-3, "learner_thread": False, **training}
    config = (
        IMPACTConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=50)
        .rl_module(model_config={"fcnet_hiddens": [16], **(model or {})})
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
        assert out.num_updates == 1
        t = learner.num_updates
        assert learner.num_target_syncs == t // 4
        # Right after a sync θ' = θ; one update later they differ.
        assert _target_equals_main(learner) == (t % 4 == 0)


def test_each_batch_drawn_k_times_and_target_output_cached(algo_n4):
    learner = algo_n4.learner_group._learner
    out = learner.impact_update(packages=[_package(algo_n4), _package(algo_n4)], timesteps={}, max_updates=1)
    assert out.num_draws_left == 2 * 3 - 1
    ((drawn, draws),) = learner.buffer.entries
    assert draws == 1
    cached = drawn.policy_batches["default_policy"][TARGET_LOGP].clone()
    # The batch's V-trace GAE-λ operator was built at its first draw and is kept for the others.
    constants = drawn.policy_batches["default_policy"][BATCH_CONSTANTS]
    # A target sync between draws must not change the batch's target output (k = 0 only).
    learner.sync_target_networks()
    out = learner.impact_update(packages=[], timesteps={})
    assert out.num_updates == 5 and out.num_draws_left == 0 and len(learner.buffer) == 0
    assert torch.equal(drawn.policy_batches["default_policy"][TARGET_LOGP], cached)
    assert drawn.policy_batches["default_policy"][BATCH_CONSTANTS] is constants
    assert learner.buffer.num_draws == 6 and learner.buffer.num_evicted_used_up == 2
    stats = out.results["__all_modules__"]
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


@pytest.mark.parametrize("use_lstm", [False, True])
def test_value_targets_on_real_batches_bootstrap_chunk_ends_and_stop_at_terminals(ray_session, use_lstm):
    """V-trace targets (``value_target="vtrace"``) and GAE-λ advantages on a real batch, against
    closed forms computed from the sampled episodes themselves (on-policy: πtarget = πworker, so
    ρ = c = 1); the default target V + A^{V-GAE} is checked too.

    RLlib's layout: each episode chunk (one per fragment and episode) gets one phantom step
    (and, with an LSTM, zero-padding to a multiple of ``max_seq_len``, in rows of that length).
    The learner runs the traces over the whole batch as one column, so each trace runs to its
    chunk's end, as paper 004 §3.1 defines it per fragment; neither the fragment's row length
    (50) nor the LSTM's sequence length (7) cuts it. For a chunk with L steps:
    v_t = Σ_{t≤i<L} γ^(i−t) r_i + γ^(L−t) V_L and A_t = Σ_{t≤i<L} (γλ)^(i−t) δ_i,
    δ_i = r_i + γ V_{i+1} − V(s_i), where V_L is V(s_L) at a chunk cut before the episode's end
    and 0 after a terminal step.
    """
    gamma, lam = 0.9, 0.8
    model = {"use_lstm": True, "max_seq_len": 7, "lstm_cell_size": 8} if use_lstm else {}
    algo = _build(gamma=gamma, lambda_=lam, train_batch_size_per_learner=150, value_target="vtrace", model=model)
    try:
        learner = algo.learner_group._learner
        module = learner.module["default_policy"].unwrapped()
        # Random CartPole episodes are ~20 steps: the batch has terminated episodes, a last
        # chunk cut mid-episode, and chunks longer than the LSTM's sequences.
        episodes = algo.env_runner.sample(num_timesteps=150, explore=True)
        data = TrainingData(episodes_refs=[ray.put(episodes)])
        data.solve_refs()
        batch = learner._make_batch_if_necessary(training_data=data).policy_batches["default_policy"]
        batch[TARGET_LOGP] = batch[Columns.ACTION_LOGP]  # on-policy: πtarget = πworker
        chunks = [(np.asarray(e.get_rewards(), np.float64), e.is_terminated) for e in episodes]
        assert any(t for _, t in chunks) and not chunks[-1][1]
        assert max(len(r) for r, _ in chunks) > (7 if use_lstm else 50) // 2

        config = learner.config.get_config_for_module("default_policy")
        with torch.no_grad():
            values = module.compute_values(batch)  # [N] or, with the LSTM, [B, max_seq_len]
            vs, adv = learner.value_targets_and_advantages(config=config, batch=batch, values=values)
        mask = batch[Columns.LOSS_MASK].reshape(-1).numpy().astype(bool)
        v_flat = values.reshape(-1).double().numpy()
        # The chunks' steps in the batch's order: real steps, then the phantom step (V(s_L)).
        real_idx = np.flatnonzero(mask)
        assert len(real_idx) == sum(len(r) for r, _ in chunks)
        expected_vs, expected_adv, expected_values, pos = [], [], [], 0
        for rewards, terminated in chunks:
            L = len(rewards)
            idx = real_idx[pos : pos + L]
            pos += L
            assert np.all(np.diff(idx) == 1)  # one chunk's real steps are contiguous
            v = v_flat[np.r_[idx, idx[-1] + 1]]  # V(s_0..s_L): the phantom step follows
            v_next = v[1:] * np.r_[np.ones(L - 1), 0.0 if terminated else 1.0]
            expected_vs.append(_discounted(rewards, gamma) + gamma ** np.arange(L, 0, -1) * v_next[-1])
            expected_adv.append(_discounted(rewards + gamma * v_next - v[:L], gamma * lam))
            expected_values.append(v[:L])
        flat = lambda x: x.reshape(-1).double().numpy()[mask]  # noqa: E731
        np.testing.assert_allclose(flat(vs), np.concatenate(expected_vs), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(flat(adv), np.concatenate(expected_adv), rtol=1e-4, atol=1e-4)
        # The default critic target (Algorithm 1 line 8): V + A^{V-GAE} with the same λ.
        v_gae = config.copy(copy_frozen=False)
        v_gae.value_target = "v_gae"
        with torch.no_grad():
            targets, _ = learner.value_targets_and_advantages(config=v_gae, batch=batch, values=values)
        v_real = np.concatenate(expected_values)
        np.testing.assert_allclose(flat(targets), v_real + np.concatenate(expected_adv), rtol=1e-4, atol=1e-4)
        # The loss runs on the same layout: one update on this batch is finite.
        out = learner.impact_update(packages=[[ray.put(episodes)]], timesteps={}, max_updates=1)
        assert out.num_updates == 1 and np.isfinite(out.results["default_policy"]["total_loss"].peek())
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
        assert out.num_updates == 1
        stats = out.results["default_policy"]
        raw_mean, pi_loss = stats["advantages_mean"].peek(), stats["policy_loss"].peek()
        assert abs(raw_mean) > 1e-3  # untrained critic, rewards of 1
        assert stats["ratio_r3_max"].peek() == pytest.approx(1.0, abs=1e-5)
        assert pi_loss == pytest.approx(0.0 if standardize else -raw_mean, abs=1e-5)
    finally:
        algo.stop()
