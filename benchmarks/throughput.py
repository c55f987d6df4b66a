"""Throughput of any registered algorithm by runner and learner count: where it becomes learner-bound.

For each (algorithm, runners R, learners L, repeat): build the algorithm on ``--env`` with R env
runners and L learners (``num_learners``; 0 = the one learner in the driver process, RLlib's
default), one warm-up ``train()`` (``--warmup-iters``), then ``train()`` until ``--seconds`` of wall
time have passed. The row has, over the measured window (differences between the last warm-up
result and the last measured one):

- ``env_steps_sampled_per_s`` (every simulated step: ``env_runners/num_env_steps_sampled_lifetime``)
  and ``env_steps_trained_per_s`` (RLlib's ``learners/__all_modules__/num_env_steps_trained_lifetime``
  where the algorithm logs it);
- ``learner_updates_per_s``: IMPACT_EXT's ``num_learner_updates_lifetime`` (one gradient step per
  update), APPO/IMPALA's module steps trained divided by the train batch (None where neither
  applies); ``dropped_env_steps_fraction``: env steps sampled but never trained (IMPACT_EXT's
  driver and learner drop counters) over the steps sampled — above zero, sampling outpaces the
  learner: **learner-bound**;
- ``sleep_utilization`` (with ``rllib_ext/VariableLength-v0`` and ``step_sleep_s`` > 0): env steps
  × step_sleep_s / (R × wall), the runners' capacity spent inside env steps; below 1 the runners
  wait (for weights, for the driver, or for the learner's back-pressure);
- ``hold_s_per_iter`` (IMPACT_EXT with the learner thread): wall seconds per ``train()`` spent
  holding the learner threads at an agreed draw (``hold_learners``: every learner draws on to the
  largest draw count any started, then pauses), and ``hold_fraction`` of the window — the cost of
  keeping several learners' buffers in step;
- ``runner_alone_steps_per_s`` (with ``--runner-alone-s S`` > 0): one env runner's own rate, its
  ``sample()`` called back to back on it for S seconds before the warm-up (no learner, no driver
  loop): the ceiling per runner, against which ``env_steps_sampled_per_s / runners`` reads;
- ``driver_cpu_s`` (``time.process_time()`` of the driver process: its Python thread, a local
  learner's thread and Ray's threads) beside the wall time, and ``machine_cpu_busy`` (/proc/stat).

APPO is given IMPACT_EXT's settings in its own units with ``--matched`` (paper 004's mapping,
``rllib_ext/compare/matched.py``), so that the two differ only in the algorithm. ``--common`` (JSON)
applies to every entry (network, fragment length, envs per runner).

Rows: one JSON line per run in ``--out`` (default
``benchmarks/results/measurements/throughput/<UTC date>.jsonl``); ``--code`` names the commit run
(a copy without git, e.g. a lent machine, otherwise reports "unknown"). Examples:

    # IMPACT_EXT vs APPO (matched) at 4-32 runners of a fixed-cost env, 1 and 2 learners
    python -m benchmarks.throughput --algos IMPACT_EXT APPO --matched --runners 4 8 16 32 --learners 0 2 \\
        --env rllib_ext/VariableLength-v0 --env-config '{"min_len": 100, "max_len": 100, "step_sleep_s": 0.002}'
    # 15 runners on Hopper-v5, the learner on a GPU
    python -m benchmarks.throughput --algos IMPACT_EXT DFD_EXT --env Hopper-v5 --runners 15 --learners 1 --gpus-per-learner 1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import ray
from ray.tune.registry import get_trainable_cls

import rllib_ext  # noqa: F401 - registers the names
from rllib_ext.compare.matched import matched_settings
from rllib_ext.compare.race import env_steps_of, metric_of
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._proc import cpu_times_total  # noqa: E402

LEARNERLESS = ("DFD_EXT", "ES_EXT", "ARS_EXT", "CVES_EXT")


def build_config(algo: str, args, runners: int, learners: int) -> Any:
    config = get_trainable_cls(algo).get_default_config()
    config.environment(args.env, env_config=args.env_config)
    config.env_runners(num_env_runners=runners)
    if algo not in LEARNERLESS:
        config.learners(num_learners=learners, num_gpus_per_learner=args.gpus_per_learner)
    config.update_from_dict(args.common)
    if args.matched and algo == "APPO":
        impact = get_trainable_cls("IMPACT_EXT").get_default_config().update_from_dict(args.common)
        settings, _ = matched_settings("APPO", "IMPACT_EXT", impact)
        config.update_from_dict(settings)
    config.debugging(seed=args.seed)
    return config


def counters(result: dict[str, Any], config: Any) -> dict[str, float]:
    """The lifetime counters a row differences (0 where the result lacks one)."""
    trained = metric_of(result, "learners/__all_modules__/num_env_steps_trained_lifetime") or 0.0
    updates = metric_of(result, "learners/__all_modules__/num_learner_updates_lifetime")
    if updates is None and trained:
        batch = getattr(config, "train_batch_size_per_learner", None) or 0
        updates = trained / batch if batch else None
    dropped = (metric_of(result, "env_runners/num_env_steps_dropped_by_driver_lifetime") or 0.0) + (
        metric_of(result, "learners/__all_modules__/circular_buffer_env_steps_dropped_lifetime") or 0.0
    )
    return {
        "sampled": float(env_steps_of(result)),
        "trained": trained,
        "updates": -1.0 if updates is None else updates,
        "dropped": dropped,
        "bb_updates": metric_of(result, "blackbox/update_index") or 0.0,
        "bb_util": metric_of(result, "blackbox/worker_utilization") or -1.0,
    }


def runner_alone(instance: Any, config: Any, seconds: float) -> float | None:
    """Env steps per second of the first remote env runner sampling fragments back to back."""
    fragment = config.rollout_fragment_length if isinstance(config.rollout_fragment_length, int) else 50

    def loop(runner: Any) -> float:
        runner.sample(num_timesteps=fragment)
        t, n = time.perf_counter(), 0
        while time.perf_counter() - t < seconds:
            n += sum(len(e) for e in runner.sample(num_timesteps=fragment))
        return n / (time.perf_counter() - t)

    group = getattr(instance, "env_runner_group", None)
    if group is None or not group.num_remote_env_runners():
        return None
    rates = group.foreach_env_runner(loop, remote_worker_ids=[1], local_env_runner=False, timeout_seconds=seconds + 120)
    return float(rates[0]) if rates else None


def measure(algo: str, args, runners: int, learners: int, repeat: int) -> dict[str, Any]:
    config = build_config(algo, args, runners, learners)
    t_build = time.perf_counter()
    instance = config.build_algo()
    build_s = time.perf_counter() - t_build
    alone = runner_alone(instance, config, args.runner_alone_s) if args.runner_alone_s > 0 else None
    held = [0.0, 0]
    if hasattr(instance, "hold_learners") and getattr(config, "learner_thread", False):
        original = instance.hold_learners

        def timed_hold() -> None:
            t = time.perf_counter()
            try:
                original()
            finally:
                held[0] += time.perf_counter() - t
                held[1] += 1

        instance.hold_learners = timed_hold
    try:
        for _ in range(args.warmup_iters):
            result = instance.train()
        before = counters(result, config)
        held[:] = [0.0, 0]
        busy0, total0 = cpu_times_total()
        t0, c0 = time.perf_counter(), time.process_time()
        iterations = 0
        while time.perf_counter() - t0 < args.seconds:
            result = instance.train()
            iterations += 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        busy1, total1 = cpu_times_total()
        after = counters(result, config)
    finally:
        instance.stop()
    diff = {k: after[k] - before[k] for k in after}
    sleep_s = float((args.env_config or {}).get("step_sleep_s", 0.0))
    row: dict[str, Any] = {
        "benchmark": "throughput",
        "schema": 1,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "code": args.code or git_commit(),
        "label": args.label,
        "machine": Machine.this().__dict__,
        "algorithm": algo,
        "env": args.env,
        "env_config": args.env_config,
        "runners": runners,
        "learners": learners,
        "gpus_per_learner": args.gpus_per_learner,
        "matched": bool(args.matched and algo == "APPO"),
        "common": args.common,
        "repeat": repeat,
        "build_s": build_s,
        "seconds": wall,
        "iterations": iterations,
        "env_steps_sampled_per_s": diff["sampled"] / wall,
        "env_steps_trained_per_s": diff["trained"] / wall if diff["trained"] else None,
        "learner_updates_per_s": diff["updates"] / wall if after["updates"] >= 0 else None,
        "dropped_env_steps_fraction": diff["dropped"] / diff["sampled"] if diff["sampled"] else None,
        "sleep_utilization": diff["sampled"] * sleep_s / (runners * wall) if sleep_s and runners else None,
        "hold_s_per_iter": held[0] / held[1] if held[1] else None,
        "hold_fraction": held[0] / wall if held[1] else None,
        "blackbox_updates_per_s": diff["bb_updates"] / wall if diff["bb_updates"] else None,
        "blackbox_worker_utilization": after["bb_util"] if after["bb_util"] >= 0 else None,
        "runner_alone_steps_per_s": alone,
        "return_mean": metric_of(result, "env_runners/episode_return_mean"),
        "driver_cpu_s": cpu,
        "driver_cpu_share": cpu / wall,
        "machine_cpu_busy": (busy1 - busy0) / (total1 - total0) if total1 > total0 else None,
    }
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", required=True, help="registered names")
    parser.add_argument("--env", required=True)
    parser.add_argument("--env-config", type=json.loads, default={}, help="JSON")
    parser.add_argument("--runners", nargs="+", type=int, default=[4])
    parser.add_argument("--learners", nargs="+", type=int, default=[0], help="num_learners (0: in the driver)")
    parser.add_argument("--gpus-per-learner", type=float, default=0)
    parser.add_argument("--common", type=json.loads, default={}, help="JSON settings for every entry")
    parser.add_argument("--matched", action="store_true", help="APPO gets IMPACT_EXT's settings (paper 004)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup-iters", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runner-alone-s", type=float, default=0.0, help="first measure one runner alone (s)")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--label", default="")
    parser.add_argument("--code", default="", help="the commit run (default: git's HEAD here)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or os.path.join(os.path.dirname(__file__), "results", "measurements", "throughput", f"{day}.jsonl")
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        # Interleaved: repeat, then runner count, then learners, then algorithm.
        for repeat in range(args.repeats):
            for runners in args.runners:
                for learners in args.learners:
                    for algo in args.algos:
                        if algo in LEARNERLESS and learners != args.learners[0]:
                            continue
                        row = measure(algo, args, runners, learners, repeat)
                        append_measurement(out, row)
                        print(
                            f"{algo:<11} R={runners:<3} L={learners} sampled {row['env_steps_sampled_per_s']:9.0f}/s "
                            f"trained {row['env_steps_trained_per_s'] or 0:9.0f}/s updates "
                            f"{row['learner_updates_per_s'] or 0:7.1f}/s dropped {row['dropped_env_steps_fraction']} "
                            f"sleep_util {row['sleep_utilization']} hold {row['hold_fraction']} "
                            f"driver_cpu {row['driver_cpu_share']:.2f} machine {row['machine_cpu_busy']}",
                            flush=True,
                        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
