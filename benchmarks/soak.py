"""Soak (issue #9): a long run with 4 env runners on 2 cores; memory must stay flat.

For each algorithm, trains for ``--minutes`` and samples, every ``--every`` seconds, the resident
memory (RSS, from /proc: Linux) of the driver and of this Ray session's worker processes (env
runners, replay/critic actors) and the object store's use. Prints start, end and max per process group, and the growth
end − start; the run "passes" when the driver and actors grow by less than ``--tolerance-mb``
after the warm-up sample and the object store does not keep growing.

    python benchmarks/soak.py --algos IMPACT_EXT DFD_EXT --minutes 20
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import ray

SETTINGS = {
    "DFD_EXT": ("Hopper-v5", {"num_env_runners": 4, "num_cpus_per_env_runner": 0.25, "eval_episodes": 0}),
    "IMPACT_EXT": ("CartPole-v1", {"num_env_runners": 4, "num_cpus_per_env_runner": 0.25}),
    "AESRL_EXT": (
        "Pendulum-v1",
        {
            "num_env_runners": 4,
            "num_cpus_per_env_runner": 0.25,
            "policy_hiddens": [64, 64],
            "critic_hiddens": [64, 64],
            "fixed_range": 250.0,
            "fitness_baseline": 250.0,
            "initial_steps": 1000,
            "rl_actor_steps": 200,
        },
    ),
}


def rss_mb(pid) -> float:
    """Resident memory of one process from /proc (Linux), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _ppid(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def ray_worker_rss_mb() -> float:
    """Summed RSS of this Ray session's worker processes (env runners, replay, critic, ...).

    Workers are the raylet's children: only this session's raylet counts, so other Ray instances
    on the machine (a test run, another benchmark) do not.
    """
    node = ray._private.worker._global_node
    raylets = {p.process.pid for p in node.all_processes.get("raylet", [])}
    return sum(rss_mb(pid) for pid in filter(str.isdigit, os.listdir("/proc")) if _ppid(pid) in raylets)


def object_store_used_mb() -> float:
    """Plasma (object store) memory in use across the cluster, from Ray's memory summary."""
    import re

    from ray._private.internal_api import memory_summary

    match = re.search(r"Plasma memory usage (\d+) MiB", memory_summary(stats_only=True))
    return float(match.group(1)) if match else float("nan")


def soak(name: str, minutes: float, every: float) -> dict:
    import rllib_ext  # noqa: F401
    from rllib_ext import experiment, registry

    env, overrides = SETTINGS[name]
    config = experiment.build_config(registry.get_algorithm_class(name), env, dict(overrides))
    algo = config.build_algo()
    samples = []
    try:
        t0 = time.perf_counter()
        next_sample = t0
        iters = 0
        while time.perf_counter() - t0 < minutes * 60:
            result = algo.train()
            iters += 1
            if time.perf_counter() >= next_sample:
                samples.append(
                    {
                        "t": time.perf_counter() - t0,
                        "driver": rss_mb(os.getpid()),
                        "actors": ray_worker_rss_mb(),
                        "store": object_store_used_mb(),
                        "steps": result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0),
                    }
                )
                print(name, {k: round(float(v), 1) for k, v in samples[-1].items()}, flush=True)
                next_sample += every
    finally:
        algo.stop()
    warm = samples[min(1, len(samples) - 1)]  # after the first interval: caches, replay filled
    end = samples[-1]
    return {
        "algo": name,
        "iters": iters,
        "warm": warm,
        "end": end,
        "max_driver": max(s["driver"] for s in samples),
        "max_actors": max(s["actors"] for s in samples),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["IMPACT_EXT", "DFD_EXT"], choices=list(SETTINGS))
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=60.0)
    parser.add_argument("--tolerance-mb", type=float, default=50.0)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    rows = [soak(name, args.minutes, args.every) for name in args.algos]
    ray.shutdown()
    print(
        f"\n| algorithm | minutes | env steps | driver RSS MB warm -> end (max) | actors RSS MB warm -> end (max) | "
        f"object store MB warm -> end | flat (< {args.tolerance_mb:.0f} MB growth) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        w, e = r["warm"], r["end"]
        flat = e["driver"] - w["driver"] < args.tolerance_mb and e["actors"] - w["actors"] < args.tolerance_mb
        print(
            f"| {r['algo']} | {args.minutes:.0f} | {int(e['steps'])} | {w['driver']:.0f} -> {e['driver']:.0f} "
            f"({r['max_driver']:.0f}) | {w['actors']:.0f} -> {e['actors']:.0f} ({r['max_actors']:.0f}) | "
            f"{w['store']:.1f} -> {e['store']:.1f} | {'yes' if flat else 'NO'} |"
        )


if __name__ == "__main__":
    main()
