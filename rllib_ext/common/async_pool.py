"""Driver-side asynchronous job pool over an RLlib EnvRunnerGroup of BlackBoxEnvRunners.

Keeps up to ``jobs_in_flight`` calls on every healthy runner (so a runner starts its next call
while the driver handles the last result — the ~2 ms round trip is hidden), hands back results
as each call finishes, accounts each runner's busy time (→ ``worker_utilization``), and survives
a runner dying: its unfinished calls are re-queued for the others and counted as lost; RLlib
(``restart_failed_env_runners``) restarts the actor and the pool uses it again once it is healthy.
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from typing import Any

import ray

logger = logging.getLogger(__name__)


class AsyncJobPool:
    """Submit job lists, collect results as each finishes, keep every runner busy.

    Args:
        env_runner_group: The algorithm's EnvRunnerGroup (remote BlackBoxEnvRunners).
        jobs_in_flight: Calls kept in flight per runner (≤ max_requests_in_flight_per_env_runner).
        tag: Tag of this pool's async calls (never untagged: RLlib's own calls must not mix in).
    """

    def __init__(self, env_runner_group, jobs_in_flight: int = 2, tag: str = "blackbox_jobs"):
        self.group = env_runner_group
        self.jobs_in_flight = int(jobs_in_flight)
        self.tag = tag
        self._queue: collections.deque[list[dict[str, Any]]] = collections.deque()
        self._in_flight: dict[int, dict[int, list[dict[str, Any]]]] = collections.defaultdict(dict)
        self._version = -1
        self._payload_ref = None
        self._ids = itertools.count()
        self.busy_s: dict[int, float] = collections.defaultdict(float)
        self.num_calls_lost = 0
        self.num_jobs_requeued = 0
        self._t_start = time.perf_counter()

    # -- publishing and submitting ----------------------------------------------------------
    def publish(self, version: int, payload: Any) -> None:
        """Sets (θ_u, filter state) for calls submitted from now on (one object-store put)."""
        self._version = int(version)
        self._payload_ref = ray.put(payload)

    def new_job_id(self) -> int:
        return next(self._ids)

    def submit(self, jobs: list[dict[str, Any]]) -> None:
        """Queues one call's job list (jobs carry their own ids); sent by :meth:`pump`."""
        if jobs:
            self._queue.append([dict(j, version=j.get("version", self._version)) for j in jobs])

    def drop_queued(self, predicate) -> int:
        """Removes queued (not yet sent) calls whose job list satisfies ``predicate``."""
        kept = [jobs for jobs in self._queue if not predicate(jobs)]
        dropped = len(self._queue) - len(kept)
        self._queue = collections.deque(kept)
        return dropped

    @property
    def num_queued(self) -> int:
        return len(self._queue)

    @property
    def num_in_flight(self) -> int:
        return sum(len(calls) for calls in self._in_flight.values())

    def healthy_runner_ids(self) -> list[int]:
        return list(self.group.healthy_worker_ids())

    # -- the loop ---------------------------------------------------------------------------
    def _requeue_lost(self, healthy: list[int]) -> None:
        for rid in list(self._in_flight):
            if rid not in healthy and self._in_flight[rid]:
                lost = list(self._in_flight[rid].values())
                self._in_flight[rid].clear()
                self.num_calls_lost += len(lost)
                self.num_jobs_requeued += sum(len(j) for j in lost)
                for jobs in reversed(lost):
                    self._queue.appendleft(jobs)
                logger.warning(
                    "rllib_ext: env runner %d failed with %d call(s) in flight; re-queued %d job(s)",
                    rid,
                    len(lost),
                    sum(len(j) for j in lost),
                )

    def pump(self) -> int:
        """Sends queued calls to runners with free slots; returns the number sent."""
        healthy = self.healthy_runner_ids()
        self._requeue_lost(healthy)
        sent = 0
        for rid in healthy:
            while self._queue and len(self._in_flight[rid]) < self.jobs_in_flight:
                jobs = self._queue.popleft()
                version = jobs[0]["version"]
                made = self.group.foreach_env_runner_async(
                    "run_jobs",
                    tag=self.tag,
                    kwargs={"version": version, "payload_ref": [self._payload_ref], "jobs": jobs},
                    remote_worker_ids=[rid],
                )
                if not made:  # RLlib's per-runner cap reached: keep the call for later
                    self._queue.appendleft(jobs)
                    break
                self._in_flight[rid][jobs[0]["id"]] = jobs
                sent += 1
        return sent

    def _wait_any(self, timeout_s: float) -> None:
        """Blocks until one of our calls is ready (or timeout).

        RLlib's ``fetch_ready_async_reqs(timeout_seconds=t)`` waits for *all* calls in flight (or
        t), which would leave finished results — and the driver — idle; so we ``ray.wait`` for
        the first one ourselves, on the manager's in-flight map, and then fetch with timeout 0.
        """
        in_flight = getattr(self.group._worker_manager, "_in_flight_req_to_actor_id", None)
        if in_flight is None:  # another RLlib version: fall back to a short sleep
            time.sleep(min(timeout_s, 0.002))
            return
        refs = [ref for ref, (tag, _) in list(in_flight.items()) if tag == self.tag]
        if refs:
            ray.wait(refs, num_returns=1, timeout=timeout_s, fetch_local=False)
        else:
            time.sleep(min(timeout_s, 0.002))

    def poll(self, timeout_s: float = 0.01) -> list[dict[str, Any]]:
        """Results of calls that finished within ``timeout_s`` (after sending what is queued)."""
        self.pump()
        self._wait_any(timeout_s)
        out = []
        for rid, result in self.group.fetch_ready_async_reqs(tags=self.tag, timeout_seconds=0):
            if result["results"]:
                self._in_flight[rid].pop(result["results"][0]["id"], None)
            self.busy_s[rid] += result["busy_s"]
            out.append(result)
        self._requeue_lost(self.healthy_runner_ids())
        if out:
            self.pump()
        return out

    def drain(self, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """Waits for every call in flight (used before checkpoints/stop); returns their results."""
        out, deadline = [], time.perf_counter() + timeout_s
        while self.num_in_flight and time.perf_counter() < deadline:
            out += self.poll(timeout_s=0.1)
            self._queue.clear()
        return out

    def utilization(self, since: float, busy_before: dict[int, float], num_runners: int) -> float:
        """Σ busy / (runners × wall) since ``since`` (busy_before: a copy of busy_s then)."""
        wall = max(time.perf_counter() - since, 1e-9)
        busy = sum(self.busy_s.values()) - sum(busy_before.values())
        return float(busy / (max(num_runners, 1) * wall))

    def snapshot(self) -> tuple[float, dict[int, float]]:
        return time.perf_counter(), dict(self.busy_s)
