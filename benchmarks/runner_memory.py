"""Memory per env runner (issue #41, §4): the black-box engine's runner against the floor of an
RLlib ``EnvRunner`` process, and RLlib's own ``SingleAgentEnvRunner`` for reference.

The black-box runner must stay an RLlib ``EnvRunner`` (RLlib's fault tolerance restarts it), so
the floor is what a Ray actor process costs once it has imported RLlib's env runner and torch.
Goal: a black-box runner within 10% of that floor (ratio ≤ 1.10) by RSS and by PSS.

In one local Ray (``ray.init(num_cpus=...)``, a private temp dir so that no other Ray on this
machine is joined), per repeat and all alive at the same time (PSS splits shared pages between
the processes that map them, so every kind is measured with the same neighbours):

- ``floor``: ``--runners`` plain Ray actors that only import
  ``ray.rllib.env.single_agent_env_runner`` (``SingleAgentEnvRunner``) and torch;
- ``DFD_EXT``, ``ES_EXT``: the algorithm built with ``--runners`` env runners on CartPole-v1
  (defaults, ``eval_episodes=0``) after one ``train()``;
- ``PPO``: RLlib's PPO with ``--runners`` ``SingleAgentEnvRunner``s after one ``train()``
  (``train_batch_size`` 400, one epoch: the runner's size does not depend on them).

Each algorithm runs once per ``--seeds`` entry (default: unseeded and ``debugging(seed=0)``): with a
seed, RLlib's ``EnvRunner.__init__`` seeds torch through ``update_global_seed_if_necessary``, whose
``torch.use_deterministic_algorithms(True)`` imports ``torch._dynamo`` (and with it sympy and mpmath,
~800 modules) in every runner, RLlib's and ours alike.

The runners' pids come from RLlib's public ``EnvRunnerGroup.foreach_env_runner``. Per process:
RSS, PSS and USS from ``/proc/<pid>/smaps_rollup`` (``benchmarks/_proc.py``) and how many
modules it has imported; one row per (kind, repeat) with the medians over its processes, the
ratios to the same repeat's floor, and the top-level packages the kind imports beyond the floor.

One JSON row per (kind, repeat) in ``--out`` (default
``benchmarks/results/measurements/runner_memory/<UTC date>.jsonl``), with the commit and the machine.

    python -m benchmarks.runner_memory --repeats 3
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._proc import runner_memory_mb, smaps_mb  # noqa: E402

BENCHMARK = "runner_memory"
SCHEMA = 1
ENV = "CartPole-v1"
KINDS = ("floor", "DFD_EXT", "ES_EXT", "PPO")


@ray.remote(num_cpus=0)
class Floor:
    """The floor: a Ray actor that has imported RLlib's env runner and torch, and nothing else."""

    def __init__(self) -> None:
        import torch  # noqa: F401
        from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner  # noqa: F401

    def info(self) -> dict:
        return {"pid": os.getpid(), "modules": sorted(sys.modules)}


def build(kind: str, runners: int, seed: int | None):
    """The algorithm of ``kind`` with ``runners`` env runners on CartPole-v1, seeded with ``seed``."""
    import rllib_ext  # noqa: F401 - registers the algorithms

    if kind == "PPO":
        from ray.rllib.algorithms.ppo import PPOConfig

        config = PPOConfig().training(train_batch_size=400, minibatch_size=100, num_epochs=1)
    else:
        from rllib_ext import registry

        config = registry.get_config_class(kind)().training(eval_episodes=0)
    config = config.environment(ENV).env_runners(num_env_runners=runners).debugging(seed=seed)
    return config.build_algo()


def top_level(modules: list[str]) -> set[str]:
    return {m.partition(".")[0] for m in modules}


