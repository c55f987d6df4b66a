"""IMPACT_EXT's learner thread (paper 004 Figure 1c) on real CartPole batches and env runners.

The learner draws from C(N, K) in its own thread: sampling goes on while it trains, draws visit
the N held batches in turn with each batch drawn exactly K times, a failure in the thread reaches
the driver, and stopping the algorithm stops the thread.
"""

from __future__ import annotations

import math
import time

import pytest
import ray
import torch
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from rllib_ext.algorithms.impact.torch.impact_torch_learner import IMPACTTorchLearner
from tests.reliability.helpers import runner_weights_finite

#: Seconds one update takes in :class:`SlowLearner`: far longer than a 25-step CartPole fragment.
SLOW_UPDATE_S = 2.0
M, K = 50, 2


class SlowLearner(IMPACTTorchLearner):
    """IMPACT's learner with a long update (sleeps in the loss; sleeping releases the GIL)."""

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        time.sleep(SLOW_UPDATE_S)
        return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)


class FailingLearner(IMPACTTorchLearner):
    """Fails in its second update."""

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if self.num_updates == 1:
            raise RuntimeError("loss failed on purpose")
        return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)


class TransientNaNLearner(IMPACTTorchLearner):
    """Holds NaN in its first parameter for a moment inside every optimizer step, then puts the
    values back: weights read in the middle of an update are not the update's result."""

    HOLD_S = 0.02

    def apply_gradients(self, gradients_dict):
        param = next(self.module["default_policy"].parameters())
        with torch.no_grad():
            saved = param.detach().clone()
            param.fill_(float("nan"))
            time.sleep(self.HOLD_S)  # releases the GIL: the driver runs meanwhile
            param.copy_(saved)
        return super().apply_gradients(gradients_dict)


def _config(runners=0, **training):
    training = {
        "train_batch_size_per_learner": M,
        "circular_buffer_num_batches": 2,
        "circular_buffer_iterations_per_batch": K,
        "circular_buffer_queue_size": 2,
        "lr": 1e-3,
        **training,
    }
    return (
        IMPACTConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=runners, rollout_fragment_length=25)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .training(**training)
        .debugging(seed=0)
    )


