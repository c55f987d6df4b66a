"""Scaling of the black-box engine (ES_EXT, DFD_EXT) with the number of env runners, and where
the driver saturates.

Paper 000's point is that the method scales to clusters: runners send (seed, return, length, u),
not vectors, so the driver's cost per result is small and fixed. This benchmark measures that
cost. It runs each algorithm with R runners on a ``ray.cluster_utils.Cluster`` of virtual nodes
(logical CPUs on this one machine) with a sleep-per-step env (``rllib_ext/VariableLength-v0``,
episodes of L ~ U{min_len, max_len} steps, ``step_sleep_s`` per step: a stand-in for an expensive
simulator, so that many runners fit on few cores), trains for ``--seconds`` after warm-up and
reports utilization, updates/s and the driver's own CPU per result.

It uses only the public API (the config classes, ``build_algo()``, ``train()``, the result dict
and RLlib's ``EnvRunnerGroup.foreach_env_runner``), so it measures any version of the engine.

Setup per (algorithm, R):

- Cluster: a head node with 0 CPUs (the driver and its local learner live there; no runner is
  placed on it, so θ goes through the object store to other nodes as on a real cluster) and
  ``ceil(R / cpus_per_node)`` worker nodes of ``--cpus-per-node`` (32) logical CPUs, 150 MiB
  object store each (Cluster's default). One runner takes one logical CPU. Ray's worker
  prestarting is off (otherwise every node would start one idle Python worker per logical CPU).
  The cluster is rebuilt for each R and shared by the algorithms and repeats of that R.
- Algorithm: ``policy_hiddens=[8]`` (the runner's time is the sleep, not the net),
  ``episodes_per_batch = --episodes-per-runner × R`` (default 2R: one batch ≈ two episodes per
  runner, so the work per update per runner stays fixed as R grows),
  ``jobs_in_flight_per_env_runner=2``, ``eval_episodes=0``, ``seed=0``, the algorithms' other
  defaults (ES: antithetic, centered ranks; DFD: gaussian, standardize, U_max 3).
- Measurement: build, one warm-up ``train()`` (``--warmup-iters``), then ``train()`` until
  ``--seconds`` of wall time have passed; figures are differences between the last warm-up
  result and the last measured result, over the measured wall time (RLlib's per-iteration
  bookkeeping included).

Expected ideal: a runner's episode takes about L̄·s (L̄ = (min_len + max_len)/2, s =
``step_sleep_s``), so the ideal rate is R / (L̄·s) results/s. With c the driver's CPU seconds
per result, the driver is saturated (CPU share 1.0) at R_sat ≈ 1 / (c · 1/(L̄·s)). The script
prints R_sat from each measured c, and from a fit c(R) = a + b·R when there are two or more
runner counts (the pool's per-poll work is O(R), so c may grow with R).

ES's ceiling here is its batch barrier, not the engine: each runner gets two of the 2R episodes
of a batch and the update waits for the slowest runner, so its utilization is at most
E[mean/max over runners of a runner's two episode lengths] — for L ~ U{5, 50}: 0.68 at 8 runners,
0.64 at 16, 0.61 at 32, 0.57 at 256.

The runners import the driver's ``rllib_ext`` (the cluster's processes get its package root on
``PYTHONPATH``; checked at build). The cluster keeps its files in a private ``RAY_TMPDIR``, so
that nobody's plain ``ray.init()`` on the machine joins it, and is shut down after each R.

Rows: one JSON line per (algo, runners, repeat) in ``--out`` (default
``benchmarks/results/measurements/blackbox_scale/<UTC date>.jsonl``), fields:

- ``benchmark`` ("blackbox_scale"), ``schema`` (1), ``date`` (ISO 8601 UTC, start of the run),
  ``machine`` (``Machine.this()``: cores, CPU/OS), ``algorithm``, ``runners``, ``repeat``.
- ``settings``: env, env_config, episodes_per_batch, jobs_in_flight_per_env_runner,
  policy_hiddens, seconds, warmup_iters, cpus_per_node, nodes, extra ``--set`` settings.
- ``worker_utilization``: the engine's ``blackbox/worker_utilization`` (runner busy time /
  (runners × wall) per update, windowed mean), averaged over the measured iterations weighted by
  their wall time; ``useful_utilization``: the same for ``blackbox/useful_utilization`` (busy time
  on episodes whose returns entered an update). The engine credits a call's busy time to the
  update during which its result arrives, so with calls longer than an update period (e.g.
  ``--set perturbations_per_call=4``) the figure can exceed 1; ``sleep_utilization`` cannot.
- ``sleep_utilization``: env steps × step_sleep_s / (runners × wall): the part of the runners'
  capacity spent inside env steps, computed from RLlib's lifetime step counter alone (engine
  independent; ≤ the engine's figures by the per-step policy cost and the round trips).
- ``updates``, ``updates_per_s`` (from ``blackbox/update_index`` over the window; the engine's own
  ``blackbox/updates_per_s`` is a lifetime average including warm-up and is kept as
  ``engine_updates_per_s``), ``env_steps_per_s``, ``results``, ``results_per_s`` (episodes
  counted by ``env_runners/num_episodes_lifetime``: the returns that entered updates),
  ``ideal_results_per_s`` (R / (L̄·s)), ``results_vs_ideal``.
- ``driver_cpu_s``: ``time.process_time()`` of the driver process over the window — all its
  threads, i.e. the algorithm and learner *and* Ray's core-worker threads (gRPC, object
  transfers) in that process; ``driver_cpu_per_result_ms``; ``driver_cpu_share`` (driver CPU /
  wall: 1.0 = one core saturated); ``r_sat`` (the saturation runner count from this row's c).
- ``machine_cpu_busy``: busy fraction of all cores over the window (/proc/stat; on a small machine
  the runners and raylets compete with the driver: read it before blaming the driver);
  ``runner_cpu_share``: mean CPU share of one runner process.
- CPU of everyone, over the window, in cores: ``runners_cpu_cores`` (all runner processes),
  ``cluster_other_cpu_cores`` (the cluster's other processes: GCS, raylets, agents),
  ``foreign_cpu_cores`` (the machine's busy cores minus this driver and its cluster: other
  people's work on a shared machine — a run with a large figure here is noisy).
- Memory: ``mem_available_gb_before`` (MemAvailable before the cluster), ``..._cluster`` (nodes
  up), ``..._built`` (runners up); ``node_mb`` (MemAvailable drop per virtual node),
  ``runner_mb`` (MemAvailable drop per runner from building the algorithm; both drops include
  whatever else the machine did meanwhile), ``runner_rss_mb`` / ``runner_pss_mb`` /
  ``runner_uss_mb`` (medians over the runner processes; PSS splits shared pages between their
  users, USS is the private part), ``cluster_other_pss_mb`` (GCS, raylets, agents),
  ``driver_pss_mb``. A runner count is skipped (``skipped`` row) when MemAvailable minus the
  expected need (the largest runner PSS and cluster-process PSS per node measured so far in the
  run; first guesses 0.35 and 0.3 GB) would leave less than ``--min-free-gb``;
  ``feasible_runners`` is the most runners that would fit by that rule when the row started.
- ``iterations``, ``wall_s``, ``build_s`` (build time, runner start-up included), ``skipped`` (a
  reason, e.g. not enough memory; the figures are then absent).

    python benchmarks/blackbox_scale.py --algos DFD_EXT ES_EXT --runners 8 16 32 --seconds 40 --repeats 1
    python benchmarks/blackbox_scale.py --dry-run    # 2 runners, 5 s, DFD_EXT, rows to a temp file
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

import rllib_ext  # noqa: F401 - registers the algorithms and the env
from rllib_ext import DFDConfig, ESConfig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._args import parse_set  # noqa: E402
from benchmarks._proc import (  # noqa: E402
    cpu_times_total,
    descendants,
    mem_available_gb,
    process_cpu_s,
    runner_memory_mb,
    smaps_mb,
)
from rllib_ext.compare.rows import Machine  # noqa: E402

BENCHMARK = "blackbox_scale"
SCHEMA = 1
ENV = "rllib_ext/VariableLength-v0"
CONFIGS = {"ES_EXT": ESConfig, "DFD_EXT": DFDConfig}

# -- machine probes (Linux /proc; this machine's processes only) ------------------------------------
CORES = os.cpu_count() or 1


# -- the cluster --------------------------------------------------------------------------------
def start_cluster(runners: int, cpus_per_node: int) -> tuple[Cluster, int]:
    """Head (0 CPUs: driver and learner) + ceil(runners / cpus_per_node) nodes; connects the driver."""
    nodes = max(1, math.ceil(runners / cpus_per_node))
    # The runners must import the same rllib_ext as this driver (a worktree, not the editable
    # install): the raylets inherit this environment, and this puts the package root first.
    root = str(Path(rllib_ext.__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    # A private Ray temp dir: Cluster writes its address to <temp>/ray/ray_current_cluster, where
    # anyone's plain ray.init() on this machine would otherwise find (and join) this cluster.
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="bbs_", dir="/tmp")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            # Without this every node starts one idle Python worker per logical CPU.
            "_system_config": {"enable_worker_prestart": False, "prestart_worker_first_driver": False},
        },
    )
    for _ in range(nodes):
        cluster.add_node(num_cpus=min(cpus_per_node, runners))
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, logging_level=logging.WARNING)
    return cluster, nodes


def stop_cluster(cluster: Cluster | None) -> None:
    try:
        ray.shutdown()
    finally:
        if cluster is not None:
            cluster.shutdown()
        temp = os.environ.pop("RAY_TMPDIR", None)
        if temp and cluster is not None:
            shutil.rmtree(temp, ignore_errors=True)


# -- one measurement ----------------------------------------------------------------------------
def build(algo: str, runners: int, args, extra: dict):
    config = (
        CONFIGS[algo]()
        .environment(ENV, env_config=env_config(args))
        .env_runners(num_env_runners=runners, num_cpus_per_env_runner=1)
        .training(
            episodes_per_batch=args.episodes_per_runner * runners,
            policy_hiddens=[8],
            jobs_in_flight_per_env_runner=2,
            eval_episodes=0,
            **extra,
        )
        .debugging(seed=0)
    )
    return config.build_algo()


def env_config(args) -> dict:
    return {"min_len": args.min_len, "max_len": args.max_len, "step_sleep_s": args.step_sleep_s}


def get(result: dict, path: str, default: float = float("nan")) -> float:
    """The metric at ``"a/b"`` of a result dict as a float (``default`` when absent)."""
    node = result
    for key in path.split("/"):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return float(node)


def cpu_snapshot(pids: list[int]) -> dict[int, float]:
    return {pid: process_cpu_s([pid]) for pid in pids}


def cpu_since(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds the processes used since ``before`` (a process started since counts in full)."""
    return sum(process_cpu_s([pid]) - before.get(pid, 0.0) for pid in pids)


