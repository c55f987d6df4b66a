"""Driver capacity of the black-box engine with real Ray env runners: results/s and driver CPU per result.

ES_EXT trains on CartPole-v1 with ``--runners`` (2) env runners and ``episodes_per_batch`` from
``--batches`` (40 and 1000), with ``lr`` = ``--lr`` (1e-9): θ stays at its initialization, so the
episodes stay as short as a random policy's (~10 steps, ~0.2 ms) and Ray's per-call cost dominates —
the driver's worst case. (With a learning lr, CartPole's episodes reach 500 steps within a few
updates and the run measures the runners, not the driver.) After one warm-up ``train()``, ``train()`` runs for ``--seconds``; the
row has the results received per wall second, the driver process's CPU seconds per result
(``time.process_time``: the driver's Python thread *and* Ray's C++ threads in the driver process)
and ``capacity_results_per_s`` = results / driver CPU seconds, the rate at which a driver with one
core of its own would be saturated. Runs are on the same 2-core machine as the runners, so wall
rates are bounded by the runners too; the CPU per result is the figure the driver's capacity is.

One JSON row per (batch, repeat) in ``--out`` (default
``benchmarks/results/measurements/blackbox_capacity/<date>.jsonl``), labelled ``--label`` and the
commit; ``--set key=value`` (Python literals) adds training settings (e.g. ``min_reply_s=0.05``).

    python -m benchmarks.blackbox_capacity --label after --repeats 3
"""

from __future__ import annotations

import argparse
import ast
import datetime
import logging
import os
import statistics
import time
from typing import Any

import ray

import rllib_ext  # noqa: F401 - registers ES_EXT
from rllib_ext import ESConfig
from rllib_ext.compare.rows import Machine, append_measurement, git_commit


def measure(
    env: str, runners: int, batch: int, seconds: float, lr: float, extra: dict[str, Any]
) -> dict[str, float | None]:
    config = (
        ESConfig()
        .environment(env)
        .env_runners(num_env_runners=runners)
        .training(episodes_per_batch=batch, eval_episodes=0, lr=lr, **extra)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        algo.train()  # warm-up (and the first estimate of a job's duration)
        results0, steps0, updates0 = algo.counters["episodes"], algo.counters["env_steps"], algo.update_index
        calls0 = algo.pool.num_calls_sent if hasattr(algo.pool, "num_calls_sent") else None
        t0, c0 = time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < seconds:
            algo.train()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        results = algo.counters["episodes"] - results0
        calls = None if calls0 is None else algo.pool.num_calls_sent - calls0
        return {
            "results": results,
            "results_per_s": results / wall,
            "env_steps_per_s": (algo.counters["env_steps"] - steps0) / wall,
            "updates_per_s": (algo.update_index - updates0) / wall,
            "driver_cpu_ms_per_result": 1e3 * cpu / max(results, 1),
            "capacity_results_per_s": results / max(cpu, 1e-9),
            "driver_cpu_share": cpu / wall,
            "results_per_call": None if not calls else results / calls,
            "mean_episode_len": (algo.counters["env_steps"] - steps0) / max(results, 1),
            "wall_s": wall,
        }
    finally:
        algo.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--runners", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="+", default=[40, 1000], help="episodes_per_batch values")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--lr", type=float, default=1e-9, help="ES step size (tiny: θ and episode lengths stay put)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--set", nargs="*", default=[], help="training settings key=value (Python literals)")
    p.add_argument("--label", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    extra = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "blackbox_capacity", f"{date}.jsonl"
    )
    machine, code = Machine.this(), git_commit()
    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        for batch in args.batches:
            rows = []
            for repeat in range(args.repeats):
                row = measure(args.env, args.runners, batch, args.seconds, args.lr, extra)
                rows.append(row)
                append_measurement(
                    out,
                    {
                        "benchmark": "blackbox_capacity",
                        "label": args.label,
                        "code": code,
                        "algorithm": "ES_EXT",
                        "env": args.env,
                        "runners": args.runners,
                        "episodes_per_batch": batch,
                        "settings": {"lr": args.lr, **extra},
                        "repeat": repeat,
                        **row,
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    },
                )
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if rows[0][k] is not None}
            print(
                f"{args.label or '-'} N={batch}: {med['results_per_s']:.0f} results/s wall, driver CPU "
                f"{med['driver_cpu_ms_per_result']:.3f} ms/result (capacity {med['capacity_results_per_s']:.0f}/s, "
                f"CPU share {med['driver_cpu_share']:.2f}), {med['env_steps_per_s']:.0f} steps/s, "
                f"{med.get('results_per_call', float('nan')):.1f} results/call [median of {len(rows)}]",
                flush=True,
            )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
