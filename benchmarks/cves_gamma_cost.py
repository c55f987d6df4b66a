"""CV-ES's γ adaptation (App. C.1): what it costs per update, and where its objective points (issue 39 §4).

``cost`` (default): with ``adapt_gamma`` every episode's runner computes ĝ^pg for γ and for the
N_φ perturbed γ's (1 + N_φ = 11 backward passes and d-vectors shipped per episode); with γ frozen,
one. CVES_EXT is built twice on the same env, seed and settings (paper 002 §4's defaults, γ =
``--gamma``) that differ only in ``adapt_gamma``; after ``--warmup`` updates, ``--updates`` updates
are timed (one per ``train()``), interleaved over ``--repeats`` with the order alternating. A row:
seconds per update, env steps per second, bytes of ĝ^pg per episode, the γ reached.

``objective``: per ``--seeds`` seed, the adaptive run from the paper's γ = 0.99 (``configs/cves.yaml``)
for ``--warmup`` updates, recording the update at which γ reaches ``gamma_max`` and the sign of
ĝ_φ (Eq. 13) at each update; then θ, η and the PG baseline are held and, over ``--batches``
batches, App. C.1's objective F(γ) = ‖ĝ^cv(γ)‖² is evaluated on the same rollouts for every γ of
``--grid`` (as a ratio to ‖ĝ^es,1‖² of the batch): its mean and standard error, one row per γ.

Each measurement is one JSON line in ``--out`` (default
``benchmarks/results/measurements/<benchmark>/<date>.jsonl``, benchmark ``cves_gamma_cost`` or
``cves_gamma_objective``).

    .venv/bin/python -m benchmarks.cves_gamma_cost cost --env Pendulum-v1 --updates 30 --repeats 5
    .venv/bin/python -m benchmarks.cves_gamma_cost objective --env Pendulum-v1 --seeds 0 1 --warmup 30 --batches 30
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import time

import numpy as np
import ray

import rllib_ext  # noqa: F401
from rllib_ext import CVESConfig
from rllib_ext.algorithms.cves import control_variate as cv
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

MODES = {"adaptive": True, "frozen": False}
GRID = [0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999, 1.0]


def _config(env: str, adapt_gamma: bool, gamma: float, runners: int, seed: int) -> CVESConfig:
    return (
        CVESConfig()
        .environment(env)
        .env_runners(num_env_runners=runners)
        .training(adapt_gamma=adapt_gamma, gamma=gamma)
        .reporting(min_time_s_per_iteration=None)  # one update per train()
        .debugging(seed=seed)
    )


def _env_steps(result: dict) -> int:
    return int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))


def cost(env: str, adapt_gamma: bool, gamma: float, runners: int, warmup: int, updates: int, seed: int) -> dict:
    """Times ``updates`` updates after ``warmup`` of one CVES_EXT; returns the row's figures."""
    algo = _config(env, adapt_gamma, gamma, runners, seed).build_algo()
    try:
        result = {}
        for _ in range(warmup):
            result = algo.train()
        u0, steps0 = algo.update_index, _env_steps(result)
        t0 = time.perf_counter()
        for _ in range(updates):
            result = algo.train()
        seconds = time.perf_counter() - t0
        done = algo.update_index - u0
        steps = _env_steps(result) - steps0
        return {
            "s_per_update": seconds / done,
            "env_steps_per_s": steps / seconds if steps else None,
            "pg_bytes_per_episode": result["blackbox"]["cv_pg_bytes_per_episode"],
            "gamma_final": algo.gamma,
            "updates_timed": done,
            "seconds": seconds,
        }
    finally:
        algo.stop()


