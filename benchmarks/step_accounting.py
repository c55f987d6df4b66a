"""Where each algorithm's env steps go, with its defaults (issue 39 §1): the one counting rule, audited.

For every ``--algos`` name, the algorithm is built with its defaults on ``--env`` wrapped in
``rllib_ext/StepCounted-v0`` (an env wrapper that counts its own ``step()`` calls across all
processes), with ``--runners`` env runners, and trained for ``--seconds`` seconds of ``train()``
calls. A row: the reported ``num_env_steps_sampled_lifetime``, its breakdown (used, evaluation,
wasted, pending), the steps the envs counted themselves (``simulated``), and ``used_fraction`` =
used / total: what the black-box family's count before issue 39 reported (it counted the used
rows only; AES-RL counted its individuals, ``used + pending``, ``individual_fraction``).

Each measurement is one JSON line in ``--out`` (default
``benchmarks/results/measurements/step_accounting/<date>.jsonl``).

    .venv/bin/python -m benchmarks.step_accounting --env Pendulum-v1 --seconds 30
    .venv/bin/python -m benchmarks.step_accounting --algos ES_EXT DFD_EXT --set eval_episodes=10
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import tempfile
import time

import ray

import rllib_ext  # noqa: F401 - registers the algorithms and envs
from rllib_ext import registry
from rllib_ext.common.steps import BREAKDOWN_KEYS
from rllib_ext.compare.rows import Machine, append_measurement, git_commit
from rllib_ext.envs import StepCounter

DEFAULT_ALGOS = ["ES_EXT", "DFD_EXT", "CVES_EXT", "ARS_EXT", "AESRL_EXT", "CEMRL_EXT", "TD3_EXT", "IMPACT_EXT"]


def measure(name: str, env: str, runners: int, seconds: float, seed: int, settings: dict | None = None) -> dict:
    """One algorithm's step account after ``seconds`` of training with its defaults (and ``settings``)."""
    count_dir = tempfile.mkdtemp(prefix="rllib_ext_steps_")
    config = (
        registry.get_config_class(name)()
        .environment("rllib_ext/StepCounted-v0", env_config={"env": env, "count_dir": count_dir})
        .env_runners(num_env_runners=runners)
        .debugging(seed=seed)
    )
    config.update_from_dict(settings or {})
    algo = config.build_algo()
    try:
        t0, iterations = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            result = algo.train()
            iterations += 1
        wall = time.perf_counter() - t0
    finally:
        algo.stop()
    runners_out = result["env_runners"]
    total = int(runners_out["num_env_steps_sampled_lifetime"])
    parts = {key: int(runners_out.get(key, 0)) for key in BREAKDOWN_KEYS}
    used, pending = parts["env_steps_used_lifetime"], parts["env_steps_pending"]
    return {
        "algorithm": name,
        "env": env,
        "runners": runners,
        "seed": seed,
        "settings": ", ".join(f"{key}={json.dumps(value)}" for key, value in (settings or {}).items()) or "defaults",
        "iterations": iterations,
        "seconds": wall,
        "total": total,
        **{key.removeprefix("env_steps_").removesuffix("_lifetime"): value for key, value in parts.items()},
        "simulated": StepCounter.total(count_dir),
        "used_fraction": used / max(total, 1),
        "individual_fraction": (used + pending) / max(total, 1),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", default=DEFAULT_ALGOS)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=JSON", help="settings for every algorithm")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    date = datetime.date.today().isoformat()
    out = args.out or f"benchmarks/results/measurements/step_accounting/{date}.jsonl"
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    machine, code = Machine.this(), git_commit()
    for name in args.algos:
        settings = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.set)}
        row = measure(name, args.env, args.runners, args.seconds, args.seed, settings)
        row.update(benchmark="step_accounting", code=code, date=date, note="")
        row["machine"] = {"cores": machine.cores, "description": machine.description}
        append_measurement(out, row)
        print(
            f"{name}: total {row['total']}, simulated {row['simulated']}, used {row['used']}, evaluation "
            f"{row['evaluation']}, wasted {row['wasted']}, pending {row['pending']} (used {row['used_fraction']:.2f})"
        )


if __name__ == "__main__":
    main()