def measure(algo_name: str, runners: int, args, extra: dict, mem_cluster_gb: float) -> dict:
    """Builds, warms up, trains ``args.seconds``; returns the figures of one row (see the docstring)."""
    t_build = time.perf_counter()
    algo = build(algo_name, runners, args, extra)
    build_s = time.perf_counter() - t_build
    try:
        # Runner processes (RLlib's public group API; nothing is in flight yet).
        info = algo.env_runner_group.foreach_env_runner(
            lambda r: (os.getpid(), __import__("rllib_ext").__file__), local_env_runner=False
        )
        pids = [pid for pid, _ in info]
        paths = {path for _, path in info}
        if paths != {rllib_ext.__file__}:
            raise RuntimeError(f"runners import rllib_ext from {paths}, the driver from {rllib_ext.__file__}")
        mem_built = mem_available_gb()
        memory = runner_memory_mb(pids)
        others = [p for p in descendants(os.getpid()) if p not in set(pids)]
        memory["cluster_other_pss_mb"] = sum(m["pss"] for m in map(smaps_mb, others) if m)
        memory["driver_pss_mb"] = (smaps_mb(os.getpid()) or {}).get("pss")

        result = None
        for _ in range(args.warmup_iters):
            result = algo.train()
        if args.print_result:
            print(json.dumps(result, default=str, indent=1)[:20000])
        u0 = get(result, "blackbox/update_index")
        steps0 = get(result, "env_runners/num_env_steps_sampled_lifetime")
        eps0 = get(result, "env_runners/num_episodes_lifetime")
        busy0 = cpu_times_total()
        tree0 = cpu_snapshot(descendants(os.getpid()))
        cpu0, t0 = time.process_time(), time.perf_counter()
        weighted = {"worker_utilization": 0.0, "useful_utilization": 0.0}
        iterations, t_last = 0, t0
        while time.perf_counter() - t0 < args.seconds:
            result = algo.train()
            now = time.perf_counter()
            for key in weighted:
                weighted[key] += get(result, f"blackbox/{key}") * (now - t_last)
            t_last, iterations = now, iterations + 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        busy1 = cpu_times_total()
        tree = descendants(os.getpid())
        runners_cpu = cpu_since(tree0, pids)
        cluster_other_cpu = cpu_since(tree0, [p for p in tree if p not in set(pids)])
        machine_busy_cores = CORES * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1e-9)

        updates = get(result, "blackbox/update_index") - u0
        steps = get(result, "env_runners/num_env_steps_sampled_lifetime") - steps0
        results = get(result, "env_runners/num_episodes_lifetime") - eps0
        mean_len = (args.min_len + args.max_len) / 2
        ideal = runners / (mean_len * args.step_sleep_s) if args.step_sleep_s else float("nan")
        c = cpu / max(results, 1)
        return {
            "worker_utilization": weighted["worker_utilization"] / wall,
            "useful_utilization": weighted["useful_utilization"] / wall,
            "sleep_utilization": steps * args.step_sleep_s / (runners * wall),
            "updates": int(updates),
            "updates_per_s": updates / wall,
            "engine_updates_per_s": get(result, "blackbox/updates_per_s"),
            "env_steps_per_s": steps / wall,
            "results": int(results),
            "results_per_s": results / wall,
            "ideal_results_per_s": ideal,
            "results_vs_ideal": results / wall / ideal,
            "driver_cpu_s": cpu,
            "driver_cpu_per_result_ms": 1e3 * c,
            "driver_cpu_share": cpu / wall,
            "r_sat": 1.0 / (c * ideal / runners),
            "machine_cpu_busy": machine_busy_cores / CORES,
            "runner_cpu_share": runners_cpu / (len(pids) * wall),
            "runners_cpu_cores": runners_cpu / wall,
            "cluster_other_cpu_cores": cluster_other_cpu / wall,
            "foreign_cpu_cores": machine_busy_cores - (cpu + runners_cpu + cluster_other_cpu) / wall,
            "mem_available_gb_cluster": mem_cluster_gb,
            "mem_available_gb_built": mem_built,
            "runner_mb": 1024 * (mem_cluster_gb - mem_built) / runners,
            **memory,
            "iterations": iterations,
            "wall_s": wall,
            "build_s": build_s,
        }
    finally:
        algo.stop()


