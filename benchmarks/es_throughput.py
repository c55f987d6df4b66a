"""ES_EXT sampling throughput vs the raw env+policy rate, measured side by side in one run.

For each env:

1. ``raw``: one process, a plain loop: gymnasium env + the same MLP policy in torch (and the
   observation filter), one perturbation at a time — the reference of issue 22's goal
   (sampled steps/s per runner core ≥ 1.0× this loop).
1b. ``raw numpy``: the same loop acting through :class:`NumpyPolicy`, the lean runner's policy
   (the limit of the runner's own episode loop).
2. ``engine``: the black-box engine alone: every runner kept busy with perturbation jobs of a
   fixed θ (no updates) — what the lean runner + async pool deliver.
3. ``ES_EXT``: full synchronous ES training (perturb, wait for N, update, publish).
4. ``rllib``: RLlib's SingleAgentEnvRunner (the component we replaced), ``sample()`` on the
   driver with a PPO default module.

Ratios are against ``raw × runners`` (runners ≤ cores). Besides wall-clock rates, the raw numpy loop
and the engine rows carry steps per CPU second (``steps_per_cpu_s``: the raw loop's thread CPU time;
the runner processes' CPU time, Ray's threads in them included, read from ``/proc``) and their ratio
(``cpu_ratio_to_raw_numpy``): the rate per core, which other load on a shared machine leaves alone,
and ``runner_runqueue_wait_share``: the share of the run the runners' main threads were runnable but
waiting for a CPU (``/proc/<pid>/schedstat``; other load on the machine, not the engine).
``--per-call`` sets the engine rows' perturbations per call (``auto``: the engine's own, sized by
work; ``8``: what this benchmark used before calls were sized by work); ``--label`` tags the rows. The measurements are interleaved (each
repeat measures every variant once, in turn) and the medians are reported (the machine is shared
and noisy); every measurement is also written as one JSON line to ``--out`` (default
``benchmarks/results/measurements/es_throughput/<date>.jsonl``): ``{"benchmark", "env", "what", "runners",
"repeat", "steps_per_s", "ratio_to_raw_torch", "utilization", "seconds", "machine", "date"}``.

    python benchmarks/es_throughput.py --envs CartPole-v1 Pendulum-v1 Hopper-v5 --runners 1 --seconds 8 --repeats 3
    python benchmarks/es_throughput.py --envs CartPole-v1 --no-rllib --no-training --per-call auto 8 --label after
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import ray
import torch

import rllib_ext  # noqa: F401 - registers ES_EXT and the envs
from rllib_ext import ESConfig
from rllib_ext.common.blackbox.fast_policy import NumpyPolicy
from rllib_ext.common.blackbox.obs_filter import ObservationFilter
from rllib_ext.common.policies import MLPPolicy
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._proc import process_cpu_s  # noqa: E402

HIDDENS = [64, 64]
#: Steps per CPU second of the last raw loop (its thread's CPU time) and of the last engine run (the
#: runner processes' CPU time, Ray's threads in them included): rates per core that other load on a
#: shared machine does not change the way it changes wall-clock rates.
LAST_RAW_CPU_RATE: float | None = None
LAST_ENGINE_CPU_RATE: float | None = None
#: Share of the last engine run's wall time the runners' main threads were runnable but waiting for a
#: CPU (/proc/<pid>/schedstat): CPU contention on the machine, not the engine, when it is large.
LAST_ENGINE_RUNQUEUE_SHARE: float | None = None


def runqueue_wait_s(pid: int) -> float:
    """Seconds the main thread of process ``pid`` spent runnable but waiting for a CPU (Linux schedstat)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def raw_rate(env_id: str, seconds: float, numpy_policy: bool = False) -> float:
    """Steps/s of a plain env + MLPPolicy (torch, or its NumpyPolicy twin) + filter loop in this process."""
    torch.set_num_threads(1)
    env = gym.make(env_id)
    policy = MLPPolicy(env.observation_space.shape[0], env.action_space, hiddens=HIDDENS)
    if numpy_policy:
        policy = NumpyPolicy(policy)
        policy.begin_episode(np.random.default_rng(0))
    obs_filter = ObservationFilter(env.observation_space.shape)
    obs, _ = env.reset(seed=0)
    steps, t0, c0 = 0, time.perf_counter(), time.thread_time()
    while time.perf_counter() - t0 < seconds:
        obs, r, term, trunc, _ = env.step(policy.act(obs_filter(obs)))
        steps += 1
        if term or trunc:
            obs, _ = env.reset()
            obs_filter.pop_delta()
    global LAST_RAW_CPU_RATE
    LAST_RAW_CPU_RATE = steps / max(time.thread_time() - c0, 1e-9)
    return steps / (time.perf_counter() - t0)


