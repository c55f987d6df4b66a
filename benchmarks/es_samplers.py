"""Gradient-estimate quality of each perturbation sampler (paper 002 §4) at a fixed θ.

At one fixed policy θ (seeded init, observation filter off), a reference gradient is estimated
with many antithetic pairs; then, for each sampler and batch size N, ``--repeats`` independent
estimates ĝ (raw returns, no shaping, so estimators are comparable) give:

- ``variance``: E‖ĝ − mean(ĝ)‖² over the repeats, and its ratio to the gaussian sampler's;
- ``cosine``: mean cosine between ĝ and the reference gradient.

Episodes run on the black-box engine's lean runners (ES_EXT's pool). ``--crn`` turns on the
engine's ``common_random_numbers``: every perturbation of a batch starts from the same env
seed, so the differences between returns are the perturbations' doing, not the start states'.
The reference is the mean of ``--ref-batches`` estimates of ``2·ref-pairs/ref-batches``
antithetic samples, each batch with its own seed (under ``--crn`` one batch would give the
gradient at one start state only).

    python benchmarks/es_samplers.py --env Pendulum-v1 --ns 6 20 40 --repeats 20 --ref-pairs 500 --crn
"""

from __future__ import annotations

import argparse
import logging

import numpy as np
import ray

import rllib_ext  # noqa: F401
from rllib_ext import ESConfig
from rllib_ext.common.blackbox.es_gradient import es_gradient

# (label, sampler, sampler_antithetic): the plain samplers, then the structured ones in pairs.
SAMPLERS = [
    ("gaussian", "gaussian", None),
    ("orthogonal", "orthogonal", None),
    ("qmc", "qmc", None),
    ("antithetic", "antithetic", None),
    ("orthogonal+pairs", "orthogonal", True),
    ("qmc+pairs", "qmc", True),
    ("gcmc", "gcmc", None),
]


def returns_of(algo, seed: int, n: int) -> np.ndarray:
    """Returns of rows 0..n-1 of batch ``seed`` of the algo's sampler, evaluated on the pool."""
    algo.submit_perturbations(seed, n)
    got = {}
    while len(got) < n:
        ok, failed = algo.collect(timeout_s=0.1)
        got.update({r.index: r.ret for r in ok if r.index is not None and r.job.seed == seed})
        for r in failed:
            algo.submit_perturbations(seed, n, [r.index])
    return np.array([got[i] for i in range(n)])


def build(env: str, sampler: str, sigma: float, runners: int, antithetic=None, crn: bool = False):
    config = (
        ESConfig()
        .environment(env)
        .env_runners(num_env_runners=runners)
        .training(
            sampler=sampler,
            sampler_antithetic=antithetic,
            noise_stdev=sigma,
            observation_filter=False,
            policy_hiddens=[32, 32],
            return_shaping="none",
            episodes_per_batch=2,
            common_random_numbers=crn,
        )
        .debugging(seed=0)  # the same θ for every sampler
    )
    return config.build_algo()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--ns", nargs="+", type=int, default=[5, 20, 40])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--ref-pairs", type=int, default=500)
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--ref-batches", type=int, default=50)
    parser.add_argument("--crn", action="store_true", help="common random numbers (env seed per batch)")
    args = parser.parse_args()
    ray.init(num_cpus=args.runners + 1, include_dashboard=False, logging_level=logging.WARNING)

    ref_algo = build(args.env, "antithetic", args.sigma, args.runners, crn=args.crn)
    theta = ref_algo.theta.copy()
    per_batch = 2 * max(1, args.ref_pairs // args.ref_batches)
    ref_seeds = range(10_000, 10_000 + args.ref_batches)
    g_ref = np.mean(
        [
            es_gradient(returns_of(ref_algo, s, per_batch), ref_algo.sampler.sample(s, per_batch), args.sigma)
            for s in ref_seeds
        ],
        axis=0,
    )
    ref_algo.stop()
    print(
        f"{args.env}: d={theta.size}, crn={args.crn}, reference from {args.ref_batches}×{per_batch} antithetic "
        f"samples, ‖g_ref‖={np.linalg.norm(g_ref):.3g}"
    )

    rows = {}
    for name, sampler, antithetic in SAMPLERS:
        algo = build(args.env, sampler, args.sigma, args.runners, antithetic, crn=args.crn)
        assert np.array_equal(algo.theta, theta), "every sampler must see the same θ"
        for n in args.ns:
            if algo.sampler.antithetic and n % 2:
                continue
            estimates = []
            for rep in range(args.repeats):
                seed = 1 + 1000 * n + rep
                estimates.append(es_gradient(returns_of(algo, seed, n), algo.sampler.sample(seed, n), args.sigma))
            g = np.stack(estimates)
            variance = float(np.mean(np.sum((g - g.mean(0)) ** 2, axis=1)))
            cosine = float(np.mean(g @ g_ref / (np.linalg.norm(g, axis=1) * np.linalg.norm(g_ref) + 1e-12)))
            rows[(name, n)] = (variance, cosine)
            print(f"  {name:<16} N={n:<3} variance {variance:10.4g}  cosine {cosine:6.3f}", flush=True)
        algo.stop()

    print("\n| sampler | " + " | ".join(f"N={n} var / vs gaussian / cos" for n in args.ns) + " |")
    print("| --- | " + " | ".join("---" for _ in args.ns) + " |")
    for name, _, _ in SAMPLERS:
        cells = []
        for n in args.ns:
            if (name, n) not in rows:
                cells.append("—")
                continue
            var, cos = rows[(name, n)]
            base = rows.get(("gaussian", n), (float("nan"), 0))[0]
            cells.append(f"{var:.3g} / {var / base:.2f} / {cos:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    ray.shutdown()


if __name__ == "__main__":
    main()
