"""ReF-ER benchmark (paper 003, issue 7): each learner with refer vs er (and per/refer1/refer2).

For every (algorithm, replay mode, seed) on one env and the same env-step budget it records:
env steps (and seconds) until ``env_runners/episode_return_mean`` reaches the target (−250 on
Pendulum-v1), the final return, the far-policy fraction n_far/N over the last quarter of the run
(ReF-ER keeps it at D ± 0.05), the mean D_KL(μ‖π) of the sampled steps at the start and at the
end of training next to c_max (D_KL falls as c_max anneals), and the learner's gradient steps
per second at B 256 (timed on the filled memory after the run). The anchor is RLlib's SAC on
this machine: −249 on Pendulum at ~7.5k env steps (272 s); the script prints the ratios.

    .venv/bin/python benchmarks/refer.py                          # the full grid (hours)
    .venv/bin/python benchmarks/refer.py --algos VRACER_EXT --modes refer,er --seeds 1 --budget 20000
    .venv/bin/python benchmarks/refer.py --grad-only                # gradient steps/s at B 256
    .venv/bin/python benchmarks/refer.py --algos VRACER_EXT --seeds 2 --first-seed 1   # seeds 1, 2
    .venv/bin/python benchmarks/refer.py --algos VRACER_EXT --modes refer --seeds 1 --set refer_A=1e-4 --curve 5
        # D_KL as c_max anneals faster than App. A's A = 5e-7 allows in a short run

Settings per learner are the tuned example's (tuned_examples/vracer_ext/pendulum-v1.yaml) for
V-RACER; DDPG and NAF use the same γ 0.99 and N_start 2000 with their App. A learning rates ×10.
Run on a quiet machine: one run at a time, 2 CPUs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np
from _args import parse_set

SAC_ANCHOR = {"env": "Pendulum-v1", "steps": 7500, "seconds": 272.0, "return": -249.0}
DEFAULT_MODES = {"VRACER_EXT": "refer,er,per,refer1,refer2", "DDPG_EXT": "refer,er", "NAF_EXT": "refer,er"}
OVERRIDES = {
    "VRACER_EXT": {"lr": 1e-3, "gamma": 0.99, "n_start": 2000},
    "DDPG_EXT": {"actor_lr": 1e-4, "critic_lr": 1e-3, "gamma": 0.99, "n_start": 2000},
    "NAF_EXT": {"lr": 1e-3, "gamma": 0.99, "n_start": 2000},
}


def run_one(
    algo_name: str, env: str, mode: str, seed: int, budget: int, target: float, extra=None, curve_every=0
) -> dict:
    """One run; ``extra`` overrides settings (``--set``), ``curve_every`` > 0 prints a trace row every k iterations."""
    from rllib_ext import registry

    config = registry.get_config_class(algo_name)()
    config.environment(env).debugging(seed=seed).reporting(min_sample_timesteps_per_iteration=1000)
    config.training(replay_mode=mode, **{**OVERRIDES[algo_name], **(extra or {})})
    algo = config.build_algo()
    rows, reached, t0 = [], None, time.time()
    try:
        while True:
            r = algo.train()
            shared = r["learners"].get("__all_modules__", {})
            module = r["learners"].get("default_policy", {})
            row = {
                "steps": int(r["num_env_steps_sampled_lifetime"]),
                "seconds": time.time() - t0,
                "return": float(r["env_runners"].get("episode_return_mean", np.nan)),
                "far": float(shared.get("far_policy_fraction", np.nan)),
                "kl": float(module.get("mean_kl", np.nan)),
                "c_max": float(shared.get("refer_c_max", np.nan)),
                "beta": float(shared.get("refer_beta", np.nan)),
            }
            rows.append(row)
            if curve_every and len(rows) % curve_every == 0:
                print(
                    f"  curve {algo_name} {mode} seed {seed}: steps {row['steps']} c_max {row['c_max']:.3f} "
                    f"KL {row['kl']:.3f} far {row['far']:.3f} beta {row['beta']:.3f} return {row['return']:.0f}",
                    flush=True,
                )
            if reached is None and row["return"] >= target:
                reached = (row["steps"], row["seconds"])
            if row["steps"] >= budget:
                break
        learner = algo.learner_group._learner
        learner.config.train_batch_size_per_learner = 256  # time gradient steps at B 256
        n, t1 = 100, time.time()
        for _ in range(n):
            learner._gradient_step()
        grad_per_s = n / (time.time() - t1)
    finally:
        algo.stop()
    trained = [x for x in rows if np.isfinite(x["kl"])]
    tail = trained[-max(1, len(trained) // 4) :]
    return {
        "algo": algo_name,
        "mode": mode,
        "seed": seed,
        "steps_to_target": reached[0] if reached else None,
        "seconds_to_target": round(reached[1], 1) if reached else None,
        "final_return": rows[-1]["return"],
        "far_last_quarter": float(np.mean([x["far"] for x in tail])) if tail else None,
        "kl_first": trained[0]["kl"] if trained else None,
        "kl_last": trained[-1]["kl"] if trained else None,
        "c_max_last": rows[-1]["c_max"],
        "grad_steps_per_s_B256": round(grad_per_s, 1),
        "seconds": round(rows[-1]["seconds"], 1),
    }


def grad_steps_per_second(algo_name: str, env: str, n: int = 200) -> float:
    """Gradient steps per second at B 256 on a memory filled with 3000 env steps (mode refer)."""
    from rllib_ext import registry

    config = registry.get_config_class(algo_name)()
    config.environment(env).debugging(seed=0).reporting(min_sample_timesteps_per_iteration=3000)
    config.training(**{**OVERRIDES[algo_name], "n_start": 3000, "train_batch_size_per_learner": 256})
    algo = config.build_algo()
    try:
        algo.train()
        learner = algo.learner_group._learner
        for _ in range(10):
            learner._gradient_step()
        t = time.time()
        for _ in range(n):
            learner._gradient_step()
        return n / (time.time() - t)
    finally:
        algo.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--algos", default="VRACER_EXT,DDPG_EXT,NAF_EXT")
    p.add_argument("--modes", default=None, help="comma-separated; default per algorithm (see DEFAULT_MODES)")
    p.add_argument("--seeds", type=int, default=3, help="how many seeds")
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed+seeds-1")
    p.add_argument("--budget", type=int, default=40000, help="env steps per run")
    p.add_argument("--target", type=float, default=-250.0)
    p.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="override a training setting for every run, e.g. --set refer_A=1e-4 (repeatable)",
    )
    p.add_argument(
        "--curve",
        type=int,
        default=0,
        metavar="K",
        help="print step, c_max, D_KL, far fraction, β and return every K iterations",
    )
    p.add_argument("--grad-only", action="store_true", help="only measure gradient steps per second at B 256")
    args = p.parse_args(argv)
    extra = parse_set(p, args.set)

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import ray

    import rllib_ext  # noqa: F401

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    if args.grad_only:
        for algo_name in args.algos.split(","):
            print(
                f"{algo_name}: {grad_steps_per_second(algo_name, args.env):.1f} gradient steps/s at B 256", flush=True
            )
        ray.shutdown()
        return 0
    results = []
    for algo_name in args.algos.split(","):
        for mode in (args.modes or DEFAULT_MODES[algo_name]).split(","):
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                res = run_one(algo_name, args.env, mode, seed, args.budget, args.target, extra, args.curve)
                results.append(res)
                print(json.dumps(res), flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(res) + "\n")
    ray.shutdown()

    print(
        f"\n{'algo':<11} {'mode':<7} {'seeds':>5} {'reached':>7} {'steps to target':>16} {'vs SAC':>7} {'final return':>13} {'far (D 0.1)':>11} {'KL first->last':>15} {'grad/s':>7}"
    )
    for algo_name in args.algos.split(","):
        for mode in (args.modes or DEFAULT_MODES[algo_name]).split(","):
            rs = [r for r in results if r["algo"] == algo_name and r["mode"] == mode]
            hit = [r["steps_to_target"] for r in rs if r["steps_to_target"] is not None]
            steps = f"{np.mean(hit):.0f}" if hit else "-"
            ratio = f"{np.mean(hit) / SAC_ANCHOR['steps']:.2f}x" if hit and args.env == SAC_ANCHOR["env"] else "-"
            far = [r["far_last_quarter"] for r in rs if r["far_last_quarter"] is not None]
            kl = f"{np.mean([r['kl_first'] for r in rs]):.2f}->{np.mean([r['kl_last'] for r in rs]):.2f}"
            print(
                f"{algo_name:<11} {mode:<7} {len(rs):>5} {len(hit):>4}/{len(rs):<2} {steps:>16} {ratio:>7} "
                f"{np.mean([r['final_return'] for r in rs]):>13.1f} {np.mean(far) if far else float('nan'):>11.3f} "
                f"{kl:>15} {np.mean([r['grad_steps_per_s_B256'] for r in rs]):>7.0f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