def es_config(env_id: str, runners: int) -> ESConfig:
    return (
        ESConfig()
        .environment(env_id)
        .env_runners(num_env_runners=runners)
        .training(policy_hiddens=HIDDENS, episodes_per_batch=40, eval_episodes=0)
        .debugging(seed=0)
    )


def engine_rate(env_id: str, runners: int, seconds: float, per_call: str = "auto") -> float:
    """Steps/s of the runners kept busy by the pool with jobs of one θ (no updates).

    ``per_call``: perturbations per remote call; ``auto``: the engine's own ``call_size`` for a
    stream of n = 4096 rows (calls sized by work: ≥ ``min_reply_s`` of episodes); an int: fixed
    (this benchmark used 8 before calls were sized by work).
    """
    algo = es_config(env_id, runners).build_algo()
    try:
        seed, n = algo.next_batch_seed(), 4096
        next_index = 0

        def refill():
            nonlocal next_index
            while algo.pool.num_queued < 2 * runners:
                size = algo.call_size(n) if per_call == "auto" else int(per_call)
                algo.submit_perturbations(seed, n, [(next_index + i) % n for i in range(size)])
                next_index += size

        refill()
        pids = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
        algo.collect(timeout_s=1.0)  # warm up
        bound = time.perf_counter() + seconds + 120.0

        def arrivals() -> list:
            """Collects until some results arrive (refilling); TimeoutError past the bound."""
            while True:
                refill()
                ok, _ = algo.collect(timeout_s=0.05)
                if ok:
                    return ok
                if time.perf_counter() > bound:
                    raise TimeoutError(f"es_throughput: no engine results on {env_id} within {seconds + 120:.0f} s")

        # The window runs from one arrival to a later one and counts the steps of the replies
        # after the first: the work done between them. (A fixed window counted the replies that
        # happened to arrive inside it: with calls of ~3 s, as on Pendulum, a whole call's work
        # fell outside an 8 s window, which read as 0.77 of the raw loop.)
        arrivals()
        cpu = lambda: process_cpu_s(pids)  # noqa: E731
        steps, t0, c0 = 0, time.perf_counter(), cpu()
        w0 = sum(runqueue_wait_s(pid) for pid in pids)
        while True:
            steps += sum(r.length for r in arrivals())
            t1, c1 = time.perf_counter(), cpu()
            if t1 - t0 >= seconds:
                break
        global LAST_ENGINE_CPU_RATE, LAST_ENGINE_RUNQUEUE_SHARE
        wall = t1 - t0
        LAST_ENGINE_CPU_RATE = steps / max(c1 - c0, 1e-9)
        LAST_ENGINE_RUNQUEUE_SHARE = (sum(runqueue_wait_s(pid) for pid in pids) - w0) / (wall * len(pids))
        return steps / wall
    finally:
        algo.stop()


def es_rate(env_id: str, runners: int, seconds: float):
    """(steps/s, worker utilization) of ES_EXT training."""
    algo = es_config(env_id, runners).build_algo()
    try:
        algo.train()  # warm up
        start_steps = algo.counters["env_steps"]
        utils, t0 = [], time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            utils.append(algo.train()["blackbox"]["worker_utilization"])
        return (algo.counters["env_steps"] - start_steps) / (time.perf_counter() - t0), float(np.mean(utils))
    finally:
        algo.stop()


