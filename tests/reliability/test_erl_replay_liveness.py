"""The ERL family's replay actor (AESRL_EXT, CEMRL_EXT): slow is not dead.

Under load (a race beside a test run on 2 cores) the replay actor's ``size`` call can wait longer
than the probe's timeout. Until 2026-11-26 that timeout counted as death: the replay was
re-created and its transitions lost (CEMRL_EXT's smoke test then saw no RL individual). Only a
RayActorError re-creates it now. ERLAlgorithm's probe and metric are called on a stand-in ``self``
with a real (slow, or killed) Ray actor as the replay.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import ray
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.common.erl import algorithm as erl_algorithm
from rllib_ext.common.erl.algorithm import ERLAlgorithm

COUNTERS = ("individual_steps", "critic_steps", "critic_worker_restarts", "replay_actor_restarts", "n_rl", "n_es")


@ray.remote(num_cpus=0)
class SlowReplay:
    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def size(self) -> int:
        time.sleep(self.delay_s)
        return 123


def _algo_stand_in(replay) -> SimpleNamespace:
    recovered = []
    return SimpleNamespace(
        replay=replay,
        metrics=MetricsLogger(),
        mu=np.zeros(3, np.float32),
        var=np.ones(3, np.float32),
        counters=dict.fromkeys(COUNTERS, 0),
        recover_actor=lambda which, error: recovered.append((which, type(error).__name__)),
        recovered=recovered,
    )


def test_a_slow_replay_is_alive_and_kept_a_dead_one_is_re_created(ray_session, monkeypatch):
    monkeypatch.setattr(erl_algorithm, "REPLAY_SIZE_TIMEOUT_S", 0.2)
    slow = _algo_stand_in(SlowReplay.remote(2.0))
    assert ERLAlgorithm._replay_alive(slow)
    ERLAlgorithm.log_common(slow)
    assert slow.recovered == []  # busy: no re-creation, the size is logged another time

    fast = _algo_stand_in(SlowReplay.remote(0.0))
    ray.get(fast.replay.size.remote())  # started (an actor's start can take longer than the timeout)
    ERLAlgorithm.log_common(fast)
    assert fast.recovered == [] and fast.metrics.peek(("blackbox", "replay_size")) == 123

    dead = _algo_stand_in(SlowReplay.remote(0.0))
    ray.kill(dead.replay)
    assert not ERLAlgorithm._replay_alive(dead)
    ERLAlgorithm.log_common(dead)
    assert [which for which, _ in dead.recovered] == ["replay actor"]
