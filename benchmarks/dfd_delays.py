"""DFD_EXT's delays n_i = u − u_i with one perturbation per call vs calls sized by work (issue 41 §2).

Paper 000 (Algorithm 1, Eq. 16–18) credits each return with its delay n_i: the number of updates
between the θ version its runner evaluated and the update whose batch takes it; returns with
n_i > U_max (3, Table 3) are dropped. The more jobs are in flight per runner, the older a return is
when it arrives. Calls sized by work (``perturbations_per_call="auto"``, commit 76823d6) carry several
perturbations each, so the jobs in flight per runner grow from ``jobs_in_flight_per_env_runner`` (2)
to up to about N / runners. This measures what that does to the delays.

Settings compared (``--settings``), all with ``jobs_in_flight_per_env_runner=2``, N = 40, U_max = 3:

- ``one``: ``perturbations_per_call=1``: one perturbation per call. This is DFD_EXT's default, both
  before and after 76823d6 (``DFDConfig`` overrides the family's ``auto``), i.e. the old behaviour.
- ``auto_min0``: ``"auto"`` with ``min_reply_s=0``: ``max(1, N // (4 runners))`` per call, which
  is ``auto`` exactly as it was before 76823d6 (the newer ``≤ ⌈N / (runners × 2)⌉`` bound does not
  bind).
- ``auto``: ``"auto"`` with ``min_reply_s=0.2`` (the family's default): at least 0.2 s of runner time
  per call, at most ``⌈N / (runners × 2)⌉`` perturbations (the calls in flight hold about a batch).

Envs (``--envs``): ``sleep``: ``rllib_ext/VariableLength-v0``, episodes of U{5, 50} steps with a 5 ms
sleep each (a stand-in for an expensive simulator; about 0.14 s per episode); ``cartpole``:
CartPole-v1 (sub-millisecond to few-millisecond episodes, so ``auto`` hits its upper bound).

Per (env, runners, setting, repeat): ``build_algo()``, ``--warmup-iters`` ``train()`` calls, then
``train()`` until ``--seconds`` of wall time have passed. The delays are the engine's own per-return
histogram (``DFD.returns.delay_counts``, also reported as ``blackbox/returns_by_delay_lifetime/<n>``
and ``.../over_u_max``): every return counted once by its delay where it leaves the buffer (taken
into a batch, or dropped as too old), bins 0 … U_max and one bin for n > U_max; the figures are the
difference between the end of the run and the end of warm-up. Quantiles that fall in the last bin
are written as U_max + 1 (meaning "> U_max"); ``max_delay`` is the largest delay of the whole run
(warm-up included; the engine keeps one lifetime maximum). ``mean_delay_used`` is over the returns
that entered updates (the ones DFD credits with λ_i); ``frac_over_u_max`` is over all returns.

The driver shares a loaded 2-core machine with its runners: wall time and the driver process's CPU
time (``time.process_time``, all threads of the driver process) are both written.

Rows: one JSON line per run in ``--out`` (default
``benchmarks/results/measurements/dfd_delays/<UTC date>.jsonl``).

    python -m benchmarks.dfd_delays --repeats 3
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import time
from typing import Any

import numpy as np
import ray

import rllib_ext  # noqa: F401 - registers DFD_EXT and the envs
from rllib_ext import DFDConfig
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

SETTINGS: dict[str, dict[str, Any]] = {
    "one": {"perturbations_per_call": 1},
    "auto_min0": {"perturbations_per_call": "auto", "min_reply_s": 0.0},
    "auto": {"perturbations_per_call": "auto", "min_reply_s": 0.2},
}
ENVS: dict[str, tuple[str, dict[str, Any]]] = {
    "sleep": ("rllib_ext/VariableLength-v0", {"min_len": 5, "max_len": 50, "step_sleep_s": 0.005}),
    "cartpole": ("CartPole-v1", {}),
}


def quantile(counts: np.ndarray, q: float) -> int:
    """The q-quantile of a histogram of integer values 0 … len(counts) − 1 (lower)."""
    cum = np.cumsum(counts)
    return int(np.searchsorted(cum, q * cum[-1], side="left"))


def measure(env: str, runners: int, setting: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    env_id, env_config = ENVS[env]
    config = (
        DFDConfig()
        .environment(env_id, env_config=env_config)
        .env_runners(num_env_runners=runners)
        .training(episodes_per_batch=args.n, jobs_in_flight_per_env_runner=2, **SETTINGS[setting])
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    try:
        for _ in range(args.warmup_iters):
            algo.train()
        u_max = algo.returns.u_max
        counts0 = algo.returns.delay_counts.copy()
        u0, calls0, results0 = algo.update_index, algo.pool.num_calls_sent, algo.counters["episodes"]
        t0, c0 = time.perf_counter(), time.process_time()
        result: dict[str, Any] = {}
        while time.perf_counter() - t0 < args.seconds:
            result = algo.train()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        counts = algo.returns.delay_counts - counts0
        logged = result.get("blackbox", {}).get("returns_by_delay_lifetime", {})
        assert logged.get("0") == algo.returns.delay_counts[0], "the metric is the buffer's histogram"
        used = counts[: u_max + 1]
        results = algo.counters["episodes"] - results0
        calls = algo.pool.num_calls_sent - calls0
        return {
            "u_max": u_max,
            "delay_counts": counts.tolist(),
            "returns_counted": int(counts.sum()),
            "mean_delay_used": float((np.arange(u_max + 1) * used).sum() / max(used.sum(), 1)),
            "p50": quantile(counts, 0.5),
            "p90": quantile(counts, 0.9),
            "p99": quantile(counts, 0.99),
            "max_delay": int(algo.returns.delay_max),
            "frac_delayed": float(counts[1:].sum() / max(counts.sum(), 1)),
            "frac_over_u_max": float(counts[-1] / max(counts.sum(), 1)),
            "results_per_call": results / max(calls, 1),
            "updates": algo.update_index - u0,
            "updates_per_s": (algo.update_index - u0) / wall,
            "results_per_s": results / wall,
            "wall_s": wall,
            "driver_cpu_s": cpu,
        }
    finally:
        algo.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    p.add_argument("--runners", type=int, nargs="+", default=[2, 4])
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--n", type=int, default=40, help="episodes_per_batch (N)")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--warmup-iters", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "dfd_delays", f"{date}.jsonl"
    )
    machine, code = Machine.this(), git_commit()
    ray.init(num_cpus=max(args.runners) + 1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        for env in args.envs:
            for runners in args.runners:
                rows: dict[str, list[dict[str, Any]]] = {s: [] for s in args.settings}
                for repeat in range(args.repeats):
                    for setting in args.settings:  # interleaved: the machine's load hits all alike
                        row = measure(env, runners, setting, args, seed=repeat)
                        rows[setting].append(row)
                        append_measurement(
                            out,
                            {
                                "benchmark": "dfd_delays",
                                "code": code,
                                "algorithm": "DFD_EXT",
                                "env": ENVS[env][0],
                                "env_config": ENVS[env][1],
                                "runners": runners,
                                "setting": setting,
                                "settings": {"episodes_per_batch": args.n, **SETTINGS[setting]},
                                "repeat": repeat,
                                **row,
                                "machine": {"cores": machine.cores, "description": machine.description},
                                "date": date,
                            },
                        )
                for setting, rs in rows.items():
                    med = {k: statistics.median(r[k] for r in rs) for k in rs[0] if not isinstance(rs[0][k], list)}
                    print(
                        f"{env:8s} R={runners} {setting:9s}: mean {med['mean_delay_used']:.2f} p50 {med['p50']:.0f} "
                        f"p90 {med['p90']:.0f} p99 {med['p99']:.0f} max {max(r['max_delay'] for r in rs)} "
                        f">U_max {med['frac_over_u_max']:.4f} delayed {med['frac_delayed']:.3f} "
                        f"results/call {med['results_per_call']:.1f} updates/s {med['updates_per_s']:.2f} "
                        f"CPU {med['driver_cpu_s']:.1f}/{med['wall_s']:.1f} s [median of {len(rs)}]",
                        flush=True,
                    )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
