"""rllib_ext.common.blackbox.pool: the driver's job pool, against a scripted EnvRunnerGroup (no Ray).

The fake group stands for RLlib's EnvRunnerGroup and its actor manager: its actors record each
``run_jobs.remote`` call and return a fake reference; the test finishes calls (their reply
becomes ready), kills a runner (drop it from ``healthy_worker_ids``) or makes a call fail with a
Ray error. ``ray.put``/``wait``/``get`` are stubbed to match.
"""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

from rllib_ext.common.blackbox import pool as async_pool
from rllib_ext.common.blackbox.pool import AsyncJobPool
from rllib_ext.common.blackbox.protocol import (
    Call,
    EpisodeResult,
    IndividualJob,
    Payload,
    PerturbationJob,
    Reply,
    theta_digest,
)


def payload(value):
    return Payload(theta=np.full(3, value, dtype=np.float32))


class FakeRayError(Exception):
    pass


class FakeRef:
    def __init__(self):
        self.reply, self.error = None, None


class FakeGroup:
    """The parts of EnvRunnerGroup (and its actor manager) the pool uses."""

    def __init__(self, runner_ids):
        self.healthy = list(runner_ids)
        self.calls = []  # (runner id, call, ref) of every call sent
        group = self

        class Actor:
            def __init__(self, rid):
                self.run_jobs = types.SimpleNamespace(remote=lambda call: group._send(rid, call))

        class Manager:
            def actors(self):
                return {rid: Actor(rid) for rid in runner_ids}

            def is_actor_healthy(self, rid):
                return rid in group.healthy

            def set_actor_state(self, rid, healthy):
                group.healthy = [r for r in group.healthy if r != rid] + ([rid] if healthy else [])

        self._worker_manager = Manager()

    def _send(self, rid, call):
        assert isinstance(call, Call)
        ref = FakeRef()
        self.calls.append((rid, call, ref))
        return ref

    def healthy_worker_ids(self):
        return list(self.healthy)

    def finish(self, index, busy_s=0.5, theta=None):
        """The call ``self.calls[index]`` returns its jobs' results, run with its payload's θ (or ``theta``)."""
        rid, call, ref = self.calls[index]
        digest = theta_digest(call.payload_ref[1].theta if theta is None else theta)
        results = [
            EpisodeResult(job=job, ret=1.0, returns=(1.0,), runner=rid, theta_digest=digest) for job in call.jobs
        ]
        ref.reply = Reply(results=results, busy_s=busy_s, runner=rid)

    def fail(self, index):
        """The actor of call ``index`` died: its reply is a Ray error."""
        self.calls[index][2].error = FakeRayError("actor died")


def fake_get(ref):
    if ref.error is not None:
        raise ref.error
    return ref.reply


def fake_wait(refs, num_returns, timeout, fetch_local):
    ready = [r for r in refs if r.reply is not None or r.error is not None]
    return ready, [r for r in refs if r not in ready]


@pytest.fixture
def pool(monkeypatch):
    """A pool over runners 1 and 2, two calls in flight each; Ray is stubbed."""
    fake_ray = types.SimpleNamespace(
        put=lambda payload: ("ref", payload),
        wait=fake_wait,
        get=fake_get,
        exceptions=types.SimpleNamespace(RayError=FakeRayError),
    )
    monkeypatch.setattr(async_pool, "ray", fake_ray)
    return AsyncJobPool(FakeGroup([1, 2]), jobs_in_flight=2)


def jobs(pool, n=1, seed=7):
    return [PerturbationJob(id=pool.new_job_id(), seed=seed, n=n, index=i) for i in range(n)]


def sent_ids(group):
    return [[job.id for job in call.jobs] for _, call, _ in group.calls]


