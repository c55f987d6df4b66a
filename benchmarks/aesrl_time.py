"""Paper 001 Table 1, scaled to this machine: wall time for one env-step budget.

CEMRL_EXT serial (CEM-RL: 1 runner), CEMRL_EXT parallel (P-CEM-RL) and AESRL_EXT with the same
number of runners, side by side in one run, interleaved, medians over ``--repeats``. Both
algorithms use the same TD3 settings, the same networks and the same RL schedule sizes (RL
individuals train ``--rl-actor-steps`` actor steps; the critic trains as each algorithm does:
between generations for CEM-RL, in parallel for AES-RL), so the difference is the update scheme.

Scenarios:

- ``sleep``: rllib_ext/VariableLength-v0 (continuous, 20–400 steps, 1 ms sleep per step: a
  stand-in for an expensive simulator whose episode lengths vary like Hopper's), 5 runners at
  0.2 CPU each, so that 5 runners fit on this 2-core machine (``--runners 9`` for the paper's 9).
- ``hopper``: Hopper-v5 with 2 runners (CPU-bound here: 2 cores).

AESRL_EXT is measured with each f(μ) estimate (``mean_fitness``): ``reevaluate`` with 5 episodes
(the reference code) or 1, and ``interpolate`` (μ evaluated once). The budget counts the individuals'
env steps (the paper's step budget); AES-RL's mean re-evaluations come on top.

    python benchmarks/aesrl_time.py --scenarios sleep --budget 30000 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import ray

import rllib_ext  # noqa: F401
from rllib_ext import AESRLConfig, CEMRLConfig

SCENARIOS = {
    "sleep": dict(
        env="rllib_ext/VariableLength-v0",
        env_config={"min_len": 20, "max_len": 400, "continuous": True, "step_sleep_s": 0.001},
        cpus_per_runner=0.2,
        fixed_range=60.0,
    ),
    "hopper": dict(env="Hopper-v5", env_config={}, cpus_per_runner=1, fixed_range=600.0),
}


def common(config, sc: dict, runners: int, args):
    return (
        config.environment(sc["env"], env_config=sc["env_config"])
        .env_runners(num_env_runners=runners, num_cpus_per_env_runner=sc["cpus_per_runner"])
        .training(
            policy_hiddens=[64, 64],
            critic_hiddens=[64, 64],
            initial_steps=args.initial_steps,
            rl_actor_steps=args.rl_actor_steps,
            rl_batch_size=100,
        )
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=0)
    )


def build(method: str, sc: dict, args):
    if method == "CEM-RL serial":
        return common(CEMRLConfig(), sc, 1, args).training(mode="serial").build_algo()
    if method == "P-CEM-RL":
        return common(CEMRLConfig(), sc, args.runners, args).training(mode="parallel").build_algo()
    fitness = "reevaluate" if "reevaluate" in method else "interpolate"
    episodes = 1 if method.endswith("reevaluate 1)") else 5
    return (
        common(AESRLConfig(), sc, args.runners, args)
        .training(
            mean_fitness=fitness,
            mean_eval_episodes=episodes,
            fixed_range=sc["fixed_range"],
            fitness_baseline=sc["fixed_range"],
            critic_steps_per_call=args.critic_steps_per_call,
        )
        .build_algo()
    )


def measure(method: str, sc: dict, args) -> dict:
    algo = build(method, sc, args)
    try:
        t0 = time.perf_counter()
        while algo.counters["individual_steps"] < args.budget:
            algo.train()
        wall = time.perf_counter() - t0
        c = algo.counters
        return {
            "wall_s": wall,
            "steps": c["individual_steps"],
            "updates": algo.update_index,
            "critic_steps": c["critic_steps"],
            "rl": c["n_rl"],
            "es": c["n_es"],
            "mean_eval_steps": c.get("mean_eval_env_steps", 0),
        }
    finally:
        algo.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=["sleep"], choices=list(SCENARIOS))
    parser.add_argument("--runners", type=int, default=5)
    parser.add_argument("--budget", type=int, default=20_000, help="individuals' env steps per run")
    parser.add_argument("--initial-steps", type=int, default=2_000)
    parser.add_argument("--rl-actor-steps", type=int, default=200)
    parser.add_argument("--critic-steps-per-call", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["CEM-RL serial", "P-CEM-RL", "AES-RL (reevaluate 5)", "AES-RL (reevaluate 1)", "AES-RL (interpolate)"],
    )
    args = parser.parse_args()
    ray.init(num_cpus=max(3, args.runners), include_dashboard=False, logging_level=logging.WARNING)
    for name in args.scenarios:
        sc = SCENARIOS[name]
        if name == "hopper":
            args.runners = min(args.runners, 2)
        runs = {m: [] for m in args.methods}
        for _ in range(args.repeats):  # interleaved, so machine noise hits every method alike
            for m in args.methods:
                runs[m].append(measure(m, sc, args))
                print(
                    name, m, {k: round(v, 2) if isinstance(v, float) else v for k, v in runs[m][-1].items()}, flush=True
                )
        med = {m: statistics.median(r["wall_s"] for r in runs[m]) for m in args.methods}
        serial, parallel = med.get("CEM-RL serial"), med.get("P-CEM-RL")
        print(f"\n{name}: {args.runners} runners, budget {args.budget} env steps, medians of {args.repeats}")
        print("| method | runners | wall s | vs CEM-RL serial | vs P-CEM-RL |")
        print("| --- | --- | --- | --- | --- |")
        for m in args.methods:
            n = 1 if m == "CEM-RL serial" else args.runners
            vs_s = f"{med[m] / serial:.2f}x" if serial else "-"
            vs_p = f"{med[m] / parallel:.2f}x" if parallel else "-"
            print(f"| {m} | {n} | {med[m]:.1f} | {vs_s} | {vs_p} |")
    ray.shutdown()


if __name__ == "__main__":
    main()
