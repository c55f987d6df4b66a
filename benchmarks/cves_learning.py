"""CVES on real envs (paper 002 §4): gradient variance at a fixed θ, and learning curves vs the ES baselines.

``--part variance``: at the seeded initial θ (not updated), ``--batches`` batches of the §4 setup
(N = 5 antithetic pairs, σ 0.02, standardized returns) run on the lean runners; η adapts online
(Eq. 9, ``--eta-lr``) exactly as in training. Over the second half of the batches (after η's
warm-up) it reports the across-batch variance Σ_p V[·_p] of ĝ^es,1 and of ĝ^cv, their ratio, and
the mean per-batch estimate the algorithm logs (``cv_var_ratio``).

``--part curves``: learning curves of CV and the baselines of Table 1 (vanilla = antithetic,
ORTHO = orthogonal + pairs, GCMC, QMC + pairs), all CVES_EXT with ``control_variate`` switched,
so the policy, normalization and runners are the same; ``--seeds`` seeds, ``--steps`` env steps
each; prints the final mean return ± std per method.

    python benchmarks/cves_learning.py --part variance --env Pendulum-v1 --batches 60
    python benchmarks/cves_learning.py --part curves --env Pendulum-v1 --steps 300000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import ray

import rllib_ext  # noqa: F401
from rllib_ext import CVESConfig
from rllib_ext.algorithms.cves import cves_learner as cv

METHODS = [  # (label, training overrides): Table 1's columns
    ("CV", {"control_variate": True}),
    ("vanilla", {"control_variate": False, "sampler": "antithetic"}),
    ("ORTHO", {"control_variate": False, "sampler": "orthogonal", "sampler_antithetic": True}),
    ("GCMC", {"control_variate": False, "sampler": "gcmc"}),
    ("QMC", {"control_variate": False, "sampler": "qmc", "sampler_antithetic": True}),
]


def config_for(env: str, seed: int, runners: int, **training) -> CVESConfig:
    return CVESConfig().environment(env).env_runners(num_env_runners=runners).training(**training).debugging(seed=seed)


def variance_at_fixed_theta(env: str, batches: int, runners: int, eta_lr: float) -> None:
    algo = config_for(env, 0, runners, eta_lr=eta_lr, adapt_gamma=False).build_algo()
    cfg = algo.config
    xs, cvs, logged = [], [], []
    t0 = time.perf_counter()
    try:
        for _ in range(batches):
            seed = algo.next_batch_seed()
            rows, _ = algo.evaluate_batch(seed, cfg.episodes_per_batch)
            x, y, _ = cv.cv_terms(
                algo.row_returns(rows),
                np.array([r.return_gamma for r in rows]),
                np.stack([r.g_pg for r in rows]),
                algo.sampler.sample(seed, len(rows)),
                cfg.noise_stdev,
                cfg.return_shaping,
                group=2,
            )
            est = cv.cv_estimate(x, y, algo.eta)
            xs.append(est.x)
            cvs.append(est.g_cv)
            logged.append(est.var_cv / est.var_es)
            algo.eta = cv.update_eta(algo.eta, est.x, est.y[0], eta_lr)  # Eq. 9, θ stays fixed
    finally:
        algo.stop()
    half = batches // 2
    var_es = float(np.var(xs[half:], axis=0, ddof=1).sum())
    var_cv = float(np.var(cvs[half:], axis=0, ddof=1).sum())
    print(
        f"| {env} | {batches} ({half} measured) | {eta_lr:g} | {var_es:,.0f} | {var_cv:,.0f} | {var_cv / var_es:.3f} | "
        f"{np.mean(logged[half:]):.3f} | {np.abs(algo.eta).mean():.3f} | {time.perf_counter() - t0:.0f} s |"
    )


def curves(env: str, steps: int, seeds, runners: int, eta_lr: float, methods=None) -> None:
    for label, overrides in METHODS:
        if methods and label not in methods:
            continue
        finals, bests, walls = [], [], []
        for seed in seeds:
            algo = config_for(env, seed, runners, eta_lr=eta_lr, **overrides).build_algo()
            t0 = time.perf_counter()
            try:
                result, returns = {}, []
                while result.get("num_env_steps_sampled_lifetime", 0) < steps:
                    result = algo.train()
                    returns.append(result["env_runners"]["episode_return_mean"])
                finals.append(float(np.mean(returns[-5:])))
                bests.append(float(np.max(returns)))
                walls.append(time.perf_counter() - t0)
                print(
                    f"  {label} seed {seed}: final {finals[-1]:.1f}, best {bests[-1]:.1f}, "
                    f"first {returns[0]:.1f}, {walls[-1]:.0f} s",
                    flush=True,
                )
            finally:
                algo.stop()
        print(
            f"| {env} | {label} | {steps:,} | {np.mean(finals):.1f} ± {np.std(finals):.1f} | "
            f"{np.median(finals):.1f} | {np.median(bests):.1f} | {np.median(walls):.0f} s | {len(seeds)} |",
            flush=True,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["variance", "curves"], default="variance")
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--eta-lr", type=float, default=1e-4)
    parser.add_argument(
        "--methods", nargs="+", choices=[m for m, _ in METHODS], help="curves: only these (default all)"
    )
    args = parser.parse_args(argv)
    ray.init(num_cpus=args.runners, include_dashboard=False, logging_level=logging.WARNING)
    if args.part == "variance":
        print(
            "| env | batches | α_η | V[ĝ^es,1] across batches | V[ĝ^cv] | ratio | mean per-batch ratio (logged) | mean |η| | time |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        variance_at_fixed_theta(args.env, args.batches, args.runners, args.eta_lr)
    else:
        print(
            "| env | method | env steps | final return (mean ± std over seeds) | median final | median best | wall, median | seeds |"
        )
        print("|---|---|---|---|---|---|---|---|")
        curves(args.env, args.steps, args.seeds, args.runners, args.eta_lr, args.methods)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