def test_pump_fills_every_runner_up_to_jobs_in_flight_in_queue_order(pool):
    pool.publish(3, payload(0))
    for _ in range(5):
        pool.submit(jobs(pool))
    pool.submit([])  # an empty job list is no call
    assert pool.num_queued == 5
    assert pool.pump() == 4
    assert [rid for rid, _, _ in pool.group.calls] == [1, 1, 2, 2]
    assert sent_ids(pool.group) == [[0], [1], [2], [3]]  # FIFO
    assert pool.num_in_flight == 4 and pool.num_queued == 1
    _, call, _ = pool.group.calls[0]
    assert call.version == 3 and call.payload_ref[1].theta[0] == 0
    assert call.jobs[0].version == 3  # jobs carry the version published when submitted


def test_poll_hands_back_finished_calls_accounts_busy_time_and_refills(pool):
    pool.publish(0, payload(0))
    for _ in range(5):
        pool.submit(jobs(pool))
    pool.pump()
    pool.group.finish(0, busy_s=0.25)
    pool.group.finish(2, busy_s=0.5)
    out = pool.poll(timeout_s=0.0)
    assert [reply.results[0].id for reply in out] == [0, 2]
    assert dict(pool.busy_s) == {1: 0.25, 2: 0.5}
    assert pool.num_queued == 0 and pool.num_in_flight == 3  # the fifth call took a freed slot
    assert sent_ids(pool.group)[-1] == [4]


def test_a_dead_runners_calls_are_requeued_first_and_counted(pool):
    pool.publish(0, payload(0))
    pool.submit(jobs(pool, 2))
    pool.submit(jobs(pool, 3))
    pool.submit(jobs(pool, 1))
    pool.pump()  # runner 1: calls [0, 1] and [2, 3, 4]; runner 2: [5]
    pool.group.healthy = [2]
    pool.sync_health()  # RLlib's health, taken after restore_env_runners (BlackBoxAlgorithm)
    pool.submit(jobs(pool))  # [6], queued behind the lost calls
    pool.pump()
    assert pool.num_calls_lost == 2 and pool.num_jobs_requeued == 5
    assert sent_ids(pool.group)[3:] == [[0, 1]]  # runner 2 had one free slot: the oldest lost call
    assert [[j.id for j in call.jobs] for call in pool._queue] == [[2, 3, 4], [6]]
    pool.group.finish(2)  # runner 2's first call ([5]) ends; the next lost call goes out
    pool.poll(timeout_s=0.0)
    assert sent_ids(pool.group)[4:] == [[2, 3, 4]]


def test_drop_queued_removes_only_unsent_calls(pool):
    pool.publish(0, payload(0))
    for seed in range(6):
        pool.submit(jobs(pool, seed=seed))
    pool.pump()  # four calls in flight, two queued
    assert pool.drop_queued(lambda call: call.jobs[0].seed in (0, 5)) == 1  # seed 0 was sent already
    assert pool.num_queued == 1 and pool.num_in_flight == 4


def test_drain_waits_for_every_call_in_flight_and_utilization_counts_busy_time(pool):
    pool.publish(0, payload(0))
    since, busy_before = pool.snapshot()
    for _ in range(4):
        pool.submit(jobs(pool))
    pool.pump()
    for i in range(4):
        pool.group.finish(i, busy_s=0.001)
    time.sleep(0.01)  # wall time ≥ the busy time of the calls
    out = pool.drain(timeout_s=5.0)
    assert sorted(reply.results[0].id for reply in out) == [0, 1, 2, 3]
    assert pool.num_in_flight == 0
    utilization = pool.utilization(since, busy_before, num_runners=2)
    assert 0.0 < utilization <= 1.0