# -- reporting ----------------------------------------------------------------------------------
def saturation_fit(rows: list[dict]) -> tuple[float, float, float] | None:
    """Least-squares c(R) = a + b·R over the rows' (runners, c); returns (a, b, R_sat) or None.

    R_sat solves R · (ideal results/s per runner) · c(R) = 1.
    """
    pts = [(r["runners"], r["driver_cpu_per_result_ms"] / 1e3, r["ideal_results_per_s"] / r["runners"]) for r in rows]
    if len({p[0] for p in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    a = my - b * mx
    rate = pts[0][2]
    if b <= 0:
        return a, b, 1.0 / (a * rate) if a > 0 else float("inf")
    # rate·(b R² + a R) = 1
    r_sat = (-a + math.sqrt(a * a + 4 * b / rate)) / (2 * b)
    return a, b, r_sat


def feasible_runners(available_gb: float, min_free_gb: float, runner_gb: float, node_gb: float, per_node: int) -> int:
    """The most runners whose memory (runners and nodes, head included) leaves ``min_free_gb`` free."""
    r = 0
    while available_gb - (r + 1) * runner_gb - (math.ceil((r + 1) / per_node) + 1) * node_gb >= min_free_gb:
        r += 1
    return r


def print_table(rows: list[dict]) -> None:
    done = [r for r in rows if not r.get("skipped")]
    print(
        "\n| algo | runners | utilization | useful | sleep util | updates/s | results/s (ideal) "
        "| driver CPU/result | driver CPU share | runners / foreign CPU (cores) | runner MB (PSS) | R_sat |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in done:
        print(
            f"| {r['algorithm']} | {r['runners']} | {r['worker_utilization']:.3f} | {r['useful_utilization']:.3f} "
            f"| {r['sleep_utilization']:.3f} | {r['updates_per_s']:.2f} "
            f"| {r['results_per_s']:.0f} ({r['ideal_results_per_s']:.0f}) | {r['driver_cpu_per_result_ms']:.2f} ms "
            f"| {r['driver_cpu_share']:.2f} | {r['runners_cpu_cores']:.2f} / {r['foreign_cpu_cores']:.2f} "
            f"| {r['runner_mb']:.0f} ({r['runner_pss_mb']}) | {r['r_sat']:.0f} |"
        )
    for r in rows:
        if r.get("skipped"):
            print(f"skipped: {r['algorithm']} with {r['runners']} runners: {r['skipped']}")
    for algo in sorted({r["algorithm"] for r in done}):
        fit = saturation_fit([r for r in done if r["algorithm"] == algo])
        if fit:
            a, b, r_sat = fit
            print(
                f"{algo}: driver CPU per result c(R) ≈ {1e3 * a:.3f} ms + {1e6 * b:.2f} µs·R "
                f"→ the driver saturates (CPU share 1.0) at R ≈ {r_sat:.0f} runners"
            )


# -- main ---------------------------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    """The command line (``--dry-run`` already applied); ``args.extra`` holds the ``--set`` dict."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["DFD_EXT", "ES_EXT"], choices=list(CONFIGS))
    parser.add_argument("--runners", nargs="+", type=int, default=[8, 32, 128, 256])
    parser.add_argument("--seconds", type=float, default=40.0, help="measured training wall time per run")
    parser.add_argument("--warmup-iters", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--step-sleep-s", type=float, default=0.005)
    parser.add_argument("--min-len", type=int, default=5)
    parser.add_argument("--max-len", type=int, default=50)
    parser.add_argument("--episodes-per-runner", type=int, default=2, help="episodes_per_batch = this × runners")
    parser.add_argument("--cpus-per-node", type=int, default=32, help="logical CPUs per virtual worker node")
    parser.add_argument(
        "--min-free-gb", type=float, default=6.0, help="skip a runner count whose expected memory leaves less free"
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=JSON", help="extra .training() settings")
    parser.add_argument(
        "--out", default=None, help="JSONL file (default benchmarks/results/measurements/blackbox_scale/<date>.jsonl)"
    )
    parser.add_argument("--print-result", action="store_true", help="print the warm-up result dict once")
    parser.add_argument("--dry-run", action="store_true", help="DFD_EXT, 2 runners, 5 s; rows to a temp file")
    args = parser.parse_args(argv)
    args.extra = parse_set(parser, args.set)
    if args.warmup_iters < 1:
        parser.error("--warmup-iters must be >= 1 (the measured window starts at a warm-up result)")
    if args.dry_run:
        args.algos, args.runners, args.seconds, args.repeats = ["DFD_EXT"], [2], 5.0, 1
        args.out = args.out or os.path.join(tempfile.mkdtemp(prefix="blackbox_scale_"), "dry_run.jsonl")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    extra = args.extra
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out = Path(
        args.out or Path(__file__).resolve().parent / "results" / "measurements" / BENCHMARK / f"{date[:10]}.jsonl"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = dataclasses.asdict(Machine.this())

    rows: list[dict] = []
    runner_gbs, node_gbs = [0.35], [0.3]  # first guesses, dropped at the first measurement
    for runners in sorted(args.runners):
        mem_before = mem_available_gb()
        nodes = max(1, math.ceil(runners / args.cpus_per_node))
        per_runner_gb, per_node_gb = max(runner_gbs), max(node_gbs)
        expected = nodes * per_node_gb + runners * per_runner_gb
        base = {
            "benchmark": BENCHMARK,
            "schema": SCHEMA,
            "date": date,
            "machine": machine,
            "runners": runners,
            "settings": {
                "env": ENV,
                "env_config": env_config(args),
                "episodes_per_batch": args.episodes_per_runner * runners,
                "jobs_in_flight_per_env_runner": 2,
                "policy_hiddens": [8],
                "seconds": args.seconds,
                "warmup_iters": args.warmup_iters,
                "cpus_per_node": args.cpus_per_node,
                "nodes": nodes,
                **extra,
            },
            "mem_available_gb_before": mem_before,
            "feasible_runners": feasible_runners(
                mem_before, args.min_free_gb, per_runner_gb, per_node_gb, args.cpus_per_node
            ),
        }
        if mem_before - expected < args.min_free_gb:
            feasible = base["feasible_runners"]
            reason = (
                f"not enough memory: {mem_before:.1f} GB available, {expected:.1f} GB expected "
                f"({nodes} nodes × {per_node_gb:.2f} + {runners} runners × {per_runner_gb:.2f} GB, measured), "
                f"{args.min_free_gb:.1f} GB must stay free; at most {feasible} runners fit"
            )
            print(f"[{BENCHMARK}] skip {runners} runners: {reason}", flush=True)
            rows += [dict(base, algorithm=a, repeat=k, skipped=reason) for k in range(args.repeats) for a in args.algos]
            for row in rows[-len(args.algos) * args.repeats :]:
                with out.open("a") as f:
                    f.write(json.dumps(row, sort_keys=True) + "\n")
            continue
        cluster = None
        try:
            cluster, nodes = start_cluster(runners, args.cpus_per_node)
            mem_cluster = mem_available_gb()
            node_gb = (mem_before - mem_cluster) / nodes
            for repeat in range(args.repeats):
                for algo in args.algos:  # interleaved: machine noise hits both alike
                    print(f"[{BENCHMARK}] {algo} with {runners} runners ({nodes} nodes), repeat {repeat}", flush=True)
                    figures = measure(algo, runners, args, extra, mem_cluster)
                    figures["node_mb"] = 1024 * node_gb
                    # The guard for the next runner counts: the largest figures measured so far.
                    if not any("runner_mb" in r for r in rows):
                        runner_gbs, node_gbs = [], []
                    # PSS, not the MemAvailable drops: those move with whatever else the machine does.
                    runner_gbs.append((figures["runner_pss_mb"] or figures["runner_mb"]) / 1024)
                    node_gbs.append(figures["cluster_other_pss_mb"] / 1024 / (nodes + 1))
                    row = dict(base, algorithm=algo, repeat=repeat, **figures)
                    rows.append(row)
                    with out.open("a") as f:
                        f.write(json.dumps(row, sort_keys=True) + "\n")
                    print(
                        "  " + ", ".join(f"{k}={v:.3g}" for k, v in figures.items() if isinstance(v, float)),
                        flush=True,
                    )
        finally:
            stop_cluster(cluster)
    print_table(rows)
    print(f"\nrows: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
