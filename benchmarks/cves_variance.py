"""Variance of vanilla, orthogonal and control-variate ES on the one-step MDP (paper 002 §3.4, App. A–B).

Measured with the project's estimator code (samplers, ``control_variate.cv_terms``; see
``rllib_ext/algorithms/cves/one_step_mdp.py``) over ``--reps`` independent estimates, against the
closed forms: orthogonal/vanilla = 1 − (N − 1)/((1 + ρ²)d + 1) (Theorem 1, App. B.1–B.2), and
CV/vanilla ≤ Theorem 1's bound, with the per-coordinate optimal η fitted on half of the draws and
the variance measured on the other half; ``cv exact`` is the value derived in ``one_step_mdp``.

    python benchmarks/cves_variance.py --d 16 --n 8 --rho 1.0
    python benchmarks/cves_variance.py --grid          # the table in benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import itertools
import time

from rllib_ext.algorithms.cves import one_step_mdp
from rllib_ext.algorithms.cves.control_variate import optimal_eta

GRID_D = (16, 64)
GRID_N = (4, 16)
GRID_RHO = (0.25, 1.0, 2.0)


def measure(d: int, n: int, rho: float, reps: int, seed: int = 0) -> dict:
    """Measured and theoretical variances and ratios for one (d, N, ρ)."""
    x, y = one_step_mdp.draws(d, n, rho, "gaussian", reps, seed=2 * seed)
    x_ort, _ = one_step_mdp.draws(d, n, rho, "orthogonal", reps, seed=2 * seed + 1)
    half = reps // 2
    eta = optimal_eta(x[:half], y[:half])
    var_es = one_step_mdp.total_variance(x)
    var_es_half = one_step_mdp.total_variance(x[half:])
    th = one_step_mdp.theory(d, n, rho)
    return {
        "var_es": var_es,
        "var_es_theory": th["var_vanilla"],
        "ratio_ort": one_step_mdp.total_variance(x_ort) / var_es,
        "ratio_ort_theory": th["ratio_orthogonal"],
        "ratio_cv": one_step_mdp.total_variance(x[half:] + eta * y[half:]) / var_es_half,
        "ratio_cv_bound": th["ratio_cv_bound"],
        "ratio_cv_exact": th["ratio_cv_exact"],
        "rho0": th["rho0"],
    }


HEADER = (
    "| d | N | ρ | V_es meas. | V_es (B.2) | ort/es meas. | ort/es (Thm 1) | ort err | "
    "cv/es meas. | cv/es bound (Thm 1) | cv/es exact | ρ0 (Eq. 12) |\n" + "|---" * 12 + "|"
)


def row(d: int, n: int, rho: float, r: dict) -> str:
    err = r["ratio_ort"] / r["ratio_ort_theory"] - 1.0
    return (
        f"| {d} | {n} | {rho:g} | {r['var_es']:.3f} | {r['var_es_theory']:.3f} | {r['ratio_ort']:.3f} | "
        f"{r['ratio_ort_theory']:.3f} | {err:+.1%} | {r['ratio_cv']:.3f} | {r['ratio_cv_bound']:.3f} | "
        f"{r['ratio_cv_exact']:.3f} | {r['rho0']:.3f} |"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=16, help="dimension d of the action and of μ")
    parser.add_argument(
        "--n", type=int, default=8, help="N, perturbations per estimate (N <= d for one orthogonal block)"
    )
    parser.add_argument("--rho", type=float, default=1.0, help="ρ = σ2/σ1 (policy noise / ES smoothing)")
    parser.add_argument("--reps", type=int, default=4000, help="independent estimates per estimator")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grid", action="store_true", help=f"d in {GRID_D}, N in {GRID_N}, ρ in {GRID_RHO}")
    args = parser.parse_args(argv)
    cases = itertools.product(GRID_D, GRID_N, GRID_RHO) if args.grid else [(args.d, args.n, args.rho)]
    print("Variances per unit ‖α‖² (V[g] = Σ_p V[g_p]); ratios to vanilla ES (i.i.d. Gaussian ε).")
    print(HEADER)
    worst_ort, cv_over_bound = 0.0, 0
    t0 = time.perf_counter()
    for d, n, rho in cases:
        r = measure(d, n, rho, args.reps, args.seed)
        worst_ort = max(worst_ort, abs(r["ratio_ort"] / r["ratio_ort_theory"] - 1.0))
        cv_over_bound += r["ratio_cv"] > r["ratio_cv_bound"]
        print(row(d, n, rho, r), flush=True)
    print(
        f"\nreps {args.reps}; largest |orthogonal ratio error| {worst_ort:.1%} (target < 10%); "
        f"CV above Theorem 1's bound in {cv_over_bound} case(s); {time.perf_counter() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
