"""Driver-side asynchronous job pool over an RLlib EnvRunnerGroup of BlackBoxEnvRunners.

Keeps up to ``jobs_in_flight`` calls on every healthy runner (so a runner starts its next call
while the driver handles the last result — the ~2 ms round trip is hidden), hands back replies
as each call finishes, accounts each runner's busy time (→ ``worker_utilization``), and survives
a runner dying: its unfinished calls are re-queued for the others and counted as lost; RLlib
(``restart_failed_env_runners``) restarts the actor and the pool uses it again once it is healthy.

Calls go straight to the runner actors' ``run_jobs`` method (the EnvRunnerGroup's actor handles),
not through ``foreach_env_runner_async``: RLlib's path cloudpickles a new closure per call and
scans its in-flight list per result, about 2 ms of driver CPU per call, which capped the driver
at ~50–70 sleeping runners (``benchmarks/blackbox_scale.py``). Health stays RLlib's: a call that
fails with a Ray error marks its runner unhealthy in the group's actor manager (as RLlib's own
fetch does), and RLlib's ``restore_env_runners`` brings it back before the next training step.

Credit: a :class:`~rllib_ext.common.blackbox.protocol.Call` is built at :meth:`AsyncJobPool.submit`
time with the version *and the payload reference* published then, so a re-queued call still
evaluates the θ its jobs are credited to.

Credit check: every result carries the digest of the θ its runner held; a result whose digest
is not that of the θ published as its version is logged, counted (``num_credit_mismatches``) and
handed back as *failed* (``credit_mismatch``), so that the algorithm re-runs its job as it re-runs
any failed job (never a silent hole in a synchronous batch); it can only come from a bug, never
from a fault, so the runner is also taken out of service (its calls in flight re-queued) until
RLlib's health probe restores it.

Watchdog: a call in flight for longer than ``overdue_factor`` × the usual duration of calls of its
kind (and at least ``overdue_min_s``) is reported once by :meth:`AsyncJobPool.overdue` (the
algorithm logs and counts it); it is not cancelled — RLlib's health checks decide whether the
runner is dead. The usual duration is kept per job kind (``Call.kind``) and per job, because
kinds differ by orders of magnitude: an AES-RL individual that first trains 10k actor steps takes
minutes where an ES individual takes a fraction of a second. A call of a kind that has not
finished once yet is judged against ``overdue_unseen_s``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import ray

from rllib_ext import _compat
from rllib_ext.common.blackbox.protocol import Call, EpisodeResult, Job, Payload, Reply, theta_digest

if TYPE_CHECKING:
    from ray.rllib.env.env_runner_group import EnvRunnerGroup

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Sent:
    call: Call
    t_sent: float
    runner: int
    ref: object = None
    reported: bool = False
    kind: str = ""


class AsyncJobPool:
    """Submit job lists, collect replies as each call finishes, keep every runner busy.

    Args:
        env_runner_group: The algorithm's EnvRunnerGroup (remote BlackBoxEnvRunners).
        jobs_in_flight: Calls kept in flight per runner.
        overdue_factor: A call is overdue after this many times the usual call duration.
        overdue_min_s: ... and after at least this many seconds.
        overdue_unseen_s: A call of a kind none of which has finished yet is overdue after this
            many seconds.
    """

    #: Versions whose θ digest is kept for the credit check (AES-RL publishes once per individual).
    DIGESTS_KEPT = 4096

    def __init__(
        self,
        env_runner_group: EnvRunnerGroup,
        jobs_in_flight: int = 2,
        overdue_factor: float = 20.0,
        overdue_min_s: float = 30.0,
        overdue_unseen_s: float = 600.0,
    ):
        self.group = env_runner_group
        self.jobs_in_flight = int(jobs_in_flight)
        self.overdue_factor, self.overdue_min_s = float(overdue_factor), float(overdue_min_s)
        self.overdue_unseen_s = float(overdue_unseen_s)
        self._queue: collections.deque[Call] = collections.deque()
        self._in_flight: dict[int, dict[object, _Sent]] = collections.defaultdict(dict)  # runner -> ref -> call
        self._by_ref: dict[object, _Sent] = {}  # every call in flight, by the ObjectRef of its reply
        self._version = -1
        self._payload_ref: ray.ObjectRef[Payload] | None = None
        self._ids = itertools.count()
        self.busy_s: dict[int, float] = collections.defaultdict(float)
        self.num_calls_lost = 0
        self.num_jobs_requeued = 0
        self.num_calls_overdue = 0
        self.num_credit_mismatches = 0
        self._digests: collections.OrderedDict[int, int] = collections.OrderedDict()  # version -> θ digest
        self._typical_job_s: dict[str, float] = {}  # call kind -> running mean of call duration / jobs

    # -- publishing and submitting ----------------------------------------------------------
    def publish(self, version: int, payload: Payload) -> None:
        """Sets the version and payload of calls submitted from now on (one object-store put)."""
        self._version = int(version)
        self._payload_ref = ray.put(payload)
        self._digests[self._version] = theta_digest(payload.theta)
        while len(self._digests) > self.DIGESTS_KEPT:
            self._digests.popitem(last=False)

    @property
    def version(self) -> int:
        return self._version

    def new_job_id(self) -> int:
        return next(self._ids)

    def submit(self, jobs: list[Job]) -> None:
        """Queues one call of ``jobs`` with the version and payload published now; sent by :meth:`pump`."""
        if jobs:
            stamped = tuple(dataclasses.replace(j, version=self._version) for j in jobs)
            self._queue.append(Call(payload_ref=self._payload_ref, jobs=stamped))

    def drop_queued(self, predicate: Callable[[Call], bool]) -> int:
        """Removes queued (not yet sent) calls for which ``predicate(call)`` holds; returns how many."""
        kept = [call for call in self._queue if not predicate(call)]
        dropped = len(self._queue) - len(kept)
        self._queue = collections.deque(kept)
        return dropped

    @property
    def num_queued(self) -> int:
        return len(self._queue)

    @property
    def num_in_flight(self) -> int:
        return len(self._by_ref)

    def typical_call_s(self, call: Call) -> float | None:
        """Usual duration, send to reply, of a call like ``call`` (None before one of its kind finished)."""
        per_job = self._typical_job_s.get(call.kind)
        return None if per_job is None else per_job * len(call.jobs)

    def healthy_runner_ids(self) -> list[int]:
        return list(self.group.healthy_worker_ids())

    # -- the loop ---------------------------------------------------------------------------
    def _requeue_lost(self, healthy: list[int]) -> None:
        for rid in list(self._in_flight):
            if rid not in healthy and self._in_flight[rid]:
                lost = [sent.call for sent in self._in_flight[rid].values()]
                for sent in self._in_flight[rid].values():
                    self._by_ref.pop(sent.ref, None)
                self._in_flight[rid].clear()
                self.num_calls_lost += len(lost)
                jobs = sum(len(call.jobs) for call in lost)
                self.num_jobs_requeued += jobs
                for call in reversed(lost):
                    self._queue.appendleft(call)  # with its own version and payload: credit stays right
                logger.warning(
                    "rllib_ext: env runner %d failed with %d call(s) in flight; re-queued %d job(s)",
                    rid,
                    len(lost),
                    jobs,
                )

    def pump(self) -> int:
        """Sends queued calls to runners with free slots; returns the number sent."""
        healthy = self.healthy_runner_ids()
        self._requeue_lost(healthy)
        if not self._queue:
            return 0
        actors, sent = _compat.worker_manager(self.group).actors(), 0
        for rid in healthy:
            while self._queue and len(self._in_flight[rid]) < self.jobs_in_flight:
                call = self._queue.popleft()
                entry = _Sent(call, time.perf_counter(), rid, actors[rid].run_jobs.remote(call), kind=call.kind)
                self._in_flight[rid][entry.ref] = entry
                self._by_ref[entry.ref] = entry
                sent += 1
        return sent

    def _receive(self, send: bool, timeout_s: float) -> list[Reply]:
        if send:
            self.pump()
        if not self._by_ref:
            time.sleep(min(timeout_s, 0.002))
            return []
        refs = list(self._by_ref)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s, fetch_local=True)
        if ready:  # everything else that is ready too, without waiting
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
        out, now = [], time.perf_counter()
        for ref in ready:
            sent = self._by_ref.pop(ref)
            try:
                reply = ray.get(ref)
            except ray.exceptions.RayError as e:  # the runner died: RLlib restores it, we re-queue
                self._take_out_of_service(sent.runner, e)  # its calls, this one included, are re-queued below
                continue
            self._in_flight[sent.runner].pop(ref, None)
            per_job = (now - sent.t_sent) / len(sent.call.jobs)
            typical = self._typical_job_s.get(sent.kind)
            self._typical_job_s[sent.kind] = per_job if typical is None else 0.9 * typical + 0.1 * per_job
            self.busy_s[sent.runner] += reply.busy_s
            for r in reply.results:
                if not self._credit_ok(r):
                    r.failed, r.credit_mismatch = True, True
                    r.error = f"credit mismatch: env runner {r.runner} ran other parameters than version {r.version}"
            if any(r.credit_mismatch for r in reply.results):  # a broken runner: RLlib probes and restores it
                self._take_out_of_service(sent.runner, "its results failed the credit check")
            out.append(reply)
        if send:
            self.pump()  # re-queues the calls of runners that died, then refills the free slots
        else:
            self._requeue_lost(self.healthy_runner_ids())
        return out

    def _take_out_of_service(self, runner: int, error: Exception | str) -> None:
        """Marks ``runner`` unhealthy in RLlib's actor manager, as RLlib's own fetch does on a Ray error."""
        manager = _compat.worker_manager(self.group)
        if manager.is_actor_healthy(runner):
            logger.warning("rllib_ext: env runner %d failed (%s); taking it out of service", runner, error)
            manager.set_actor_state(runner, healthy=False)

    def _credit_ok(self, result: EpisodeResult) -> bool:
        expected = self._digests.get(result.version)
        if expected is None or result.theta_digest == expected:
            return True
        self.num_credit_mismatches += 1
        logger.error(
            "rllib_ext: env runner %d ran job %d with other parameters than version %d it is credited to; "
            "its result is not used (the job is handled as failed)",
            result.runner,
            result.id,
            result.version,
        )
        return False

    def poll(self, timeout_s: float = 0.01) -> list[Reply]:
        """Replies of calls that finished within ``timeout_s`` (after sending what is queued)."""
        return self._receive(True, timeout_s)

    def overdue(self) -> list[tuple[int, Call, float]]:
        """Calls newly overdue: ``(runner, call, seconds in flight)``; each is reported once."""
        now, out = time.perf_counter(), []
        for sent in self._by_ref.values():
            if sent.reported:
                continue
            per_job = self._typical_job_s.get(sent.kind)
            if per_job is None:
                limit = max(self.overdue_min_s, self.overdue_unseen_s)
            else:
                limit = max(self.overdue_min_s, self.overdue_factor * per_job * len(sent.call.jobs))
            if now - sent.t_sent > limit:
                sent.reported = True
                self.num_calls_overdue += 1
                out.append((sent.runner, sent.call, now - sent.t_sent))
        return out

    def drain(self, timeout_s: float = 60.0) -> list[Reply]:
        """Drops queued calls and waits for every call in flight (before checkpoints/stop)."""
        self._queue.clear()
        out, deadline = [], time.perf_counter() + timeout_s
        while self.num_in_flight and time.perf_counter() < deadline:
            out += self._receive(False, timeout_s=0.1)
        self._queue.clear()  # calls of runners that died meanwhile
        return out

    def utilization(self, since: float, busy_before: dict[int, float], num_runners: int) -> float:
        """Σ busy / (runners × wall) since ``since`` (busy_before: a copy of busy_s then)."""
        wall = max(time.perf_counter() - since, 1e-9)
        busy = sum(self.busy_s.values()) - sum(busy_before.values())
        return float(busy / (max(num_runners, 1) * wall))

    def snapshot(self) -> tuple[float, dict[int, float]]:
        return time.perf_counter(), dict(self.busy_s)
