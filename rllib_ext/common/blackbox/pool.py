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
fetch does), and RLlib's ``restore_env_runners`` brings it back (probed at most every
``common.fault_tolerance.PROBE_INTERVAL_S``).

Driver cost: O(1) per poll and per result, whatever the number of runners (issue 41 §1;
``benchmarks/blackbox_pool.py``). The pool keeps its own set of healthy runners and a FIFO of
runners with a free slot, so :meth:`AsyncJobPool.pump` does work only for the calls it sends; the
watchdog keeps calls in send order per (kind, size), so :meth:`AsyncJobPool.overdue` looks only at
the oldest of each. Health changes are handled when they happen: a runner the pool sees fail is
taken out at once, and :meth:`AsyncJobPool.sync_health` takes RLlib's health of every runner after
RLlib's ``restore_env_runners`` (``BlackBoxAlgorithm``), once per training step. What remains O(calls
in flight) per poll is the list of references handed to ``ray.wait`` (Ray's own wait is O(n) too).

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
from collections.abc import Callable, Sequence
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
        # The watchdog's view: calls in flight not yet reported overdue, per (kind, jobs per call), in
        # send order. Calls of one group share one time limit, so only the oldest can be next to be late.
        self._watched: dict[tuple[str, int], collections.OrderedDict[object, _Sent]] = {}
        self._healthy: set[int] = set()  # the pool's copy of RLlib's healthy runners (sync_health)
        self._free: collections.deque[int] = collections.deque()  # runners that may have a free slot
        self._in_free: set[int] = set()  # ... the same, as a set (no duplicates in _free)
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
        self._work_job_s: dict[str, float] = {}  # call kind -> running mean of runner busy time / jobs
        self.num_calls_sent = 0
        self.sync_health()

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

    def submit(self, jobs: Sequence[Job]) -> None:
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

    def typical_job_work_s(self, kind: str) -> float | None:
        """Usual runner time of one job of calls of ``kind`` (busy time / jobs; None before one finished).

        What sizes calls by work (``BlackBoxAlgorithm.call_size``): unlike :meth:`typical_call_s` it
        leaves out the time a call waits in the runner's queue and Ray's call path."""
        return self._work_job_s.get(kind)

    def typical_call_s(self, call: Call) -> float | None:
        """Usual duration, send to reply, of a call like ``call`` (None before one of its kind finished)."""
        per_job = self._typical_job_s.get(call.kind)
        return None if per_job is None else per_job * len(call.jobs)

    # -- health -------------------------------------------------------------------------------
    @property
    def num_healthy(self) -> int:
        """Runners the pool sends calls to (RLlib's healthy runners as of :meth:`sync_health`)."""
        return len(self._healthy)

    def healthy_runner_ids(self) -> list[int]:
        """The runners the pool sends calls to, sorted (a copy: O(runners), not for every poll)."""
        return sorted(self._healthy)

    def sync_health(self) -> None:
        """Takes RLlib's health of every runner (O(runners)): call it where health may have changed.

        A runner the pool sees fail (a Ray error, a credit mismatch) is taken out at once; RLlib
        changes health in its own calls, of which ``Algorithm.restore_env_runners`` (before every
        training step) is where a failed runner comes back: ``BlackBoxAlgorithm`` calls this
        method after it. A runner that RLlib marked unhealthy elsewhere is also found by its next
        call failing. Nothing here runs per poll.
        """
        now = set(self.group.healthy_worker_ids())
        for rid in sorted(self._healthy - now):
            self._lose_runner(rid)
        for rid in sorted(now - self._healthy):
            self._healthy.add(rid)
            self._mark_free(rid)

    def _mark_free(self, rid: int) -> None:
        if rid not in self._in_free:
            self._in_free.add(rid)
            self._free.append(rid)

    def _lose_runner(self, rid: int) -> None:
        """``rid`` is out of service: its calls in flight go back to the head of the queue."""
        self._healthy.discard(rid)
        calls = self._in_flight.pop(rid, None)
        if not calls:
            return
        lost = list(calls.values())
        for sent in lost:
            self._by_ref.pop(sent.ref, None)
            self._unwatch(sent)
        self.num_calls_lost += len(lost)
        jobs = sum(len(sent.call.jobs) for sent in lost)
        self.num_jobs_requeued += jobs
        for sent in reversed(lost):
            self._queue.appendleft(sent.call)  # with its own version and payload: credit stays right
        logger.warning(
            "rllib_ext: env runner %d failed with %d call(s) in flight; re-queued %d job(s)", rid, len(lost), jobs
        )

    def _unwatch(self, sent: _Sent) -> None:
        group = self._watched.get((sent.kind, len(sent.call.jobs)))
        if group is not None and group.pop(sent.ref, None) is not None and not group:
            del self._watched[(sent.kind, len(sent.call.jobs))]

    # -- the loop -----------------------------------------------------------------------------
    def pump(self) -> int:
        """Sends queued calls to runners with free slots; returns the number sent.

        O(calls sent): the runners that may have a free slot wait in a FIFO (a runner joins it when
        a call of its returns or when it becomes healthy), never a scan over the runners.
        """
        if not self._queue or not self._free:
            return 0
        actors, sent = _compat.worker_manager(self.group).actors(), 0
        while self._queue and self._free:
            rid = self._free.popleft()
            self._in_free.discard(rid)
            if rid not in self._healthy:
                continue
            calls = self._in_flight[rid]
            while self._queue and len(calls) < self.jobs_in_flight:
                call = self._queue.popleft()
                entry = _Sent(call, time.perf_counter(), rid, actors[rid].run_jobs.remote(call), kind=call.kind)
                calls[entry.ref] = entry
                self._by_ref[entry.ref] = entry
                key = (entry.kind, len(call.jobs))
                watched = self._watched.get(key)
                if watched is None:
                    watched = self._watched[key] = collections.OrderedDict()
                watched[entry.ref] = entry
                sent += 1
            if len(calls) < self.jobs_in_flight:  # the queue ran dry: it keeps its place in line
                self._in_free.add(rid)
                self._free.appendleft(rid)
        self.num_calls_sent += sent
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
        out, now, lost = [], time.perf_counter(), []
        for ref in ready:
            sent = self._by_ref.pop(ref, None)
            if sent is None:  # its runner was lost by an earlier reply of this round: re-queued
                continue
            self._unwatch(sent)
            try:
                reply = ray.get(ref)
            except ray.exceptions.RayError as e:  # the runner died: RLlib restores it, we re-queue
                lost.append(self._take_out_of_service(sent.runner, e))  # its calls, this one included
                continue
            calls = self._in_flight.get(sent.runner)
            if calls is not None:
                calls.pop(ref, None)
            per_job = (now - sent.t_sent) / len(sent.call.jobs)
            typical = self._typical_job_s.get(sent.kind)
            self._typical_job_s[sent.kind] = per_job if typical is None else 0.9 * typical + 0.1 * per_job
            work = reply.busy_s / len(sent.call.jobs)
            usual = self._work_job_s.get(sent.kind)
            self._work_job_s[sent.kind] = work if usual is None else 0.8 * usual + 0.2 * work
            self.busy_s[sent.runner] += reply.busy_s
            for r in reply.results:
                if not self._credit_ok(r):
                    r.failed, r.credit_mismatch = True, True
                    r.error = f"credit mismatch: env runner {r.runner} ran other parameters than version {r.version}"
            if any(r.credit_mismatch for r in reply.results):  # a broken runner: RLlib probes and restores it
                lost.append(self._take_out_of_service(sent.runner, "its results failed the credit check"))
            elif sent.runner in self._healthy:
                self._mark_free(sent.runner)
            out.append(reply)
        for rid in lost:  # after the round: its other replies that were ready are used, as they came
            self._lose_runner(rid)
        if send:
            self.pump()  # refills the free slots (lost calls first: they are at the head of the queue)
        return out

    def _take_out_of_service(self, runner: int, error: Exception | str) -> int:
        """Marks ``runner`` unhealthy in RLlib's actor manager, as RLlib's own fetch does on a Ray error,
        and sends it nothing more (RLlib's ``restore_env_runners`` brings it back: :meth:`sync_health`);
        the caller re-queues its calls in flight (:meth:`_lose_runner`). Returns ``runner``."""
        manager = _compat.worker_manager(self.group)
        if manager.is_actor_healthy(runner):
            logger.warning("rllib_ext: env runner %d failed (%s); taking it out of service", runner, error)
            manager.set_actor_state(runner, healthy=False)
        self._healthy.discard(runner)
        return runner

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
        """Calls newly overdue: ``(runner, call, seconds in flight)``; each is reported once.

        O(groups + calls reported): calls of one kind and size share one limit, so within their
        group (kept in send order) only the oldest unreported one can be the next to be late.
        """
        now, out = time.perf_counter(), []
        for (kind, size), watched in list(self._watched.items()):
            per_job = self._typical_job_s.get(kind)
            if per_job is None:
                limit = max(self.overdue_min_s, self.overdue_unseen_s)
            else:
                limit = max(self.overdue_min_s, self.overdue_factor * per_job * size)
            while watched:
                sent = next(iter(watched.values()))
                if now - sent.t_sent <= limit:
                    break
                watched.popitem(last=False)
                sent.reported = True
                self.num_calls_overdue += 1
                out.append((sent.runner, sent.call, now - sent.t_sent))
            if not watched:
                del self._watched[(kind, size)]
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
