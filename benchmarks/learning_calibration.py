"""Calibration of the short learning tests of ``make test`` (``tests/learning/short_runs.py``).

For each algorithm in ``--algorithms`` and each seed in ``--seeds`` (default 0-4; the tests run
seed 0, so the test's own seed is among them), runs the algorithm's short configuration exactly as
its test does (``short_runs.run``: evaluation of the untrained policy, training to the env-step
budget, deterministic evaluation of the final policy) in a local 2-CPU Ray, and appends one row per
run to ``benchmarks/results/measurements/learning_calibration/<date>.jsonl``: algorithm, env, seed,
the budget and the env steps actually done (``num_env_steps_sampled_lifetime``, every simulated
step), the final evaluation return (mean and per episode), the untrained policy's, the commit.

``--thresholds`` prints each algorithm's threshold from the rows under the results folder by the rule
of ``short_runs.threshold`` (halfway between the best untrained return and the worst calibrated
seed) without running anything. Run it on a quiet machine, one calibration at a time, on a clean
checkout (``git archive HEAD``; ``--code`` records its commit where there is no ``.git``):

    .venv/bin/python -m benchmarks.learning_calibration --algorithms TD3_EXT --seeds 0 1 2 3 4
    .venv/bin/python -m benchmarks.learning_calibration --thresholds
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import time

from rllib_ext.compare.rows import Machine, append_measurement, git_commit
from tests.learning import short_runs

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algorithms", nargs="+", default=list(short_runs.SHORT_RUNS), choices=list(short_runs.SHORT_RUNS))
    p.add_argument("--seeds", nargs="+", type=int, default=list(short_runs.CALIBRATION_SEEDS))
    p.add_argument("--note", default="")
    p.add_argument("--out", default=None)
    p.add_argument("--code", default=None, help="the commit to record (default: git rev-parse HEAD of the checkout)")
    p.add_argument("--thresholds", action="store_true", help="print the thresholds from the committed rows and exit")
    args = p.parse_args(argv)
    if args.thresholds:
        rows = short_runs.calibration_rows()
        for name in args.algorithms:
            mine = [r for r in rows if r["algorithm"] == name]
            if not mine:
                print(f"{name:10s} no rows")
                continue
            print(
                f"{name:10s} threshold {short_runs.threshold(rows, name):8.1f}  seeds {[r['seed'] for r in mine]}  "
                f"final {[round(r['eval_return'], 1) for r in mine]}  "
                f"untrained {[round(r['untrained_eval_return'], 1) for r in mine]}"
            )
        return 0

    import ray

    import rllib_ext  # noqa: F401 - registers the algorithms and envs

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(REPO, short_runs.CALIBRATION_ROWS, f"{date}.jsonl")
    machine, code = Machine.this(), args.code or git_commit(REPO)
    # As the tests: one local Ray with 2 CPUs (tests/conftest.py's ray_session).
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        for name in args.algorithms:
            spec = short_runs.SHORT_RUNS[name]
            for seed in args.seeds:
                t0 = time.perf_counter()
                outcome = short_runs.run(name, seed)
                wall = time.perf_counter() - t0
                append_measurement(
                    out,
                    {
                        "benchmark": "learning_calibration",
                        "algorithm": name,
                        "env": spec.env,
                        "seed": seed,
                        "test_seed": short_runs.TEST_SEED,
                        "budget_env_steps": spec.budget_env_steps,
                        "env_steps": outcome.env_steps,
                        "iterations": outcome.iterations,
                        "eval_episodes": spec.eval_episodes,
                        "eval_return": outcome.mean,
                        "eval_returns": outcome.returns,
                        "untrained_eval_return": outcome.untrained_mean,
                        "untrained_eval_returns": outcome.untrained_returns,
                        "settings": spec.note,
                        "wall_s": wall,
                        "code": code,
                        "note": args.note,
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    },
                )
                print(
                    f"{name:10s} seed {seed}: untrained {outcome.untrained_mean:8.1f} -> {outcome.mean:8.1f} "
                    f"at {outcome.env_steps} env steps ({wall:.0f} s)",
                    flush=True,
                )
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