def test_a_requeued_call_keeps_the_version_and_payload_it_was_submitted_with(pool):
    """The credit bug of the review (B1): a re-sent call must not pick up the newest θ."""
    pool.publish(0, payload(0))
    pool.submit(jobs(pool))  # job 0, θ_0
    pool.pump()
    ((rid, _, _),) = pool.group.calls
    pool.publish(1, payload(1))  # the driver moves on to θ_1 ...
    pool.group.healthy = [r for r in (1, 2) if r != rid]  # ... and the runner with job 0 dies
    pool.sync_health()
    pool.submit(jobs(pool))  # job 1, θ_1
    pool.pump()
    resent = [call for _, call, _ in pool.group.calls[1:] if call.jobs[0].id == 0]
    assert len(resent) == 1 and pool.num_calls_lost == 1
    assert resent[0].version == 0 and resent[0].jobs[0].version == 0
    assert resent[0].payload_ref[1].theta[0] == 0  # θ_0's payload, not θ_1's
    newer = [call for _, call, _ in pool.group.calls if call.jobs[0].id == 1]
    assert newer[0].payload_ref[1].theta[0] == 1


def test_drain_sends_nothing_queued(pool):
    pool.publish(0, payload(0))
    for _ in range(6):
        pool.submit(jobs(pool))
    pool.pump()  # four in flight, two queued
    for i in range(4):
        pool.group.finish(i, busy_s=0.001)
    pool.drain(timeout_s=5.0)
    assert len(pool.group.calls) == 4 and pool.num_queued == 0