def _wait_for(condition, state, limit_s=60.0):
    """Polls ``condition`` (a liveness bound, not a timing assertion); ``state()`` explains a miss."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"condition not reached: {state()}"
        time.sleep(0.01)


def _learner_state(learner):
    return lambda: (
        f"updates {learner.num_updates}, draws {learner.buffer.draw_log}, buffer {learner.buffer.get_stats()}, "
        f"thread alive {learner.learner_thread_alive}, error {learner._learner_thread.error!r}"
    )


@pytest.mark.parametrize("learner_thread", [True, False])
def test_sampling_goes_on_while_the_learner_trains(ray_session, learner_thread):
    """With the thread, runners keep sampling during long updates (the surplus is dropped and
    counted); in training_step (the ablation) sampling waits for the updates."""
    # One slot, one waiting place, one fragment per batch: a third batch that arrives during
    # the long updates must be dropped, which only happens when sampling does not wait.
    config = _config(
        runners=1,
        learner_class=SlowLearner,
        learner_thread=learner_thread,
        train_batch_size_per_learner=25,
        circular_buffer_num_batches=1,
        circular_buffer_queue_size=1,
    )
    config.reporting(min_time_s_per_iteration=1)
    algo = config.build_algo()
    try:
        for _ in range(60):  # a liveness bound: the runner's start can take many seconds on a busy machine
            result = algo.train()
            shared = result.get("learners", {}).get("__all_modules__", {})
            if shared.get("num_learner_updates_lifetime", 0) >= 3:
                break
        sampled = result[NUM_ENV_STEPS_SAMPLED_LIFETIME]
        updates = shared["num_learner_updates_lifetime"]
        dropped = shared["circular_buffer_num_dropped_lifetime"]
        assert updates >= 3
        consumed = updates / K * 25  # env steps of the batches the learner drew
        if learner_thread:
            # Seconds of updates pass while the runner samples 25-step fragments.
            assert sampled > 4 * consumed, (sampled, updates)
            assert dropped > 0  # the runners outpaced the learner
            assert algo.learner_group._learner.learner_thread_alive
        else:
            # Sampling waits for the learner: per learner call at most the 2 fragments in
            # flight arrive (M = one fragment, K draws per batch).
            assert sampled <= (math.ceil(updates / K) + 2) * 2 * 25, (sampled, updates)
    finally:
        algo.stop()
    if learner_thread:
        assert not algo.learner_group._learner.learner_thread_alive  # stop() joined it


def test_thread_draws_n_batches_in_turn_each_exactly_k_times(ray_session):
    N, K3 = 3, 2
    config = _config(
        circular_buffer_num_batches=N, circular_buffer_iterations_per_batch=K3, circular_buffer_queue_size=N
    )
    algo = config.build_algo()
    try:
        learner = algo.learner_group._learner
        learner.buffer.record_draws = True
        packages = [[ray.put(algo.env_runner.sample(num_timesteps=M, explore=True))] for _ in range(N)]
        # One call queues all N batches before the thread starts: its draws are deterministic.
        learner.impact_update(packages=packages, timesteps={})
        _wait_for(lambda: learner.num_updates == N * K3, _learner_state(learner))
        assert learner.buffer.draw_log == [(b, k) for k in range(K3) for b in range(N)]
        out = learner.impact_update(packages=[], timesteps={})
        assert out.num_updates == N * K3 and out.num_draws_left == 0
        assert out.rl_module_state is not None  # broadcast_interval 1: a snapshot is due
        assert learner.learner_thread_alive  # waiting on the empty buffer, not finished
    finally:
        algo.stop()


def test_a_failure_in_the_learner_thread_reaches_the_driver(ray_session):
    algo = _config(learner_class=FailingLearner).build_algo()
    try:
        learner = algo.learner_group._learner
        # Two batches for the two slots: the second update draws the second batch.
        packages = [[ray.put(algo.env_runner.sample(num_timesteps=M, explore=True))] for _ in range(2)]
        learner.impact_update(packages=packages, timesteps={})
        _wait_for(lambda: not learner.learner_thread_alive, _learner_state(learner))
        with pytest.raises(RuntimeError, match="loss failed on purpose"):
            learner.impact_update(packages=[], timesteps={})
    finally:
        algo.stop()


def test_weights_in_the_middle_of_an_update_are_never_checked_or_broadcast(ray_session):
    """The driver never reads the live weights while the thread updates them: the finite-weights
    checks and the broadcast snapshot see only weights between updates (before 2026-11-24 the
    driver's check read them mid-step and failed finite runs; CartPole, 2x256)."""
    config = _config(runners=1, learner_class=TransientNaNLearner).reporting(min_time_s_per_iteration=1)
    algo = config.build_algo()
    try:
        updates = 0
        for _ in range(30):  # a liveness bound: a quiet machine needs ~3 iterations, a loaded one more
            result = algo.train()
            updates = result["learners"]["__all_modules__"]["num_learner_updates_lifetime"]
            if updates >= 20:
                break
        assert updates >= 20, updates  # many NaN windows passed while the driver ran
        assert runner_weights_finite(algo)
    finally:
        algo.stop()


class NaNLearner(IMPACTTorchLearner):
    """Its first update leaves NaN in the first policy parameter (for good)."""

    def apply_gradients(self, gradients_dict):
        out = super().apply_gradients(gradients_dict)
        with torch.no_grad():
            next(self.module["default_policy"].parameters()).view(-1)[0] = float("nan")
        return out


@pytest.mark.parametrize("learner_thread", [True, False])
def test_nonfinite_weights_are_never_published(ray_session, learner_thread):
    """The snapshot's NaN check (one fused torch reduction, outside the update lock) still stops
    non-finite weights before any broadcast, and names the parameter."""
    algo = _config(learner_class=NaNLearner, learner_thread=learner_thread).build_algo()
    try:
        learner = algo.learner_group._learner
        package = [ray.put(algo.env_runner.sample(num_timesteps=M, explore=True))]
        with pytest.raises(FloatingPointError, match=r"after update 1 — default_policy/"):
            learner.impact_update(packages=[package], timesteps={}, max_updates=1)
            _wait_for(lambda: not learner.learner_thread_alive, _learner_state(learner))
            learner.take_weights()
        assert learner._weights is None  # nothing published
    finally:
        algo.stop()


def test_driver_reduces_learner_metrics_only_with_new_batches(ray_session):
    """The driver loop (~70/s) calls ``impact_update`` (and its ~1 ms metrics reduction) only
    when it has new train batches, at each iteration's first loop (which resumes the held
    thread), and at least once per LEARNER_RESULTS_PERIOD_S; other loops only take the newest
    weights snapshot, which still reaches the runners between train batches."""
    from rllib_ext.algorithms.impact.impact import LEARNER_RESULTS_PERIOD_S

    # M = 4 fragments: most loops bring no complete train batch.
    config = _config(runners=1, train_batch_size_per_learner=100).reporting(min_time_s_per_iteration=2)
    algo = config.build_algo()
    try:
        learner = algo.learner_group._learner
        calls = {"with_batches": 0, "without": 0, "take_weights": 0, "snapshots": 0}
        update, take = learner.impact_update, learner.take_weights

        def counting_update(**kwargs):
            calls["with_batches" if kwargs["packages"] else "without"] += 1
            return update(**kwargs)

        def counting_take():
            calls["take_weights"] += 1
            state = take()
            calls["snapshots"] += state is not None
            return state

        learner.impact_update, learner.take_weights = counting_update, counting_take
        start, iterations, result = time.monotonic(), 0, {}
        while iterations < 30:  # a liveness bound: the runner's start can take many seconds
            result = algo.train()
            iterations += 1
            shared = result.get("learners", {}).get("__all_modules__", {})
            if shared.get("num_learner_updates_lifetime", 0) >= 4 and calls["snapshots"] > 0 and iterations >= 2:
                break
        elapsed = time.monotonic() - start
        assert shared["num_learner_updates_lifetime"] >= 4, (calls, shared)
        assert calls["with_batches"] > 0 and calls["snapshots"] > 0, calls
        # Without new batches: the iterations' first loops plus one per period, at most.
        assert calls["without"] <= iterations + elapsed / LEARNER_RESULTS_PERIOD_S + 1, (calls, iterations, elapsed)
        assert calls["take_weights"] > calls["without"] + calls["with_batches"], calls
    finally:
        algo.stop()
