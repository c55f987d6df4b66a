"""DFD_EXT's utilization at 8 … 1024 simulated runners: the real driver, fake runners, a virtual clock.

Issue 41's goal: DFD utilization ≥ 0.9 at 256 runners. Real Ray actors at that count do not fit
this machine, so the runners are simulated at the pool's boundary and everything on the driver
side is the real code, run in this process:

- The algorithm is a real ``DFD_EXT`` (``build_algo()`` with ``num_env_runners=0``: its local learner
  with its optimizer, its parameter history, return buffer, noise table and metrics), trained with
  the real ``Algorithm.train()`` (RLlib's per-iteration bookkeeping included). Its pool is a real
  ``AsyncJobPool`` over a stand-in EnvRunnerGroup of R fake runners (RLlib's real
  ``FaultTolerantActorManager`` holds them, as in ``benchmarks/blackbox_pool.py``); ``ray.put/wait/get``
  are stubbed in the pool and algorithm modules (the noise table and θ are passed by value).
- θ has a real size: the policy network of paper 000 Table 3 (``policy_hiddens=[64, 64]``, tanh) on
  Hopper-v5's spaces (11 → 3): d = 5,123. N = ``--episodes-per-runner`` × R (default 2R, as
  ``benchmarks/blackbox_scale.py``), U_max = 3, ``jobs_in_flight_per_env_runner=2``, DFD's default
  one perturbation per call (``auto`` sizing would give one too: at most ⌈N / (2R)⌉ = 1 per call;
  ``--per-call k`` sets k), ``eval_episodes=0``, noise table on (the default).
- A fake runner runs its calls one after another, first in first out: a job takes L · s of
  simulated time, L ~ U{5, 50} steps, s = 5 ms (``--min-len``, ``--max-len``, ``--step-s``; the
  episodes of ``blackbox_scale``), and returns one result with its job, version and θ digest (the
  credit check passes), a random return and L steps.
- Virtual clock: the driver is one thread; whenever it calls a stub (sends a call, waits for
  replies) the clock first advances by the driver thread's CPU time since it last left a stub
  (``time.thread_time``; the stubs' own time, which stands in for the runners and Ray, is not
  charged), so a call leaves at the driver's time; a wait adds the modelled Ray cost below and,
  if nothing has finished by then, advances to the next finish (an idle driver costs nothing).
  Runner work is on the same clock, so a slow driver shows up as runners idle.

Figures over the measured window (``train()`` until ``--warmup-updates`` updates, then ``train()``
until ``--updates`` more or ``--max-wall-s`` of real time; RLlib's ``train()`` runs updates for at
least a second of real time, so a window often holds many more updates than ``--updates``): ``utilization`` = runner busy time in the window /
(R × virtual elapsed); ``useful_utilization`` = the same without the returns DFD dropped as more
than U_max updates old (their share of returns: ``frac_over_u_max``, from the engine's delay
histogram); ``driver_cpu_us_per_result`` = the driver's measured CPU per result received (without the modelled
Ray cost; that is ``ray_call_us`` × ``calls`` / ``results`` on top);
``ideal_results_per_s`` = R / (L̄ · s); ``updates_per_virtual_s``. The driver thread's CPU is also
written as ``process_cpu_s`` (``time.process_time``, all threads) beside the real wall time.

Assumptions (what is *not* modelled; do not read more into the figures):

- Ray's own cost is not measured here: no network or object-store latency, no serialization, no
  ``ray.wait`` over the references in flight (itself O(calls in flight) per poll), no per-call
  cost on the runner. ``--ray-call-us`` adds a fixed driver cost per call (charged on the clock when
  its reply is received): 0 by default (the engine alone); a row with a non-zero value is a model
  of Ray's cost, not a measurement of it. 240 µs is a rough two-point fit of
  ``blackbox_capacity``'s rows (ES_EXT, CartPole, 2 real runners, N = 40: 0.197 ms per result at 5
  results per call, 0.173 ms at 10, so ≈ 0.24 ms per call and ≈ 0.15 ms per result besides); 650 µs
  the same fit of ``dfd_delays``'s CartPole rows (DFD_EXT, 2 and 4 real runners, N = 40, a machine
  at load ≈ 20: 0.82–1.16 ms per result at one result per call, 0.23–0.45 ms at 5–10, so ≈ 0.6–0.7 ms
  per call).
- Runners never fail, are never slow for other reasons, and θ's transfer to them is free; the
  runner-side cost of adopting a new θ and perturbing it is not charged.
- One driver thread with a core of its own: the CPU it used on this (loaded) machine is charged,
  not the wall time it took, so other processes' load does not count against it (cache effects
  of that load do).

Rows: one JSON line per (R, repeat) in ``--out`` (default
``benchmarks/results/measurements/blackbox_sim/<UTC date>.jsonl``).

    python -m benchmarks.blackbox_sim --runners 8 64 256 1024 --repeats 3
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import itertools
import logging
import os
import statistics
import time
import types
from typing import Any

import numpy as np
from ray.rllib.utils.actor_manager import FaultTolerantActorManager

import rllib_ext  # noqa: F401 - registers DFD_EXT
from rllib_ext import DFDConfig
from rllib_ext.common.blackbox import algorithm as algorithm_module
from rllib_ext.common.blackbox import pool as pool_module
from rllib_ext.common.blackbox.pool import AsyncJobPool
from rllib_ext.common.blackbox.protocol import EpisodeResult, Reply, theta_digest
from rllib_ext.compare.rows import Machine, append_measurement, git_commit


class _Ref:
    __slots__ = ("rid", "call", "finish", "reply")

    def __init__(self, rid: int, call: Any, finish: float, reply: Reply) -> None:
        self.rid, self.call, self.finish, self.reply = rid, call, finish, reply


class Sim:
    """The fake runners, the virtual clock and the stubs of ``ray`` (put/wait/get) over them."""

    class exceptions:  # noqa: N801 - mirrors ray.exceptions
        class RayError(Exception):
            pass

    def __init__(self, runners: int, args: argparse.Namespace, seed: int) -> None:
        self.now = 0.0  # virtual seconds
        self.rng = np.random.default_rng(seed)
        self.args = args
        self.free_at = np.zeros(runners + 1)  # runner ids 1..R
        self.busy: list[tuple[float, float]] = []  # (start, finish) of every call
        self._heap: list[tuple[float, int, _Ref]] = []
        self._seq = itertools.count()
        self._digests: dict[int, int] = {}  # version -> θ digest (runner side: not charged)
        self.done: dict[_Ref, None] = {}  # finished, not yet fetched (ray.get), in finish order
        self.mark = time.thread_time()  # the driver's thread CPU when it last left a stub
        self.charged = 0.0  # driver CPU charged to the clock
        self.calls = 0  # calls sent (the modelled Ray cost is charged per call, at its reply)

    def _enter(self) -> None:
        """Charges the driver thread's CPU since the last stub call to the clock (the stubs' own excluded)."""
        driver = time.thread_time() - self.mark
        self.charged += driver
        self.now += driver

    def _leave(self) -> None:
        self.mark = time.thread_time()

    # -- the runners --------------------------------------------------------------------------
    def send(self, rid: int, call: Any) -> _Ref:
        self._enter()  # the call leaves at the driver's time now
        digest = self._digests.get(call.version)
        if digest is None:
            digest = self._digests[call.version] = theta_digest(call.payload_ref.theta)
        a = self.args
        lengths = self.rng.integers(a.min_len, a.max_len + 1, size=len(call.jobs))
        results = [
            EpisodeResult(
                job=job,
                ret=float(self.rng.normal()),
                returns=(0.0,),
                length=int(length),
                duration_s=float(length) * a.step_s,
                runner=rid,
                theta_digest=digest,
            )
            for job, length in zip(call.jobs, lengths, strict=True)
        ]
        work = float(lengths.sum()) * a.step_s
        start = max(self.now, self.free_at[rid])
        finish = self.free_at[rid] = start + work
        self.busy.append((start, finish))
        ref = _Ref(rid, call, finish, Reply(results=results, busy_s=work, runner=rid))
        heapq.heappush(self._heap, (finish, next(self._seq), ref))
        self.calls += 1
        self._leave()
        return ref

    # -- ray stubs ----------------------------------------------------------------------------
    def put(self, obj: Any) -> Any:
        return obj  # by value: the payload (θ, filter, noise table) as the runners would map it

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        if isinstance(ref, _Ref):
            self.done.pop(ref, None)
            return ref.reply
        return ref

    def wait(self, refs: list[Any], num_returns: int, timeout: float, fetch_local: bool) -> tuple[list[Any], list]:
        self._enter()
        ready = []
        while self._heap and self._heap[0][0] <= self.now:
            ready.append(heapq.heappop(self._heap)[2])
        if not ready and not self.done and timeout > 0 and self._heap:  # idle: jump to the next finish
            self.now = min(self._heap[0][0], self.now + timeout)
            while self._heap and self._heap[0][0] <= self.now:
                ready.append(heapq.heappop(self._heap)[2])
        elif not ready and not self.done and timeout > 0:
            self.now += timeout
        self.now += 1e-6 * self.args.ray_call_us * len(ready)  # the modelled Ray cost per call
        self.done.update(dict.fromkeys(ready))
        out = list(self.done)
        self._leave()
        return out, []

    def busy_between(self, t0: float, t1: float) -> float:
        b = np.array(self.busy)
        return float(np.clip(np.minimum(b[:, 1], t1) - np.maximum(b[:, 0], t0), 0, None).sum())


class _Group:
    """The EnvRunnerGroup surface the pool uses, over RLlib's real actor manager of fake runners."""

    def __init__(self, sim: Sim, n: int) -> None:
        class _Actor:
            def __init__(self, rid: int) -> None:
                self.run_jobs = types.SimpleNamespace(remote=lambda call: sim.send(rid, call))

        self._worker_manager = FaultTolerantActorManager(actors=[None] * n, init_id=1)
        for rid in list(self._worker_manager.actors()):
            self._worker_manager.actors()[rid] = _Actor(rid)

    def healthy_worker_ids(self) -> list[int]:
        return self._worker_manager.healthy_actor_ids()


