"""Node loss (issues #9, #41 §6): remove a worker node of a 3-node cluster during a run; the run must finish.

A ``ray.cluster_utils.Cluster`` with a head and two worker nodes, 1 CPU each, on this machine (a
private Ray temp dir, so that no other Ray on this machine joins it or is joined). The algorithm
runs with 2 env runners (one per worker node, placed by a custom resource) and
``restart_failed_env_runners=True``; after ``--before`` iterations one worker node is removed (its
raylet and every actor on it die), and the run goes on for ``--after`` iterations. No runner can be
restarted (the lost node's slot is gone): the run must go on with the one left.

Every wait is bounded: a ``train()`` that takes longer than ``--iter-timeout-s`` is stopped (SIGALRM),
the stacks of every thread are printed, and the row says which iteration hung.

One JSON row per algorithm in ``--out`` (default
``benchmarks/results/measurements/node_loss/<UTC date>.jsonl``): ``finished``, the iterations and env
steps (``env_runners/num_env_steps_sampled_lifetime``) at the removal and at the end, each
iteration's wall time and env steps, the wall time before and after the removal, the runners
healthy at the end, RLlib's restart/drop counters of the env runner group and the black-box
engine's lost-call/requeued-job counters (``blackbox/...``, DFD/ES), the commit and the machine.

RLlib pings the lost runner before every ``training_step`` (``Algorithm.restore_env_runners``); its
actor stays RESTARTING (no node left with its slot), and each ping takes ~2 s to fail, well inside
``env_runner_health_probe_timeout_s`` (30 s). A driver loop that is one ``training_step`` per
fragment (RLlib's APPO, listed here for comparison; IMPACT_EXT before the probe was throttled)
then samples ~300 env steps per 10 s iteration (2026-11-28 rows); ``--health-probe-timeout-s 0.1``
bounds each probe (2-4.6k). rllib_ext's algorithms probe at most every
``rllib_ext.common.fault_tolerance.PROBE_INTERVAL_S`` (row ``probe-throttled``: 5.6-6.7k).

    python -m benchmarks.node_loss --algos DFD_EXT IMPACT_EXT
    python -m benchmarks.node_loss --algos IMPACT_EXT APPO --health-probe-timeout-s 0.1
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

BENCHMARK = "node_loss"
SCHEMA = 1

SETTINGS = {
    "DFD_EXT": ("CartPole-v1", {"episodes_per_batch": 8, "policy_hiddens": [16, 16], "eval_episodes": 0}),
    "ES_EXT": ("CartPole-v1", {"episodes_per_batch": 8, "policy_hiddens": [16, 16]}),
    "IMPACT_EXT": ("CartPole-v1", {}),
    # RLlib's own APPO (IMPACT_EXT's base class), to tell RLlib's behaviour from ours.
    "APPO": ("CartPole-v1", {}),
    "AESRL_EXT": (
        "Pendulum-v1",
        {
            "policy_hiddens": [16, 16],
            "critic_hiddens": [16, 16],
            "initial_steps": 400,
            "rl_actor_steps": 50,
            "fixed_range": 250.0,
            "fitness_baseline": 250.0,
            "mean_eval_episodes": 1,
        },
    ),
}


def env_steps(result) -> int:
    return int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0))


class IterationTimeout(Exception):
    """A ``train()`` ran past ``--iter-timeout-s``."""


def _alarm(signum, frame):
    raise IterationTimeout


def train_bounded(algo, timeout_s: float) -> dict:
    """``algo.train()``, stopped with :class:`IterationTimeout` after ``timeout_s`` (the stacks of every
    thread are printed to stderr first, to show where it waited)."""
    faulthandler.dump_traceback_later(timeout_s, exit=False)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s + 1.0)
    try:
        return algo.train()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        faulthandler.cancel_dump_traceback_later()


def counters(algo, result: dict | None) -> dict:
    """RLlib's env runner group counters and the black-box engine's lost/requeued counters."""
    group = algo.env_runner_group
    out = {
        "healthy_runners": group.num_healthy_remote_workers(),
        "env_runner_restarts": group.num_remote_worker_restarts(),
    }
    if hasattr(group, "num_env_runners_dropped_lifetime"):
        out["env_runners_dropped"] = group.num_env_runners_dropped_lifetime()
    bb = (result or {}).get("blackbox", {})
    for key in ("runner_calls_lost_lifetime", "jobs_requeued_lifetime", "calls_overdue_lifetime"):
        if key in bb:
            out[key] = bb[key]
    return out


def run(
    name: str, before: int, after: int, remove_node, timeout_s: float, probe_timeout_s: float | None = None
) -> dict:
    """Trains ``before`` iterations, calls ``remove_node()``, trains ``after`` more (each bounded).

    ``probe_timeout_s``: ``env_runner_health_probe_timeout_s`` (None: RLlib's default, 30 s).
    """
    import rllib_ext  # noqa: F401 - registers the algorithms (again after init)
    from rllib_ext import registry

    env, overrides = SETTINGS[name]
    if name in registry.ALGORITHMS:
        config = registry.get_config_class(name)().environment(env)
    else:  # an RLlib built-in (APPO)
        config = registry.resolve_algorithm_class(name).get_default_config().environment(env)
    config.env_runners(num_env_runners=2, custom_resources_per_env_runner={"runner_slot": 1})
    config.update_from_dict(dict(overrides))
    config.fault_tolerance(restart_failed_env_runners=True)
    if probe_timeout_s is not None:
        config.fault_tolerance(env_runner_health_probe_timeout_s=probe_timeout_s)
    t_build = time.perf_counter()
    algo = config.build_algo()
    out = {"algorithm": name, "env": env, "settings": overrides, "build_s": time.perf_counter() - t_build}
    out["env_runner_health_probe_timeout_s"] = config.env_runner_health_probe_timeout_s
    out.update(finished=False, iterations=[], before=before, after=after)
    result = None
    phase = "before"
    try:
        t0 = time.perf_counter()
        for k in range(before + after):
            if k == before:
                out.update(
                    iters_before=result["training_iteration"],
                    steps_before=env_steps(result),
                    before_s=time.perf_counter() - t0,
                    counters_before=counters(algo, result),
                )
                t_remove = time.perf_counter()
                remove_node()
                out["remove_node_s"] = time.perf_counter() - t_remove
                phase, t0 = "after", time.perf_counter()
            t_iter = time.perf_counter()
            try:
                result = train_bounded(algo, timeout_s)
            except IterationTimeout:
                out["error"] = f"train() iteration {k + 1} ({phase} the removal) ran past {timeout_s:.0f} s"
                break
            runners = result.get("env_runners", {})
            out["iterations"].append(
                {
                    "iter": k + 1,
                    "phase": phase,
                    "wall_s": time.perf_counter() - t_iter,
                    "env_steps": env_steps(result),
                    "episodes": runners.get("num_episodes_lifetime"),
                    "episode_len_mean": runners.get("episode_len_mean"),
                    "healthy_runners": algo.env_runner_group.num_healthy_remote_workers(),
                    **{  # the black-box engine's (DFD/ES)
                        k: result["blackbox"][k]
                        for k in ("update_index", "worker_utilization", "calls_overdue_lifetime")
                        if k in result.get("blackbox", {})
                    },
                }
            )
            print(f"[{BENCHMARK}] {name} {out['iterations'][-1]}", flush=True)
        else:
            out["finished"] = True
        out.update(
            iters=result["training_iteration"] if result else 0,
            steps_after=env_steps(result) if result else 0,
            after_s=time.perf_counter() - t0 if phase == "after" else None,
            **counters(algo, result),
        )
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        t_stop = time.perf_counter()
        try:
            algo.stop()
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            out["stop_error"] = f"{type(e).__name__}: {e}"[:300]
        out["stop_s"] = time.perf_counter() - t_stop
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["DFD_EXT", "IMPACT_EXT"], choices=list(SETTINGS))
    parser.add_argument("--before", type=int, default=3)
    parser.add_argument("--after", type=int, default=5)
    parser.add_argument("--iter-timeout-s", type=float, default=300.0, help="bound on one train() call")
    parser.add_argument(
        "--health-probe-timeout-s",
        type=float,
        default=None,
        help="env_runner_health_probe_timeout_s (default: RLlib's, 30 s); RLlib pings the lost runner before "
        "every training_step, and each ping to a restarting actor takes ~2 s to fail",
    )
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parent))
    from rllib_ext.compare.rows import Machine, append_measurement, git_commit

    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or str(here / "results" / "measurements" / BENCHMARK / f"{date}.jsonl")
    machine, code = Machine.this(), git_commit(str(here))
    # The nodes' workers import this worktree's rllib_ext (the raylets inherit this environment).
    os.environ["PYTHONPATH"] = os.pathsep.join([str(here.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    rows = []
    for name in args.algos:
        # A private Ray temp dir: Cluster writes its address to <temp>/ray/ray_current_cluster, where
        # anyone's plain ray.init() on this machine would otherwise find (and join) this cluster.
        temp = tempfile.mkdtemp(prefix="nodeloss_", dir="/tmp")
        os.environ["RAY_TMPDIR"] = temp
        t_start = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            workers = [cluster.add_node(num_cpus=1, resources={"runner_slot": 1}) for _ in range(2)]
            cluster.wait_for_nodes(timeout=120)
            ray.init(address=cluster.address, logging_level=logging.WARNING)
            row = run(
                name,
                args.before,
                args.after,
                lambda cluster=cluster, workers=workers: cluster.remove_node(workers[1]),
                args.iter_timeout_s,
                args.health_probe_timeout_s,
            )
        finally:
            ray.shutdown()
            cluster.shutdown()
            os.environ.pop("RAY_TMPDIR", None)
            shutil.rmtree(temp, ignore_errors=True)
        row = {
            "benchmark": BENCHMARK,
            "schema": SCHEMA,
            "label": args.label,
            "code": code,
            **row,
            "nodes": 3,
            "runners": 2,
            "iter_timeout_s": args.iter_timeout_s,
            "wall_s": time.perf_counter() - t_start,
            "machine": {"cores": machine.cores, "description": machine.description},
            "date": date,
        }
        # numpy scalars (the engine's counters) as plain numbers
        row = json.loads(json.dumps(row, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
        append_measurement(out, row)
        rows.append(row)
        print({k: v for k, v in row.items() if k != "iterations"}, flush=True)
    print(
        "\n| algorithm | finished | iterations | env steps before -> after removal | s before / after "
        "| runners healthy at end | counters |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    keys = ("env_runner_restarts", "env_runners_dropped", "runner_calls_lost_lifetime", "jobs_requeued_lifetime")
    for r in rows:
        counts = {k: r[k] for k in keys if k in r}
        after_s = f"{r['after_s']:.0f}" if r.get("after_s") is not None else "-"
        print(
            f"| {r['algorithm']} | {r['finished']} {r.get('error', '')} | {r.get('iters', '-')} | "
            f"{r.get('steps_before', '-')} -> {r.get('steps_after', '-')} | {r.get('before_s', float('nan')):.0f} / "
            f"{after_s} | {r.get('healthy_runners', '-')} | {counts} |"
        )
    print(f"\nrows: {out}")
    return 0 if all(r["finished"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
