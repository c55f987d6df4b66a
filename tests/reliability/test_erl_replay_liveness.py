"""The ERL family's replay actor (AESRL_EXT, CEMRL_EXT): slow is not dead.

Under load (a race beside a test run on 2 cores) the replay actor's ``size`` call can wait longer
than the probe's timeout. Until 2026-11-26 that timeout counted as death: the replay was
re-created and its transitions lost (CEMRL_EXT's smoke test then saw no RL individual), and the
``replay_size`` metric blocked the driver loop every iteration. Only a RayActorError re-creates
it now, and the metric's call is collected when answered. ERLAlgorithm's probe and metric are
called on a stand-in ``self`` with a real (slow, or killed) Ray actor as the replay.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import ray
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext.common.blackbox import BLACKBOX
from rllib_ext.common.erl import algorithm as erl_algorithm
from rllib_ext.common.erl.algorithm import LIFETIME_COUNTERS, ERLAlgorithm


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
        counters=dict.fromkeys(LIFETIME_COUNTERS, 0),
        _replay_size_ref=None,
        recover_actor=lambda which, error: recovered.append((which, type(error).__name__)),
        log_learner_stats=lambda stats: None,
        recovered=recovered,
    )


def _size_logged(algo) -> bool:
    try:
        return algo.metrics.peek((BLACKBOX, "replay_size")) == 123
    except KeyError:
        return False


def test_a_slow_replay_is_alive_and_kept_a_dead_one_is_re_created(ray_session, monkeypatch):
    monkeypatch.setattr(erl_algorithm, "REPLAY_SIZE_TIMEOUT_S", 0.2)
    slow = _algo_stand_in(SlowReplay.remote(2.0))
    assert ERLAlgorithm._replay_alive(slow)
    for _ in range(2):  # the metric asks without waiting: a busy replay delays only the metric
        ERLAlgorithm.log_common(slow)
    assert slow.recovered == [] and not _size_logged(slow)
    ray.get(slow._replay_size_ref)  # answered: the next iteration logs it
    ERLAlgorithm.log_common(slow)
    assert slow.recovered == [] and _size_logged(slow)

    dead = _algo_stand_in(SlowReplay.remote(0.0))
    ERLAlgorithm.log_common(dead)
    ray.kill(dead.replay)
    assert not ERLAlgorithm._replay_alive(dead)
    ray.wait([dead._replay_size_ref], timeout=30)  # the call in flight fails with the actor
    ERLAlgorithm.log_common(dead)
    assert [which for which, _ in dead.recovered] == ["replay actor"]