def objective(env: str, runners: int, warmup: int, batches: int, seed: int, grid: list[float]) -> list[dict]:
    """The adaptive run's γ path, then E[F(γ)]/‖X‖² over ``grid`` at fixed θ, η (module docstring)."""
    algo = _config(env, True, 0.99, runners, seed).build_algo()
    cfg = algo.config
    try:
        gammas, grads = [], []
        for _ in range(warmup):
            bb = algo.train()["blackbox"]
            gammas.append(algo.gamma)
            grads.append(bb["cv_phi_grad"])
        at_bound = [u + 1 for u, g in enumerate(gammas) if g >= cfg.gamma_max - 1e-12]
        moved = [g for g in grads if g != 0.0]  # update 1 has η = 0: every F(γ_j) equal, ĝ_φ = 0
        eta = algo.eta.copy()
        algo.gammas_to_evaluate = lambda: np.concatenate([[algo.gamma], grid])  # θ, η, φ held from here
        f_rel = []
        for _ in range(batches):
            algo.update_index += 1  # θ unchanged, but a new version: runners adopt the grid's payload
            algo.publish()
            seed_b = algo.next_batch_seed()
            rows, _ = algo.evaluate_batch(seed_b, cfg.episodes_per_batch)
            x, y, _ = cv.cv_terms(
                algo.row_returns(rows),
                np.array([r.return_gamma for r in rows]),
                np.stack([r.g_pg for r in rows]),
                algo.sampler.sample(seed_b, len(rows)),
                cfg.noise_stdev,
                cfg.return_shaping,
                group=2,
            )
            est = cv.cv_estimate(x, y, eta)
            f_rel.append(est.f_gamma / float((est.x**2).sum()))
    finally:
        algo.stop()
    f_rel = np.array(f_rel)
    common = {
        "updates_to_gamma_max": at_bound[0] if at_bound else None,
        "phi_grad_positive_fraction": float(np.mean(np.array(moved) > 0)) if moved else None,
        "eta_mean": float(eta.mean()),
    }
    return [
        {"gamma_eval": g, "f_rel": float(m), "f_rel_se": float(s), **common}
        for g, m, s in zip(grid, f_rel.mean(0), f_rel.std(0, ddof=1) / np.sqrt(len(f_rel)), strict=True)
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="cost", choices=("cost", "objective"))
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--gamma", type=float, default=0.99, help="cost: γ of both runs (the adaptive run's start)")
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=None, help="updates before measuring (cost 3, objective 30)")
    parser.add_argument("--updates", type=int, default=30, help="cost: updates timed")
    parser.add_argument("--repeats", type=int, default=5, help="cost: interleaved repeats")
    parser.add_argument("--seed", type=int, default=0, help="cost: the seed of both runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="objective: seeds")
    parser.add_argument("--batches", type=int, default=30, help="objective: batches at fixed θ, η")
    parser.add_argument("--grid", type=float, nargs="+", default=GRID, help="objective: the γ's evaluated")
    parser.add_argument("--note", default="")
    parser.add_argument("--out", help="JSONL file (default: benchmarks/results/measurements/<benchmark>/<date>.jsonl)")
    args = parser.parse_args(argv)
    benchmark = f"cves_gamma_{args.what}"
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join("benchmarks", "results", "measurements", benchmark, f"{date}.jsonl")
    machine, code = Machine.this(), git_commit()
    stamp = {
        "code": code,
        "note": args.note,
        "machine": {"cores": machine.cores, "description": machine.description},
        "date": date,
    }

    def write(row: dict) -> None:
        append_measurement(out, {**row, **stamp})
        print(json.dumps(row), flush=True)

    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        if args.what == "cost":
            warmup = 3 if args.warmup is None else args.warmup
            for repeat in range(args.repeats):
                for mode in list(MODES) if repeat % 2 == 0 else list(MODES)[::-1]:  # interleaved, alternating
                    figures = cost(args.env, MODES[mode], args.gamma, args.runners, warmup, args.updates, args.seed)
                    write(
                        {
                            "benchmark": benchmark,
                            "env": args.env,
                            "gamma_mode": mode,
                            "gamma": args.gamma,
                            "runners": args.runners,
                            "updates": args.updates,
                            "seed": args.seed,
                            "repeat": repeat,
                            **figures,
                        }
                    )
        else:
            warmup = 30 if args.warmup is None else args.warmup
            for seed in args.seeds:
                for figures in objective(args.env, args.runners, warmup, args.batches, seed, args.grid):
                    write(
                        {
                            "benchmark": benchmark,
                            "env": args.env,
                            "seed": seed,
                            "warmup": warmup,
                            "batches": args.batches,
                            **figures,
                        }
                    )
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