def test_a_call_far_past_the_usual_duration_is_reported_once(pool, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(async_pool.time, "perf_counter", lambda: clock[0])
    pool.overdue_factor, pool.overdue_min_s = 10.0, 2.0
    pool.publish(0, payload(0))
    for _ in range(3):
        pool.submit(jobs(pool))
    pool.pump()  # runner 1: calls 0, 1; runner 2: call 2
    clock[0] += 0.5
    pool.group.finish(0)
    pool.group.finish(2)
    pool.poll(timeout_s=0.0)  # calls usually take 0.5 s
    assert pool.overdue() == []
    clock[0] += 4.9  # call 1: 5.4 s in flight > max(2, 10 × 0.5)
    (overdue,) = pool.overdue()
    runner, call, age = overdue
    assert runner == 1 and call.jobs[0].id == 1 and age == pytest.approx(5.4)
    assert pool.overdue() == [] and pool.num_calls_overdue == 1  # reported once


def test_the_watchdog_judges_a_call_by_calls_of_its_own_kind_and_size(pool, monkeypatch):
    """AES-RL's first RL individuals (10k actor steps) must not be judged by ES individuals' duration."""
    clock = [100.0]
    monkeypatch.setattr(async_pool.time, "perf_counter", lambda: clock[0])
    pool.overdue_factor, pool.overdue_min_s, pool.overdue_unseen_s = 10.0, 2.0, 100.0
    es = lambda: [IndividualJob(id=pool.new_job_id(), seed=1)]  # noqa: E731
    rl = lambda: [IndividualJob(id=pool.new_job_id(), seed=1, rl_steps=10_000)]  # noqa: E731
    pool.publish(0, payload(0))
    pool.submit(es())
    pool.submit(rl())  # call 1
    pool.pump()
    clock[0] += 0.5
    pool.group.finish(0)
    pool.poll(timeout_s=0.0)  # an ES call took 0.5 s; no RL call has finished
    assert pool.typical_call_s(pool.group.calls[1][1]) is None
    clock[0] += 99.0  # 99.5 s: past 10 × 0.5 s but not past the unseen kind's 100 s
    assert pool.overdue() == []
    clock[0] += 1.0
    ((runner, call, age),) = pool.overdue()
    assert call.kind == "IndividualJob/rl" and age == pytest.approx(100.5) and pool.num_calls_overdue == 1
    pool.group.finish(1)
    pool.poll(timeout_s=0.0)  # RL calls take 100.5 s; ES calls still 0.5 s
    assert pool.typical_call_s(call) == pytest.approx(100.5)
    pool.submit(rl())  # call 2
    pool.submit(es() + es())  # call 3: two ES jobs, usually 2 × 0.5 s
    pool.pump()
    clock[0] += 11.0
    ((runner, late, age),) = pool.overdue()
    assert late.kind == "IndividualJob" and len(late.jobs) == 2 and age == pytest.approx(11.0)
    clock[0] += 995.0  # the RL call: 1006 s > 10 × 100.5 s
    ((runner, late, age),) = pool.overdue()
    assert late.kind == "IndividualJob/rl" and pool.num_calls_overdue == 3


def test_a_result_run_with_other_parameters_than_its_version_is_refused_as_failed_and_counted(pool):
    """Handed back as failed (the algorithm re-runs the job: never a silent hole in a synchronous
    batch, issue 39 §2), counted, and its runner taken out of service until RLlib restores it."""
    pool.publish(0, payload(0))
    pool.submit(jobs(pool))
    pool.submit(jobs(pool))
    pool.pump()
    runner_of_call_1 = pool.group.calls[1][0]
    pool.publish(1, payload(1))
    pool.group.finish(0)  # run with θ_0: credited right
    pool.group.finish(1, theta=payload(1).theta)  # labelled version 0 but run with θ_1: the old bug
    out = pool.poll(timeout_s=0.0)
    assert [len(reply.results) for reply in out] == [1, 1]
    good, bad = (reply.results[0] for reply in out)
    assert not good.failed and not good.credit_mismatch
    assert bad.failed and bad.credit_mismatch and "credit mismatch" in bad.error
    assert pool.num_credit_mismatches == 1
    assert runner_of_call_1 not in pool.group.healthy


def test_a_call_failing_with_a_ray_error_takes_its_runner_out_and_is_resent_elsewhere(pool):
    pool.publish(0, payload(0))
    for _ in range(4):
        pool.submit(jobs(pool))
    pool.pump()  # runner 1: calls 0, 1; runner 2: calls 2, 3
    pool.group.fail(0)
    pool.group.finish(2)
    out = pool.poll(timeout_s=0.0)
    assert [reply.results[0].id for reply in out] == [2]
    assert pool.group.healthy == [2]  # marked unhealthy in RLlib's actor manager
    assert pool.num_calls_lost == 2 and pool.num_jobs_requeued == 2  # the failed call and runner 1's other one
    assert sorted(sent_ids(pool.group)[4:]) == [[0]]  # runner 2's freed slot takes the oldest lost call
    assert [[j.id for j in call.jobs] for call in pool._queue] == [[1]]


def test_the_algorithms_watchdog_logs_an_overdue_call_with_its_kind(pool, monkeypatch, caplog):
    """BlackBoxAlgorithm.watch logs and counts each overdue call once, saying what it is compared with."""
    from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm

    clock = [100.0]
    monkeypatch.setattr(async_pool.time, "perf_counter", lambda: clock[0])
    pool.overdue_factor, pool.overdue_min_s, pool.overdue_unseen_s = 10.0, 2.0, 50.0
    algo = object.__new__(BlackBoxAlgorithm)
    algo.pool = pool
    pool.publish(0, payload(0))
    pool.submit(jobs(pool, n=2))
    pool.submit([IndividualJob(id=pool.new_job_id(), seed=1, rl_steps=100)])
    pool.pump()
    clock[0] += 0.5
    pool.group.finish(0)
    pool.poll(timeout_s=0.0)
    pool.submit(jobs(pool, n=2))
    pool.pump()
    clock[0] += 51.0
    with caplog.at_level("WARNING", logger=BlackBoxAlgorithm.__module__):
        algo.watch(progressed=True)
        algo.watch(progressed=False)
    lines = sorted(r.getMessage() for r in caplog.records)
    assert len(lines) == 2 and pool.num_calls_overdue == 2
    assert "1 job(s) (IndividualJob/rl) for 52 s (none of its kind has finished yet)" in lines[0]
    assert "2 job(s) (PerturbationJob) for 51 s (such calls usually take 0.50 s)" in lines[1]


def test_collect_counts_every_step_of_every_reply_and_books_where_it_went(pool):
    """Issue 39 §1: the total is every step simulated, whatever becomes of the result (StepAccount)."""
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm
    from rllib_ext.common.blackbox.obs_filter import ObservationFilter
    from rllib_ext.common.blackbox.protocol import EvaluationJob
    from rllib_ext.common.steps import StepAccount

    algo = object.__new__(BlackBoxAlgorithm)
    algo.pool, algo.steps, algo.metrics = pool, StepAccount(), MetricsLogger()
    algo.obs_filter = ObservationFilter((2,), enabled=False)
    algo.counters = dict.fromkeys(("episodes_failed", "episodes_capped", "env_steps", "episodes"), 0)
    pool.publish(0, payload(0))
    pool.submit(jobs(pool))  # a perturbation: 10 steps, kept for the update
    pool.submit([EvaluationJob(id=pool.new_job_id())])  # θ_u itself: 5 steps
    pool.submit(jobs(pool))  # one failed episode (3 steps up to the failure) and one good one (4)
    pool.submit(jobs(pool))  # run with other parameters than its version: 7 steps
    pool.pump()
    for index, length in enumerate((10, 5, 4, 7)):
        pool.group.finish(index, theta=payload(1).theta if index == 3 else None)
        pool.group.calls[index][2].reply.results[0].length = length
    pool.group.calls[2][2].reply.results[0].failed_steps = 3
    pool.group.calls[2][2].reply.results[0].episodes_failed = 1
    ok, failed = algo.collect(timeout_s=0.0)
    assert [r.length for r in ok] == [10, 5, 4] and [r.length for r in failed] == [7]
    assert algo.steps.total == 10 + 5 + 3 + 4 + 7
    assert (algo.steps.evaluation, algo.steps.wasted, algo.steps.pending) == (5, 3 + 7, 10 + 4)
    algo.steps.used += 10 + 4  # what the algorithm's update used
    algo.steps.log(algo.metrics)
    runners = algo.metrics.reduce()["env_runners"]
    assert runners["num_env_steps_sampled_lifetime"] == 29
    assert runners["env_steps_used_lifetime"] == 14 and runners["env_steps_pending"] == 0


def test_the_pool_learns_a_jobs_runner_time_per_kind_from_busy_time(pool):
    pool.publish(0, payload(0))
    pool.submit(jobs(pool, n=4))
    pool.pump()
    assert pool.typical_job_work_s("PerturbationJob") is None  # nothing finished yet
    pool.group.finish(0, busy_s=0.4)
    pool.poll(timeout_s=0.0)
    assert pool.typical_job_work_s("PerturbationJob") == pytest.approx(0.1)  # busy time / jobs
    assert pool.typical_job_work_s("EvaluationJob") is None and pool.num_calls_sent == 1


@pytest.mark.parametrize(
    "n, runners, job_s, min_reply_s, expected",
    [
        (40, 2, None, 0.2, 5),  # nothing measured yet: four calls per runner per batch
        (40, 2, 2e-4, 0.2, 10),  # short episodes: the calls in flight hold one batch, not 1000 jobs each
        (6000, 2, 2e-4, 0.2, 1000),  # a long stream: 0.2 s of episodes per call
        (1000, 2, 0.3, 0.2, 125),  # long episodes: still four calls per runner per batch
        (40, 2, 2e-4, 0.0, 5),  # min_reply_s = 0: the old rule
        (3, 8, 2e-4, 0.2, 1),  # fewer jobs than runners
    ],
)
def test_auto_calls_are_sized_by_work_within_a_runners_share(n, runners, job_s, min_reply_s, expected):
    from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm

    algo = types.SimpleNamespace(
        config=types.SimpleNamespace(perturbations_per_call="auto", min_reply_s=min_reply_s),
        num_runners=runners,
        pool=types.SimpleNamespace(typical_job_work_s=lambda kind: job_s, jobs_in_flight=2),
    )
    assert BlackBoxAlgorithm.call_size(algo, n) == expected
    algo.config.perturbations_per_call = 7
    assert BlackBoxAlgorithm.call_size(algo, n) == 7
