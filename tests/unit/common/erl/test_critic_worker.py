"""The ERL family's shared critic (paper 001 Fig. 2b): its target critic's update schedule.

Both references soft-update the target critic after every critic step (apourchot/CEM-RL
``CriticTD3.update``; aes-rl's critic-only TD3 calls); ``policy_delay`` = 2 is TD3's schedule.
No Ray: the replay actor is a stand-in whose ``.remote`` calls return plain values.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig
from rllib_ext.common import waits
from rllib_ext.common.erl import critic_worker
from rllib_ext.common.erl.protocol import CriticReply
from rllib_ext.common.offpolicy import td3

OBS_DIM, ACT_DIM = 3, 1


class _Call:
    def __init__(self, fn):
        self.remote = fn


class FakeReplay:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.size = _Call(lambda: 10_000)
        self.sample = _Call(self._sample)

    def _sample(self, batch, num_batches=1, fields=None):
        r = self.rng
        data = {
            "obs": r.normal(size=(num_batches, batch, OBS_DIM)).astype(np.float32),
            "actions": r.uniform(-1, 1, size=(num_batches, batch, ACT_DIM)).astype(np.float32),
            "rewards": r.normal(size=(num_batches, batch)).astype(np.float32),
            "next_obs": r.normal(size=(num_batches, batch, OBS_DIM)).astype(np.float32),
            "terminateds": np.zeros((num_batches, batch), dtype=np.float32),
        }
        return {k: data[k] for k in fields or data}


def _worker(monkeypatch, **training):
    monkeypatch.setattr(waits.ray, "get", lambda x, timeout=None: x)  # the replay answers at once
    config = CEMRLConfig().training(
        policy_hiddens=[8], critic_hiddens=[8], rl_batch_size=4, replay_sample_chunk=3, **training
    )
    space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    return critic_worker.CriticWorker(OBS_DIM, space, config.td3_settings, FakeReplay(), seed=0)


def test_erl_default_updates_the_target_critic_after_every_critic_step():
    assert CEMRLConfig().policy_delay == 1


@pytest.mark.parametrize("policy_delay, steps, expected", [(1, 7, 7), (2, 7, 3), (3, 9, 3)])
def test_target_critic_soft_updates_follow_policy_delay(monkeypatch, policy_delay, steps, expected):
    worker = _worker(monkeypatch, policy_delay=policy_delay)
    calls = []
    real = td3.soft_update  # TD3Updater.critic_steps updates the target
    monkeypatch.setattr(td3, "soft_update", lambda *a: (calls.append(a), real(*a)))
    actor_flat = worker.updater.actor.get_flat()
    before = {k: v.clone() for k, v in worker.updater.critic_target.state_dict().items()}
    out = worker.train(steps, actor_flat)
    assert out.steps == steps and len(calls) == expected
    after = worker.updater.critic_target.state_dict()
    assert any(not np.allclose(before[k].numpy(), after[k].numpy()) for k in before)


def test_train_replies_with_a_typed_message(monkeypatch):
    """The reply is a :class:`CriticReply`: the new weights, the mean statistics, the steps."""
    worker = _worker(monkeypatch)
    out = worker.train(3, worker.updater.actor.get_flat())
    assert isinstance(out, CriticReply)
    assert out.steps == 3 and out.train_s > 0
    assert set(out.critic) == set(worker.updater.critic.state_dict())
    assert out.stats and all(np.isfinite(v) for v in out.stats.values())


def test_train_on_a_replay_smaller_than_a_minibatch_trains_nothing(monkeypatch):
    worker = _worker(monkeypatch)
    worker.replay.size = _Call(lambda: 1)  # e.g. after a restore without replay contents
    out = worker.train(5, worker.updater.actor.get_flat())
    assert isinstance(out, CriticReply)
    assert out.critic is None and out.steps == 0 and out.stats == {}


def test_a_time_bounded_call_returns_after_the_chunk_that_passes_its_bound(monkeypatch):
    """AES-RL's ``critic_call_s``: the call stops after the replay chunk in which ``max_s`` passed
    (here a clock that moves 1 s per reading: after the first chunk of 3), with the steps it took;
    without a bound it takes all of them."""
    worker = _worker(monkeypatch)
    clock = iter(range(1000))
    monkeypatch.setattr(critic_worker.time, "perf_counter", lambda: float(next(clock)))
    actor_flat = worker.updater.actor.get_flat()
    assert worker.train(9, actor_flat, max_s=0.5).steps == 3
    assert worker.train(9, actor_flat, max_s=None).steps == 9
