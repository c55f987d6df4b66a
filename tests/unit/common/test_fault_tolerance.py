"""ThrottledEnvRunnerProbe: RLlib's probe of unhealthy env runners at most once per interval and group."""

from __future__ import annotations

import pytest

from rllib_ext.common import fault_tolerance
from rllib_ext.common.fault_tolerance import PROBE_INTERVAL_S, ThrottledEnvRunnerProbe, has_unhealthy_env_runners


class FakeGroup:
    """The EnvRunnerGroup methods the mixin and RLlib's restore use; counts probes."""

    def __init__(self, num_remote: int = 2, unhealthy: int = 0) -> None:
        self.num_remote = num_remote
        self.unhealthy = unhealthy
        self.probes = 0

    def num_remote_env_runners(self) -> int:
        return self.num_remote

    def num_healthy_remote_env_runners(self) -> int:
        return self.num_remote - self.unhealthy

    def probe_unhealthy_env_runners(self) -> list[int]:
        self.probes += 1
        return []


class FakeAlgorithm:
    """Stands for RLlib's Algorithm: its restore_env_runners probes the group (as RLlib's does)."""

    def __init__(self) -> None:
        self.restore_calls = 0

    def restore_env_runners(self, env_runner_group: FakeGroup) -> list[int]:
        self.restore_calls += 1
        return env_runner_group.probe_unhealthy_env_runners()


class Algo(ThrottledEnvRunnerProbe, FakeAlgorithm):
    pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(fault_tolerance, "_clock", c)
    return c


def test_has_unhealthy_env_runners():
    assert not has_unhealthy_env_runners(FakeGroup(2, 0))
    assert has_unhealthy_env_runners(FakeGroup(2, 1))
    assert not has_unhealthy_env_runners(FakeGroup(0, 0))


def test_unhealthy_runner_is_probed_once_per_interval(clock: Clock):
    algo, group = Algo(), FakeGroup(unhealthy=1)
    # 100 rapid calls (a short training_step loop): one probe, the rest return [] at once.
    for _ in range(100):
        assert algo.restore_env_runners(group) == []
        clock.now += 0.01
    assert group.probes == 1
    # Over 3 intervals of rapid calls: one probe per interval.
    for _ in range(int(3 * PROBE_INTERVAL_S / 0.01)):
        algo.restore_env_runners(group)
        clock.now += 0.01
    assert group.probes == 4
    assert algo.restore_calls == group.probes


def test_interval_counts_from_the_end_of_the_probe(clock: Clock):
    algo = Algo()

    class SlowGroup(FakeGroup):
        def probe_unhealthy_env_runners(self) -> list[int]:
            clock.now += 2.0  # a ping of a RESTARTING actor fails after ~2 s
            return super().probe_unhealthy_env_runners()

    group = SlowGroup(unhealthy=1)
    algo.restore_env_runners(group)
    clock.now += PROBE_INTERVAL_S - 0.1
    algo.restore_env_runners(group)
    assert group.probes == 1
    clock.now += 0.2
    algo.restore_env_runners(group)
    assert group.probes == 2


def test_all_healthy_every_call_goes_through(clock: Clock):
    algo, group = Algo(), FakeGroup(unhealthy=0)
    for _ in range(50):
        algo.restore_env_runners(group)
    assert algo.restore_calls == 50 == group.probes


def test_new_failure_after_recovery_is_probed_at_once(clock: Clock):
    algo, group = Algo(), FakeGroup(unhealthy=1)
    algo.restore_env_runners(group)
    group.unhealthy = 0  # restored
    clock.now += 1.0
    algo.restore_env_runners(group)
    group.unhealthy = 1  # another runner fails
    clock.now += 0.1
    algo.restore_env_runners(group)
    assert group.probes == 3


def test_training_and_evaluation_groups_are_throttled_independently(clock: Clock):
    algo = Algo()
    train, evaluation = FakeGroup(unhealthy=1), FakeGroup(num_remote=3, unhealthy=2)
    algo.restore_env_runners(train)
    clock.now += 1.0
    # The evaluation group's first probe is not held back by the training group's.
    algo.restore_env_runners(evaluation)
    assert (train.probes, evaluation.probes) == (1, 1)
    clock.now += PROBE_INTERVAL_S - 0.5  # train's interval is over, evaluation's is not
    algo.restore_env_runners(train)
    algo.restore_env_runners(evaluation)
    assert (train.probes, evaluation.probes) == (2, 1)
    clock.now += 1.0
    algo.restore_env_runners(train)
    algo.restore_env_runners(evaluation)
    assert (train.probes, evaluation.probes) == (2, 2)
    # A healthy group next to a throttled one: every call goes through.
    healthy = FakeGroup(unhealthy=0)
    for _ in range(5):
        algo.restore_env_runners(healthy)
        algo.restore_env_runners(train)
    assert (healthy.probes, train.probes) == (5, 2)


def test_rllib_ext_algorithms_throttle_before_rllib():
    """Every engine base has the mixin between its own overrides and RLlib's Algorithm."""
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.impala.impala import IMPALA

    from rllib_ext.algorithms.impact.impact import IMPACT
    from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm
    from rllib_ext.common.offpolicy.algorithm import OffPolicyAlgorithm

    for cls in (IMPACT, BlackBoxAlgorithm, OffPolicyAlgorithm):
        mro = cls.__mro__
        assert mro.index(ThrottledEnvRunnerProbe) < mro.index(Algorithm), cls
        if IMPALA in mro:  # IMPALA's override re-shares the state server with restored runners
            assert mro.index(ThrottledEnvRunnerProbe) < mro.index(IMPALA), cls
