"""Where a lean runner's episode time goes: BlackBoxEnvRunner's job path vs the raw numpy loop, by phase.

``benchmarks/es_throughput.py`` compares the engine (Ray runners + pool) with a raw loop
(gymnasium env + :class:`NumpyPolicy` + :class:`ObservationFilter`). This script takes Ray out and
profiles the runner's own job path in this process, at one fixed θ_u (the runner's initial θ, the
shared noise table as ES builds it, ``policy_hiddens=[64, 64]``, seed 0):

- ``raw``: es_throughput's raw numpy loop (acting with θ_u itself), split into the step loop, the
  per-episode ``env.reset`` and ``obs_filter.pop_delta`` (the runner's counterpart: ``reply``).
- ``runner``: :meth:`BlackBoxEnvRunner.run_jobs` on one call of ``--episodes`` perturbation jobs
  of θ_u (noise-table rows, antithetic), the path a remote call runs. Its phases are timed by
  wrapping the runner's own methods on the instance (nothing in the engine is changed or
  re-implemented): ``perturb`` (``_perturb_into_buffer``: θ_u + σ·table slice), ``set_params``
  (θ into the numpy twin), ``begin_episode`` (action-noise stream), ``reset`` (``env.reset``),
  ``step loop`` (the rest of ``_run_episode``: act, filter, finite checks, env.step, bookkeeping),
  ``evaluate`` (``evaluate`` around its episode: seeds, the ``EpisodeResult``), ``dispatch``
  (``run_job`` around perturb/set_params/evaluate) and ``reply`` (``run_jobs`` around its jobs:
  ``pop_delta`` of the call's observations and the ``Reply``).

Times are the thread's CPU time (``time.thread_time``: other load on a shared machine leaves it
roughly alone), the median over ``--repeats`` interleaved repeats. Runner and raw episodes may differ
in length (CartPole: perturbed θ's balance longer), so the overhead of a phase is taken against the
raw loop's cost of an episode of the *runner's* length (raw µs/step × length + raw reset); the
wrappers' own cost is reported as ``instrumentation`` (run_jobs wrapped − unwrapped) and left out of
the total. Besides the table it prints what es_throughput's engine row would read if the runner ran
exactly this fast: that benchmark sizes a call at ``n // 4 = 1024`` jobs for one runner and counts
the steps of the replies that arrive within its window (1 s warm-up, then ``--window`` s).

Rows (one per env, phase and repeat) go to
``benchmarks/results/measurements/blackbox_runner_profile/<UTC date>.jsonl``.

    .venv/bin/python benchmarks/blackbox_runner_profile.py
    .venv/bin/python benchmarks/blackbox_runner_profile.py --envs Pendulum-v1 --episodes 200 --repeats 5
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import rllib_ext  # noqa: F401 - registers the envs
from rllib_ext import ESConfig
from rllib_ext.common.blackbox import BlackBoxEnvRunner, Call, Payload, PerturbationJob
from rllib_ext.common.blackbox.fast_policy import NumpyPolicy
from rllib_ext.common.blackbox.noise_table import NoiseTable, make_noise
from rllib_ext.common.blackbox.obs_filter import ObservationFilter
from rllib_ext.common.policies import MLPPolicy
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

HIDDENS = [64, 64]
PHASES = ("perturb", "set_params", "begin_episode", "reset", "step loop", "evaluate", "dispatch", "reply")


def make_runner(env_id: str) -> BlackBoxEnvRunner:
    """A local runner holding version 0: θ_u = its initial θ, the ES noise table, no filter state."""
    config = ESConfig().environment(env_id).training(policy_hiddens=HIDDENS).debugging(seed=0)
    runner = BlackBoxEnvRunner(config=config, worker_index=1)
    noise = make_noise(config.noise_table_size, config.noise_table_seed, config.noise_table_dtype)
    runner.adopt(0, Payload(theta=runner.module.get_flat(), noise=noise))
    return runner


def make_call(runner: BlackBoxEnvRunner, episodes: int, seed: int) -> Call:
    """One call of ``episodes`` perturbation jobs of batch ``seed`` (noise-table rows, as the driver sends)."""
    table = NoiseTable(runner._noise, runner._theta.size, antithetic=runner._sampler(runner._theta.size).antithetic)
    offsets = table.offsets(seed, range(episodes))
    jobs = tuple(
        PerturbationJob(id=i, version=0, seed=seed, n=episodes, index=i, noise_offset=int(offsets[i]))
        for i in range(episodes)
    )
    return Call(payload_ref=None, jobs=jobs)


def instrument(runner: BlackBoxEnvRunner, acc: dict[str, float]) -> Callable[[], None]:
    """Wraps the runner's phase methods on the instance (CPU seconds summed into ``acc``); returns the undo."""
    targets = [
        (runner, "run_job", "run_job"),
        (runner, "_perturb_into_buffer", "perturb"),
        (runner, "set_params", "set_params"),
        (runner, "evaluate", "evaluate_all"),
        (runner, "_run_episode", "episode_all"),
        (runner.fast_policy, "begin_episode", "begin_episode"),
        (runner.env, "reset", "reset"),
    ]
    clock = time.thread_time

    def timed(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[key] += clock() - t0

        return wrapper

    for obj, name, key in targets:
        setattr(obj, name, timed(getattr(obj, name), key))

    def undo() -> None:
        for obj, name, _ in targets:
            delattr(obj, name)  # the class's method again

    return undo


def runner_profile(runner: BlackBoxEnvRunner, call: Call) -> dict[str, float]:
    """CPU ms per episode of each phase of ``run_jobs(call)``, plus ``total`` (unwrapped) and ``length``."""
    n = len(call.jobs)
    clock = time.thread_time
    t0 = clock()
    reply = runner.run_jobs(call)  # as it runs remotely: no wrappers
    total = clock() - t0
    acc: dict[str, float] = defaultdict(float)
    undo = instrument(runner, acc)
    try:
        t0 = clock()
        runner.run_jobs(call)
        wrapped = clock() - t0
    finally:
        undo()
    ms = {
        "perturb": acc["perturb"],
        "set_params": acc["set_params"],
        "begin_episode": acc["begin_episode"],
        "reset": acc["reset"],
        "step loop": acc["episode_all"] - acc["begin_episode"] - acc["reset"],
        "evaluate": acc["evaluate_all"] - acc["episode_all"],
        "dispatch": acc["run_job"] - acc["perturb"] - acc["set_params"] - acc["evaluate_all"],
        "reply": wrapped - acc["run_job"],
        "instrumentation": wrapped - total,
        "total": total,
    }
    out = {k: v / n * 1e3 for k, v in ms.items()}
    out["length"] = reply.steps / n
    return out


def raw_profile(runner: BlackBoxEnvRunner, env_id: str, episodes: int) -> dict[str, float]:
    """es_throughput's raw numpy loop acting with θ_u: CPU ms per episode of the step loop and the resets."""
    torch.set_num_threads(1)
    env = gym.make(env_id)
    policy = NumpyPolicy(MLPPolicy(env.observation_space.shape[0], env.action_space, hiddens=HIDDENS))
    policy.set_flat(runner._theta)
    policy.begin_episode(np.random.default_rng(0))
    obs_filter = ObservationFilter(env.observation_space.shape)
    clock = time.thread_time
    obs, _ = env.reset(seed=0)
    steps, done_episodes, reset_s, pop_s = 0, 0, 0.0, 0.0
    t_start = clock()
    while done_episodes < episodes:
        obs, r, term, trunc, _ = env.step(policy.act(obs_filter(obs)))
        steps += 1
        if term or trunc:
            t0 = clock()
            obs, _ = env.reset()
            t1 = clock()
            obs_filter.pop_delta()
            reset_s, pop_s = reset_s + t1 - t0, pop_s + clock() - t1
            done_episodes += 1
    total = clock() - t_start
    loop_s = total - reset_s - pop_s
    return {
        "reset": reset_s / episodes * 1e3,
        "pop_delta": pop_s / episodes * 1e3,
        "step loop": loop_s / episodes * 1e3,
        "total": total / episodes * 1e3,
        "length": steps / episodes,
        "us_per_step": loop_s / steps * 1e6,
        "pop_delta_us_per_step": pop_s / steps * 1e6,
    }


def throughput_reading(ms_per_episode: float, length: float, window_s: float, warmup_s: float = 1.0) -> float:
    """Steps/s es_throughput's engine row reads (1 runner, n = 4096: calls of 1024 jobs) for a runner
    taking ``ms_per_episode``: the steps of the calls that end within [warm-up, warm-up + window]."""
    call_s = 1024 * ms_per_episode / 1e3
    ends = np.arange(1, 10_000) * call_s
    counted = int(((ends > warmup_s) & (ends <= warmup_s + window_s)).sum())
    return counted * 1024 * length / window_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1"])
    parser.add_argument("--episodes", type=int, default=300, help="perturbation jobs (one episode each) per call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=float, default=8.0, help="es_throughput's --seconds, for its reading")
    parser.add_argument("--out", default=None, help="JSONL (default: the measurements folder, UTC date)")
    args = parser.parse_args()
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or os.path.join("benchmarks", "results", "measurements", "blackbox_runner_profile", f"{date}.jsonl")
    machine, code = Machine.this(), git_commit()
    for env_id in args.envs:
        runner = make_runner(env_id)
        call = make_call(runner, args.episodes, seed=12345)
        runner.run_jobs(make_call(runner, 20, seed=1))  # warm up
        raws, runs = [], []
        for repeat in range(args.repeats):  # interleaved
            raw, run = raw_profile(runner, env_id, args.episodes), runner_profile(runner, call)
            raws.append(raw)
            runs.append(run)
            for what, prof in (("raw", raw), ("runner", run)):
                append_measurement(
                    out,
                    {
                        "benchmark": "blackbox_runner_profile",
                        "code": code,
                        "env": env_id,
                        "what": what,
                        "repeat": repeat,
                        "episodes": args.episodes,
                        "cpu_ms_per_episode": prof,
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    },
                )
        raw = {k: statistics.median(r[k] for r in raws) for k in raws[0]}
        run = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        length = run["length"]
        # The raw loop's cost of an episode of the runner's length: the reference of the overhead.
        ref_steps = raw["us_per_step"] * length / 1e3
        ref_pop = raw["pop_delta_us_per_step"] * length / 1e3  # the runner pops once per call: its reply
        ref = {"reset": raw["reset"], "step loop": ref_steps, "reply": ref_pop}
        ref_total = ref_steps + raw["reset"] + ref_pop
        over = {p: run[p] - ref.get(p, 0.0) for p in PHASES}
        overhead = run["total"] - ref_total
        phase_sum = sum(over.values())  # the phases' own overheads (their medians need not add to the total's)
        print(f"\n{env_id}: CPU ms per episode, median of {args.repeats} (runner episodes {length:.1f} steps,")
        print(f"  raw loop's with θ_u {raw['length']:.1f}; raw {raw['us_per_step']:.2f} µs/step)")
        print(f"  {'phase':<15}{'runner':>9}{'raw (same length)':>19}{'overhead':>10}{'% of overhead':>15}")
        for p in PHASES:
            share = f"{100 * over[p] / phase_sum:.0f}%" if abs(phase_sum) > 1e-9 else "-"
            print(f"  {p:<15}{run[p]:>9.4f}{ref.get(p, 0.0):>19.4f}{over[p]:>10.4f}{share:>15}")
        print(f"  {'sum of phases':<15}{'':>9}{'':>19}{phase_sum:>10.4f}")
        print(f"  {'total':<15}{run['total']:>9.4f}{ref_total:>19.4f}{overhead:>10.4f}  (unwrapped run_jobs)")
        print(f"  (instrumentation, left out: {run['instrumentation']:.4f} ms/episode)")
        print(f"  runner/raw speed (steps per CPU s): {ref_total / run['total']:.3f}")
        rate_raw = length / ref_total * 1e3
        read = throughput_reading(run["total"], length, args.window)
        print(
            f"  es_throughput would read: engine {read:,.0f} steps/s = {read / rate_raw:.2f} of raw "
            f"({rate_raw:,.0f}) at this speed (calls of 1024 jobs = {1024 * run['total'] / 1e3:.2f} s; "
            f"{args.window:g} s window)"
        )
        runner.stop()


if __name__ == "__main__":
    main()