def rllib_runner_rate(env_id: str, seconds: float) -> float:
    """Steps/s of RLlib's SingleAgentEnvRunner (PPO default module) sampling on the driver."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    config = PPOConfig().environment(env_id).env_runners(num_env_runners=0, rollout_fragment_length=200)
    config.rl_module(model_config={"fcnet_hiddens": HIDDENS, "fcnet_activation": "tanh"})
    runner = SingleAgentEnvRunner(config=config)
    runner.sample(num_timesteps=200)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        episodes = runner.sample(num_timesteps=200)
        steps += sum(len(e) for e in episodes)
    runner.stop()
    return steps / (time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1", "Hopper-v5"])
    parser.add_argument("--runners", nargs="+", type=int, default=[1])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-rllib", action="store_true", help="skip RLlib's SingleAgentEnvRunner")
    parser.add_argument("--no-training", action="store_true", help="skip the ES_EXT training rows")
    parser.add_argument("--label", default="", help="e.g. before / after (with the commit, in every row)")
    parser.add_argument(
        "--per-call", nargs="+", default=["auto"], help="engine rows: perturbations per call (auto, or ints)"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="JSONL file of rows (default: benchmarks/results/measurements/es_throughput/<date>.jsonl)",
    )
    args = parser.parse_args()
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join("benchmarks", "results", "measurements", "es_throughput", f"{date}.jsonl")
    machine, code = Machine.this(), git_commit()
    ray.init(num_cpus=max(args.runners) + 1, include_dashboard=False, logging_level=logging.WARNING)
    cpu_ratios: dict[tuple[str, str, int], list[float]] = {}
    waits: dict[tuple[str, str, int], list[float]] = {}
    measured: dict[tuple[str, str, int], list[tuple[float, float | None, float]]] = {}

    def record(env_id, what, k, repeat, rate, util, raw, raw_np=None, cpu_rate=None, raw_np_cpu=None, runqueue=None):
        measured.setdefault((env_id, what, k), []).append(
            (rate, util, rate / (raw * k), None if raw_np is None else rate / (raw_np * k))
        )
        row = {
            "benchmark": "es_throughput",
            "label": args.label,
            "code": code,
            "env": env_id,
            "what": what,
            "runners": k,
            "repeat": repeat,
            "steps_per_s": rate,
            "ratio_to_raw_torch": rate / (raw * k),
            "ratio_to_raw_numpy": None if raw_np is None else rate / (raw_np * k),
            "steps_per_cpu_s": cpu_rate,
            "cpu_ratio_to_raw_numpy": None if cpu_rate is None or raw_np_cpu is None else cpu_rate / raw_np_cpu,
            "runner_runqueue_wait_share": runqueue,
            "utilization": util,
            "seconds": args.seconds,
            "machine": {"cores": machine.cores, "description": machine.description},
            "date": date,
        }
        append_measurement(out, row)

    for env_id in args.envs:
        for repeat in range(args.repeats):  # interleaved: each repeat measures every variant once
            raw = raw_rate(env_id, args.seconds)
            record(env_id, "raw torch loop (1 process)", 1, repeat, raw, None, raw)
            raw_np = raw_rate(env_id, args.seconds, True)
            raw_np_cpu = LAST_RAW_CPU_RATE
            record(env_id, "raw numpy loop (1 process)", 1, repeat, raw_np, None, raw, raw_np, raw_np_cpu, raw_np_cpu)
            if not args.no_rllib:
                record(
                    env_id, "RLlib SingleAgentEnvRunner", 1, repeat, rllib_runner_rate(env_id, args.seconds), None, raw
                )
            for k in args.runners:
                for per_call in args.per_call:
                    what = "engine (lean runners + pool)" + ("" if per_call == "auto" else f", {per_call} per call")
                    rate = engine_rate(env_id, k, args.seconds, per_call)
                    record(
                        env_id,
                        what,
                        k,
                        repeat,
                        rate,
                        None,
                        raw,
                        raw_np,
                        LAST_ENGINE_CPU_RATE,
                        raw_np_cpu,
                        LAST_ENGINE_RUNQUEUE_SHARE,
                    )
                    waits.setdefault((env_id, what, k), []).append(LAST_ENGINE_RUNQUEUE_SHARE)
                    cpu_ratios.setdefault((env_id, what, k), []).append(LAST_ENGINE_CPU_RATE / raw_np_cpu)
                if not args.no_training:
                    rate, util = es_rate(env_id, k, args.seconds)
                    record(env_id, "ES_EXT training", k, repeat, rate, util, raw, raw_np)
    print(
        f"\n{'env':<14} {'what':<42} {'runners':>7} {'steps/s':>10} {'/ torch×runners':>16} "
        f"{'/ numpy×runners':>16} {'utilization':>12}"
    )
    for (env_id, what, k), values in measured.items():
        rate = statistics.median(v[0] for v in values)
        ratio = statistics.median(v[2] for v in values)
        np_ratios = [v[3] for v in values if v[3] is not None]
        np_ratio = f"{statistics.median(np_ratios):.2f}" if np_ratios else ""
        utils = [v[1] for v in values if v[1] is not None]
        u = f"{statistics.median(utils):.2f}" if utils else ""
        cpu = cpu_ratios.get((env_id, what, k))
        cpu_ratio = f"  per CPU s: {statistics.median(cpu):.2f} of the raw numpy loop's" if cpu else ""
        if (env_id, what, k) in waits:
            cpu_ratio += f"; runner waiting for a CPU {statistics.median(waits[(env_id, what, k)]):.0%} of the time"
        print(f"{env_id:<14} {what:<42} {k:>7} {rate:>10.0f} {ratio:>16.2f} {np_ratio:>16} {u:>12}{cpu_ratio}")
    print(f"rows: {out}")
    ray.shutdown()


if __name__ == "__main__":
    main()
