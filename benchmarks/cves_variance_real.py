"""CV-ES on a real env (paper 002 §4): the gradient variance at a fixed θ, with and without the PG baseline.

At the seeded initial θ (never updated), ``--batches`` batches of the §4 setup (N = 5 antithetic
pairs, σ 0.02, standardized returns, γ frozen at ``--gamma``) run on the lean runners; η adapts
online from every pair (Eq. 9, ``--eta-lr``) and the PG baseline follows the previous batch, both
exactly as in training (``CVES.estimate_gradient``). Over the second half of the batches (after
η's warm-up) it measures the across-batch variance Σ_p V[·_p] of ĝ^es,1 (vanilla ES on the same
rollouts), of ĝ^cv and of ĝ^re (the PG term alone), the ratio V[ĝ^cv]/V[ĝ^es,1], and the mean of
the per-batch ratio the algorithm logs (``blackbox/cv_var_ratio``). Each ``--pg-baselines`` variant
is measured in turn, ``--repeats`` times (interleaved); every measurement is one JSON line in
``benchmarks/results/measurements/cves_variance/<date>.jsonl`` (``make bench-report`` tabulates
them).

    .venv/bin/python -m benchmarks.cves_variance_real --env Pendulum-v1 --batches 60 --repeats 1

Learning curves (CV vs vanilla / ORTHO / GCMC / QMC) are a race of the harness; the command is in
``docs/algorithms/cves_ext.md``.
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
from rllib_ext.algorithms.cves.one_step_mdp import total_variance
from rllib_ext.compare.rows import Machine, append_measurement


def measure(env: str, batches: int, runners: int, eta_lr: float, gamma: float, pg_baseline: str) -> dict:
    """One fixed-θ measurement (module docstring); returns its row's figures."""
    config = (
        CVESConfig()
        .environment(env)
        .env_runners(num_env_runners=runners)
        .training(eta_lr=eta_lr, adapt_gamma=False, gamma=gamma, pg_baseline=pg_baseline)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    cfg = algo.config
    xs, cvs, res, logged = [], [], [], []
    t0 = time.perf_counter()
    try:
        for _ in range(batches):
            seed = algo.next_batch_seed()
            rows, _ = algo.evaluate_batch(seed, cfg.episodes_per_batch)
            eps = algo.sampler.sample(seed, len(rows))
            g_pg = np.stack([r.g_pg for r in rows])
            x, y, scale = cv.cv_terms(
                algo.row_returns(rows),
                np.array([r.return_gamma for r in rows]),
                g_pg,
                eps,
                cfg.noise_stdev,
                cfg.return_shaping,
                group=2,
            )
            est = cv.cv_estimate(x, y, algo.eta)
            xs.append(est.x)
            cvs.append(est.g_cv)
            res.append(g_pg[:, 0].astype(np.float64).mean(0) / scale)  # ĝ^re,γ on the CV's scale
            logged.append(est.var_cv / est.var_es)
            algo.estimate_gradient(seed, rows)  # η (every pair) and the next PG baseline, as in training
            algo.update_index += 1  # θ unchanged, but a new version: runners adopt a payload per version
            algo.publish()  # ... and so get the new baseline
    finally:
        algo.stop()
    half = batches // 2  # across-batch Σ_p V[·_p] of the measured half (§3.4's variance)
    var_es, var_cv = total_variance(np.array(xs[half:])), total_variance(np.array(cvs[half:]))
    return {
        "var_es": var_es,
        "var_cv": var_cv,
        "var_re": total_variance(np.array(res[half:])),
        "ratio": var_cv / var_es,
        "logged_ratio": float(np.mean(logged[half:])),
        "eta_abs_mean": float(np.abs(algo.eta).mean()),
        "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--eta-lr", type=float, default=1e-4)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--pg-baselines", nargs="+", default=["none", "previous_batch"], choices=cv.PG_BASELINES)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--out", help="JSONL file (default: benchmarks/results/measurements/cves_variance/<date>.jsonl)"
    )
    args = parser.parse_args(argv)
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join("benchmarks", "results", "measurements", "cves_variance", f"{date}.jsonl")
    machine = Machine.this()
    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        for repeat in range(args.repeats):
            for baseline in args.pg_baselines:  # interleaved
                figures = measure(args.env, args.batches, args.runners, args.eta_lr, args.gamma, baseline)
                row = {
                    "benchmark": "cves_variance",
                    "env": args.env,
                    "pg_baseline": baseline,
                    "gamma": args.gamma,
                    "eta_lr": args.eta_lr,
                    "batches": args.batches,
                    "repeat": repeat,
                    **figures,
                    "machine": {"cores": machine.cores, "description": machine.description},
                    "date": date,
                }
                append_measurement(out, row)
                print(json.dumps(row), flush=True)
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
