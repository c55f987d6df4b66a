"""IMPACT_EXT's learner on real CartPole batches (RLlib env runner + IMPACTTorchLearner).

Algorithm 1 of paper 004: target evaluation cached at a batch's first draw (line 7), at most K
draws per batch (line 10), a target sync exactly every n learner updates (line 11), and the KL
coefficient adapted at each sync in the right direction.
"""

from __future__ import annotations

import pytest
import ray
import torch

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from rllib_ext.algorithms.impact.impact_learner import TARGET_LOGP


def _build(**training):
    config = (
        IMPACTConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=50)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .training(train_batch_size_per_learner=100, lr=1e-3, **training)
        .debugging(seed=0)
    )
    return config.build_algo()


def _package(algo):
    """One train batch: a reference to the episodes of one local sample() call (100 steps)."""
    return [ray.put(algo.env_runner.sample(num_timesteps=100, explore=True))]


def _target_equals_main(learner) -> bool:
    module = learner.module["default_policy"].unwrapped()
    return all(
        all(torch.equal(a, b) for a, b in zip(main.parameters(), target.parameters()))
        for main, target in module.get_target_network_pairs()
    )


@pytest.fixture
def algo_n4(ray_session):
    algo = _build(
        circular_buffer_num_batches=2, circular_buffer_iterations_per_batch=3, target_network_update_freq=4
    )
    yield algo
    algo.stop()


def test_target_sync_exactly_every_n_updates(algo_n4):
    learner = algo_n4.learner_group._learner
    assert _target_equals_main(learner)
    for _ in range(13):
        packages = [] if len(learner.buffer) else [_package(algo_n4)]
        out = learner.impact_update(packages=packages, timesteps={}, max_updates=1)
        assert out["num_updates"] == 1
        t = learner.num_updates
        assert learner.num_target_syncs == t // 4
        # Right after a sync θ' = θ; one update later they differ.
        assert _target_equals_main(learner) == (t % 4 == 0)


def test_each_batch_drawn_k_times_and_target_output_cached(algo_n4):
    learner = algo_n4.learner_group._learner
    out = learner.impact_update(packages=[_package(algo_n4), _package(algo_n4)], timesteps={}, max_updates=1)
    assert out["num_draws_left"] == 2 * 3 - 1
    (drawn,) = [e for e in learner.buffer._entries if e.draws == 1]
    cached = drawn.item.policy_batches["default_policy"][TARGET_LOGP].clone()
    # A target sync between draws must not change the batch's target output (k = 0 only).
    learner.sync_target_networks()
    out = learner.impact_update(packages=[], timesteps={})
    assert out["num_updates"] == 5 and out["num_draws_left"] == 0 and len(learner.buffer) == 0
    assert torch.equal(drawn.item.policy_batches["default_policy"][TARGET_LOGP], cached)
    assert learner.buffer.num_draws == 6 and learner.buffer.num_evicted_used_up == 2
    stats = out["results"]["__all_modules__"]
    assert stats["circular_buffer_mean_draws_per_batch"].peek() == 3


@pytest.mark.parametrize("kl_target,expected", [(1e-9, 1.5), (1e3, 0.5)])
def test_kl_coeff_adapts_at_target_sync(ray_session, kl_target, expected):
    algo = _build(
        circular_buffer_num_batches=1,
        circular_buffer_iterations_per_batch=2,
        target_network_update_freq=2,
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
