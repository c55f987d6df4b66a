"""Worker utilization and updates per second: DFD_EXT vs FD (DFD without delayed returns) vs ES_EXT.

Paper 000 §3 and Table 1: with episodes of varying length, synchronous ES idles runners at the
batch barrier, FD drops the returns that arrive for an older θ, DFD uses them (Eq. 18).
Same runners, same wall budget, side by side in one run; medians over ``--repeats``.

- ``utilization``: runner-seconds spent on episodes whose returns entered an update /
  (runners × wall) — the paper's sense of "usage of connected workers".
- ``busy``: runner-seconds spent evaluating anything / (runners × wall).
- ``updates/s``: optimizer updates per wall-second.

Scenarios: ``sleep``: rllib_ext/VariableLength-v0 (5–50 steps, 5 ms sleep per step, a stand-in
for an expensive simulator), 8 runners at 0.2 CPU each on this 2-core machine; ``hopper``:
Hopper-v5 with 2 runners.

    python benchmarks/dfd_utilization.py --scenarios sleep hopper --seconds 40 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import ray

import rllib_ext  # noqa: F401
from rllib_ext import DFDConfig, ESConfig

SCENARIOS = {
    "sleep": dict(
        env="rllib_ext/VariableLength-v0",
        env_config={"min_len": 5, "max_len": 50, "step_sleep_s": 0.005},
        runners=8,
        cpus_per_runner=0.2,
        n=16,
    ),
    "hopper": dict(env="Hopper-v5", env_config={}, runners=2, cpus_per_runner=1, n=16),
}
METHODS = ("DFD", "FD", "ES")


def build(method: str, sc: dict):
    config = DFDConfig() if method in ("DFD", "FD") else ESConfig()
    config = (
        config.environment(sc["env"], env_config=sc["env_config"])
        .env_runners(num_env_runners=sc["runners"], num_cpus_per_env_runner=sc["cpus_per_runner"])
        .training(
            episodes_per_batch=sc["n"],
            policy_hiddens=[64, 64],
            noise_stdev=0.02,
            lr=0.01,
            perturbations_per_call=1,
            return_shaping="standardize",
        )
        .debugging(seed=0)
    )
    if method in ("DFD", "FD"):
        config.training(delayed_returns=method == "DFD")
    return config.build_algo()


def measure(method: str, sc: dict, seconds: float):
    algo = build(method, sc)
    try:
        algo.train()  # warm up: actors started, first update done
        u0, useful0, busy0 = algo.update_index, algo.counters["useful_runner_s"], sum(algo.pool.busy_s.values())
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            algo.train()
        wall = time.perf_counter() - t0
        runners = sc["runners"]
        return {
            "utilization": (algo.counters["useful_runner_s"] - useful0) / (runners * wall),
            "busy": (sum(algo.pool.busy_s.values()) - busy0) / (runners * wall),
            "updates/s": (algo.update_index - u0) / wall,
        }
    finally:
        algo.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ray.init(num_cpus=3, include_dashboard=False, logging_level=logging.WARNING)
    table = {}
    for name in args.scenarios:
        sc = SCENARIOS[name]
        runs = {m: [] for m in METHODS}
        for _ in range(args.repeats):  # interleaved, so machine noise hits every method alike
            for m in METHODS:
                runs[m].append(measure(m, sc, args.seconds))
                print(name, m, {k: round(v, 3) for k, v in runs[m][-1].items()}, flush=True)
        for m in METHODS:
            table[(name, m)] = {k: statistics.median(r[k] for r in runs[m]) for k in runs[m][0]}
    print("\n| scenario | method | utilization | busy | updates/s | updates/s vs FD |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios:
        fd = table[(name, "FD")]["updates/s"]
        for m in METHODS:
            row = table[(name, m)]
            print(
                f"| {name} ({SCENARIOS[name]['runners']} runners) | {m} | {row['utilization']:.2f} | "
                f"{row['busy']:.2f} | {row['updates/s']:.2f} | {row['updates/s'] / fd:.2f}x |"
            )
    ray.shutdown()


if __name__ == "__main__":
    main()
