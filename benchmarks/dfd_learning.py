"""Learning at a small budget: DFD+DSGD, DFD+Adam, FD+DSGD, ES (paper 000's comparison grid).

Same env, same runners, same wall budget per run; seeds interleaved so machine noise hits every
method alike. Reported per method (median over seeds): the mean perturbed return over the
last iterations, the best iteration return, and the env steps at which ``--target`` was first
reached (— if never).

    python benchmarks/dfd_learning.py --env InvertedPendulum-v5 --seeds 0 1 2 --seconds 120 --target 900
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import ray

import rllib_ext  # noqa: F401
from rllib_ext import DFDConfig, ESConfig

METHODS = {
    "DFD+DSGD": (DFDConfig, {"delayed_returns": True, "optimizer": "dsgd"}),
    "DFD+Adam": (DFDConfig, {"delayed_returns": True, "optimizer": "adam"}),
    "FD+DSGD": (DFDConfig, {"delayed_returns": False, "optimizer": "dsgd"}),
    "ES": (ESConfig, {"optimizer": "adam", "return_shaping": "standardize"}),
}


def run(method: str, env: str, seed: int, seconds: float, runners: int, target: float):
    config_cls, extra = METHODS[method]
    config = (
        config_cls()
        .environment(env)
        .env_runners(num_env_runners=runners)
        .training(episodes_per_batch=20, noise_stdev=0.05, lr=0.02, policy_hiddens=[32, 32], **extra)
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    curve, reached = [], None
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            steps = result["num_env_steps_sampled_lifetime"]
            curve.append(ret)
            if reached is None and ret >= target:
                reached = steps
        return {
            "final": statistics.mean(curve[-3:]),
            "best": max(curve),
            "steps_to_target": reached,
            "updates": algo.update_index,
        }
    finally:
        algo.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="InvertedPendulum-v5")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--target", type=float, default=900.0)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = parser.parse_args()
    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)
    rows = {m: [] for m in args.methods}
    for seed in args.seeds:
        for m in args.methods:
            rows[m].append(run(m, args.env, seed, args.seconds, args.runners, args.target))
            print(seed, m, rows[m][-1], flush=True)
    print(
        f"\n| method ({args.env}, {args.seconds:.0f} s, {len(args.seeds)} seeds) | final return | best | "
        f"updates | env steps to {args.target:g} |"
    )
    print("| --- | --- | --- | --- | --- |")
    for m in args.methods:
        r = rows[m]
        reached = [x["steps_to_target"] for x in r if x["steps_to_target"] is not None]
        to_target = f"{statistics.median(reached):,.0f} ({len(reached)}/{len(r)} seeds)" if reached else "—"
        print(
            f"| {m} | {statistics.median(x['final'] for x in r):.1f} | {statistics.median(x['best'] for x in r):.1f} | "
            f"{statistics.median(x['updates'] for x in r):.0f} | {to_target} |"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()