def measure(runners: int, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    sim = Sim(runners, args, seed)
    pool_module.ray = sim  # type: ignore[assignment]
    algorithm_module.ray = sim  # type: ignore[assignment]
    n = args.episodes_per_runner * runners
    config = (
        DFDConfig()
        .environment(args.env)
        .env_runners(num_env_runners=0)
        .training(
            episodes_per_batch=n,
            jobs_in_flight_per_env_runner=2,
            eval_episodes=0,
            perturbations_per_call=args.per_call,
        )
        .debugging(seed=seed, log_level="ERROR")
    )
    algo = config.build_algo()
    try:
        algo.pool = AsyncJobPool(_Group(sim, runners), jobs_in_flight=2)  # type: ignore[arg-type]
        algo.check_can_train = lambda: None  # type: ignore[method-assign]  # its runners are the fake ones
        algo.publish()
        while algo.update_index < args.warmup_updates:  # the pipeline full, the first θ versions old
            algo.train()
        counts0 = algo.returns.delay_counts.copy()
        u0, results0 = algo.update_index, algo.counters["episodes"]
        v0, charged0, calls0 = sim.now, sim.charged, sim.calls
        w0, c0 = time.perf_counter(), time.process_time()
        while algo.update_index - u0 < args.updates and time.perf_counter() - w0 < args.max_wall_s:
            algo.train()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        v1 = sim.now
        elapsed = v1 - v0
        busy = sim.busy_between(v0, v1)
        counts = algo.returns.delay_counts - counts0
        over = float(counts[-1] / max(counts.sum(), 1))
        results = algo.counters["episodes"] - results0
        charged = sim.charged - charged0
        mean_len = (args.min_len + args.max_len) / 2
        util = busy / (runners * elapsed)
        return {
            "theta_dim": int(algo.theta.size),
            "episodes_per_batch": n,
            "updates": algo.update_index - u0,
            "results": results,
            "virtual_s": elapsed,
            "utilization": util,
            "useful_utilization": util * (1 - over),
            "frac_over_u_max": over,
            "delay_counts": counts.tolist(),
            "results_per_virtual_s": results / elapsed,
            "ideal_results_per_s": runners / (mean_len * args.step_s),
            "updates_per_virtual_s": (algo.update_index - u0) / elapsed,
            "driver_cpu_us_per_result": 1e6 * charged / max(results, 1),
            "driver_cpu_share": charged / elapsed,
            "calls": sim.calls - calls0,
            "wall_s": wall,
            "process_cpu_s": cpu,
        }
    finally:
        algo.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runners", type=int, nargs="+", default=[8, 64, 256, 1024])
    p.add_argument("--env", default="Hopper-v5", help="only its spaces matter (θ's size)")
    p.add_argument("--episodes-per-runner", type=int, default=2, help="N = this × R")
    p.add_argument("--min-len", type=int, default=5)
    p.add_argument("--max-len", type=int, default=50)
    p.add_argument("--step-s", type=float, default=0.005, help="simulated seconds per env step")
    p.add_argument("--ray-call-us", type=float, default=0.0, help="modelled driver CPU per call for Ray (µs)")
    p.add_argument("--per-call", type=int, default=1, help="perturbations_per_call (DFD's default: 1)")
    p.add_argument("--updates", type=int, default=30, help="measured updates per repeat")
    p.add_argument("--max-wall-s", type=float, default=60.0, help="... or this much real time")
    p.add_argument("--warmup-updates", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    logging.getLogger("ray").setLevel(logging.ERROR)
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "blackbox_sim", f"{date}.jsonl"
    )
    machine, code = Machine.this(), git_commit()
    for runners in args.runners:
        rows = []
        for repeat in range(args.repeats):
            row = measure(runners, args, seed=repeat)
            rows.append(row)
            append_measurement(
                out,
                {
                    "benchmark": "blackbox_sim",
                    "code": code,
                    "algorithm": "DFD_EXT",
                    "runners": runners,
                    "repeat": repeat,
                    "settings": {
                        "env": args.env,
                        "episodes_per_runner": args.episodes_per_runner,
                        "min_len": args.min_len,
                        "max_len": args.max_len,
                        "step_s": args.step_s,
                        "ray_call_us": args.ray_call_us,
                        "jobs_in_flight_per_env_runner": 2,
                        "perturbations_per_call": args.per_call,
                    },
                    **row,
                    "machine": {"cores": machine.cores, "description": machine.description},
                    "date": date,
                },
            )
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if not isinstance(rows[0][k], list)}
        print(
            f"R={runners:5d} N={med['episodes_per_batch']:.0f}: utilization {med['utilization']:.3f} "
            f"(min {min(r['utilization'] for r in rows):.3f}), useful {med['useful_utilization']:.3f}, "
            f">U_max {med['frac_over_u_max']:.4f}, driver {med['driver_cpu_us_per_result']:.0f} µs/result "
            f"(share {med['driver_cpu_share']:.2f}), {med['results_per_virtual_s']:.0f}/{med['ideal_results_per_s']:.0f} "
            f"results/s, {med['updates']:.0f} updates; real {med['wall_s']:.1f} s wall, "
            f"{med['process_cpu_s']:.1f} s CPU [median of {len(rows)}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