def measure_repeat(runners: int, kinds: list[tuple[str, int | None]]) -> dict[tuple[str, int | None], dict]:
    """Starts every (kind, seed)'s processes, trains the algorithms once, then measures them all at once."""
    infos: dict[tuple[str, int | None], list[dict]] = {}
    algos, floors = [], []
    try:
        for kind, seed in kinds:
            t0 = time.perf_counter()
            if kind == "floor":
                floors = [Floor.remote() for _ in range(runners)]
                infos[kind, seed] = ray.get([f.info.remote() for f in floors], timeout=300)
            else:
                algo = build(kind, runners, seed)
                algos.append(algo)
                algo.train()
                infos[kind, seed] = algo.env_runner_group.foreach_env_runner(
                    # A lambda (pickled by value): the runner imports nothing for it.
                    lambda r: {"pid": os.getpid(), "modules": sorted(sys.modules)},
                    local_env_runner=False,
                    timeout_seconds=300,
                )
            print(
                f"[{BENCHMARK}] {kind} seed={seed}: {len(infos[kind, seed])} processes ready "
                f"in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        time.sleep(2.0)  # let the last results' buffers settle
        out = {}
        for kind, procs in infos.items():
            pids = [p["pid"] for p in procs]
            out[kind] = {
                "pids": pids,
                "processes_mb": [smaps_mb(pid) for pid in pids],
                **runner_memory_mb(pids),
                "modules": statistics.median(len(p["modules"]) for p in procs),
                "module_names": procs[0]["modules"],
            }
        return out
    finally:
        for algo in algos:
            algo.stop()
        for f in floors:
            ray.kill(f)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runners", type=int, default=2, help="processes per kind")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument(
        "--seeds",
        nargs="+",
        default=["none", "0"],
        help="config.debugging(seed=...) of the algorithms ('none': unseeded); each is its own kind",
    )
    p.add_argument("--label", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    # Here, not at the top: an actor class of this module must not pull rllib_ext into the floor.
    from rllib_ext.compare.rows import Machine, append_measurement, git_commit

    seeds = [None if s.lower() == "none" else int(s) for s in args.seeds]
    kinds = [("floor", None), *[(k, seed) for seed in seeds for k in args.kinds if k != "floor"]]
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or str(Path(__file__).resolve().parent / "results" / "measurements" / BENCHMARK / f"{date}.jsonl")
    machine, code = Machine.this(), git_commit(str(Path(__file__).resolve().parent))

    # The runners import this worktree's rllib_ext (not another checkout's editable install).
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    temp = tempfile.mkdtemp(prefix="rmem_", dir="/tmp")
    ray.init(
        num_cpus=args.runners * len(kinds) + 1,
        include_dashboard=False,
        logging_level=logging.WARNING,
        _temp_dir=temp,
    )
    table = []
    try:
        for repeat in range(args.repeats):
            figures = measure_repeat(args.runners, kinds)
            floor = figures["floor", None]
            floor_modules = top_level(floor.pop("module_names"))
            for kind, seed in kinds:
                f = figures[kind, seed]
                names = f.pop("module_names", None)
                row = {
                    "benchmark": BENCHMARK,
                    "schema": SCHEMA,
                    "label": args.label,
                    "code": code,
                    "kind": kind,
                    "seed": seed,
                    "env": ENV,
                    "runners": args.runners,
                    "repeat": repeat,
                    **f,
                    **{
                        f"ratio_{m}": round(f[f"runner_{m}_mb"] / floor[f"runner_{m}_mb"], 3)
                        for m in ("rss", "pss", "uss")
                    },
                    "packages_beyond_floor": sorted(top_level(names) - floor_modules) if names else [],
                    "machine": {"cores": machine.cores, "description": machine.description},
                    "date": date,
                }
                append_measurement(out, row)
                table.append(row)
                print(
                    f"[{BENCHMARK}] repeat {repeat} {kind:8s} seed={seed} RSS {f['runner_rss_mb']:.0f} PSS {f['runner_pss_mb']:.0f} "
                    f"USS {f['runner_uss_mb']:.0f} MB (ratio RSS {row['ratio_rss']:.3f}, PSS {row['ratio_pss']:.3f}), "
                    f"{f['modules']:.0f} modules, beyond floor: {' '.join(row['packages_beyond_floor'])}",
                    flush=True,
                )
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)

    print("\n| kind | seed | RSS MB | PSS MB | USS MB | RSS / floor | PSS / floor | modules |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, seed in kinds:
        rows = [r for r in table if r["kind"] == kind and r["seed"] == seed]

        def med(key, rows=rows):
            return statistics.median(r[key] for r in rows)

        print(
            f"| {kind} | {seed} | {med('runner_rss_mb'):.0f} | {med('runner_pss_mb'):.0f} | {med('runner_uss_mb'):.0f} | "
            f"{med('ratio_rss'):.3f} | {med('ratio_pss'):.3f} | {med('modules'):.0f} |"
        )
    print(f"\nrows: {out} (medians of {args.repeats} repeats)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
