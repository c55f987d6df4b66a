"""Driver CPU per call of the black-box job pool (``AsyncJobPool``) at 8…4096 runners, without Ray.

The pool runs against fake runners at its boundary, as in ``tests/unit/common/blackbox/test_pool.py``:
RLlib's real ``FaultTolerantActorManager`` (its health bookkeeping costs what it costs in a run)
holding fake actors whose ``run_jobs.remote`` returns a fake reference, a stand-in for the
EnvRunnerGroup around it, and ``ray.put/wait/get`` stubbed in the pool module (``wait`` hands back
the references finished since the last poll, in O(finished), so that what is timed is the pool's own
bookkeeping, not the stub's; Ray's own ``ray.wait`` over the references in flight is not measured).

Steady state: every runner has ``--in-flight`` calls in flight, the queue is never empty; before
each ``poll()`` the ``--finished`` oldest calls finish (and as many new calls are queued), so a poll
receives them and refills the freed slots. Three operations are timed, each per call:

- ``pump``: ``pump()`` with every slot taken and calls queued (a polling round with nothing ready);
- ``poll``: ``poll(timeout_s=0)`` receiving ``--finished`` replies and refilling (two pumps inside);
- ``overdue``: the watchdog's ``overdue()``, called once per polling round.

Each (runners, op) is timed ``--repeats`` times, each repeat for ``--seconds`` or ``--max-calls``
calls, whichever comes first; wall time (``perf_counter``) and CPU time (``process_time``) per
call. One JSON row per repeat in ``--out`` (default
``benchmarks/results/measurements/blackbox_pool/<date>.jsonl``), labelled ``--label`` (e.g.
``before``/``after``) and the commit.

    python -m benchmarks.blackbox_pool --label after
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
import types
from typing import Any

import numpy as np
from ray.rllib.utils.actor_manager import FaultTolerantActorManager

from rllib_ext.common.blackbox import pool as pool_module
from rllib_ext.common.blackbox.pool import AsyncJobPool
from rllib_ext.common.blackbox.protocol import EpisodeResult, Payload, PerturbationJob, Reply, theta_digest
from rllib_ext.compare.rows import Machine, append_measurement, git_commit


class _Ref:
    __slots__ = ("rid", "call", "reply")

    def __init__(self, rid: int, call: Any) -> None:
        self.rid, self.call, self.reply = rid, call, None


class _FakeRay:
    """``ray.put/wait/get`` for the pool module: ``wait`` returns what finished since the last poll."""

    class exceptions:  # noqa: N801 - mirrors ray.exceptions
        class RayError(Exception):
            pass

    def __init__(self) -> None:
        self.ready: list[_Ref] = []

    def put(self, payload: Payload) -> tuple[str, Payload]:
        return ("ref", payload)

    def wait(self, refs: list[Any], num_returns: int, timeout: float, fetch_local: bool) -> tuple[list[Any], list]:
        return list(self.ready), []

    def get(self, ref: _Ref) -> Reply:
        return ref.reply


class _FakeGroup:
    """An EnvRunnerGroup's surface the pool uses, over RLlib's real actor manager."""

    def __init__(self, n: int) -> None:
        self.sent: list[_Ref] = []  # every call in flight or finished-not-received, in send order
        group = self

        class _Actor:
            def __init__(self, rid: int) -> None:
                self.run_jobs = types.SimpleNamespace(remote=lambda call: group._send(rid, call))

        self._worker_manager = FaultTolerantActorManager(actors=[None] * n, init_id=1)
        for rid in list(self._worker_manager.actors()):
            self._worker_manager.actors()[rid] = _Actor(rid)

    def _send(self, rid: int, call: Any) -> _Ref:
        ref = _Ref(rid, call)
        self.sent.append(ref)
        return ref

    def healthy_worker_ids(self) -> list[int]:  # EnvRunnerGroup.healthy_worker_ids
        return self._worker_manager.healthy_actor_ids()


def _finish(ref: _Ref, digest: int) -> None:
    results = [
        EpisodeResult(job=job, ret=1.0, returns=(1.0,), runner=ref.rid, theta_digest=digest) for job in ref.call.jobs
    ]
    ref.reply = Reply(results=results, busy_s=0.01, runner=ref.rid)


def _measure(runners: int, op: str, args: argparse.Namespace) -> tuple[int, float, float]:
    fake = _FakeRay()
    pool_module.ray = fake  # type: ignore[assignment]
    group = _FakeGroup(runners)
    pool = AsyncJobPool(group, jobs_in_flight=args.in_flight)  # type: ignore[arg-type]
    theta = np.zeros(8, dtype=np.float32)
    pool.publish(0, Payload(theta=theta))
    digest = theta_digest(theta)

    def submit(k: int) -> None:
        for _ in range(k):
            pool.submit([PerturbationJob(id=pool.new_job_id(), seed=1, n=2, index=0)])

    submit(runners * args.in_flight + 2 * args.finished)
    pool.pump()
    head = 0  # group.sent[head:] are in flight, oldest first

    def round_() -> None:
        nonlocal head
        fake.ready = group.sent[head : head + args.finished]
        head += args.finished
        for ref in fake.ready:
            _finish(ref, digest)
        submit(args.finished)

    for _ in range(3):  # warm-up
        round_()
        pool.poll(timeout_s=0.0)
    fake.ready = []
    calls, wall, cpu = 0, 0.0, 0.0
    while calls < args.max_calls and (wall < args.seconds or calls < 5):
        if op == "poll":
            round_()
            w0, c0 = time.perf_counter(), time.process_time()
            pool.poll(timeout_s=0.0)
        elif op == "pump":
            w0, c0 = time.perf_counter(), time.process_time()
            pool.pump()
        else:
            w0, c0 = time.perf_counter(), time.process_time()
            pool.overdue()
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        calls += 1
        fake.ready = []
    return calls, wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runners", type=int, nargs="+", default=[8, 64, 256, 1024, 4096])
    p.add_argument("--ops", nargs="+", default=["pump", "poll", "overdue"], choices=["pump", "poll", "overdue"])
    p.add_argument("--in-flight", type=int, default=2, help="jobs_in_flight_per_env_runner")
    p.add_argument("--finished", type=int, default=4, help="calls finishing before each poll")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=0.5, help="per repeat (at least 5 calls)")
    p.add_argument("--max-calls", type=int, default=5000)
    p.add_argument("--label", default="", help="e.g. before / after")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "blackbox_pool", f"{date}.jsonl"
    )
    machine, code = Machine.this(), git_commit()
    for runners in args.runners:
        for op in args.ops:
            walls, cpus = [], []
            for repeat in range(args.repeats):
                calls, wall, cpu = _measure(runners, op, args)
                walls.append(1e3 * wall / calls)
                cpus.append(1e3 * cpu / calls)
                append_measurement(
                    out,
                    {
                        "benchmark": "blackbox_pool",
                        "label": args.label,
                        "code": code,
                        "op": op,
                        "runners": runners,
                        "jobs_in_flight": args.in_flight,
                        "finished_per_poll": args.finished,
                        "repeat": repeat,
                        "calls": calls,
                        "wall_ms_per_call": walls[-1],
                        "cpu_ms_per_call": cpus[-1],
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    },
                )
            print(
                f"{args.label or '-'} {runners:5d} runners {op:8s}: wall {statistics.median(walls):9.4f} ms/call "
                f"(min {min(walls):.4f}), CPU {statistics.median(cpus):9.4f} ms/call, {calls} calls/repeat",
                flush=True,
            )


if __name__ == "__main__":
    main()
