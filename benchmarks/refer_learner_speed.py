"""Gradient steps per second of the paper-003 learners (VRACER_EXT, DDPG_EXT, NAF_EXT) at B 256, one core.

Issue 19, "Faster learner": the goal is ≥ 600 gradient steps/s for V-RACER and ≥ 2× the
2026-11-23 figures for DDPG and NAF. Each learner is built in this process without Ray
(``AlgorithmConfig.build_learner``, Pendulum-v1's spaces, the 2×128 network of App. A,
``torch_num_threads`` 1) and its replay memory is filled with a synthetic Pendulum-like data set
(``--steps`` env steps in episodes of ``T`` steps): states (cos θ, sin θ, θ̇) of a noisy pendulum,
Pendulum's reward, and behaviour statistics μ_t = the learner's own policy at s_t (so ρ starts at
1, as a fresh near-policy memory), with actions drawn from μ_t (truncated normal, App. A).
Then ``--warmup`` gradient steps, then ``--steps-timed`` gradient steps timed through the path
training takes: ``ReFERLearner.train_on_episodes`` (no new episodes; the env-step count is advanced so
that it owes ``--per-call`` gradient steps per call, as ``train()`` with 1000 env steps per
iteration and F = 1 does), i.e. reward-scale refresh, annealing, sampling, the update, the
write-back (Eq. 8 for V-RACER), n_far/N, β, and the per-call metrics reduce.

Each (algorithm, T) is measured ``--repeats`` times, interleaved; every measurement is one JSON line
in ``--out`` (default ``benchmarks/results/measurements/refer_learner_speed/<date>.jsonl``):
``{"benchmark", "algorithm", "episode_len", "batch_size", "code", "repeat", "ms_per_step",
"steps_per_s", "cpu_ms_per_step", "cpu_steps_per_s", "compile_update", "steps_timed", "memory_steps", "gamma",
"torch_threads", "note", "machine", "date"}``; ``code`` labels the code measured (``--code``, default the short
git commit). ``ms_per_step`` is wall time, ``cpu_ms_per_step`` the process's CPU time (``time.process_time``,
one torch thread): on a shared machine the CPU seconds are the steadier figure (issue 42: wall repeats of one
build ranged 3.5-6.8 ms). The summary prints the median and the [min, max] spread over the repeats.
``--compile-update on|off`` sets the ReF-ER ``compile_update`` setting (omitted: the default; code before
issue 42 has no such setting).
``--profile`` also prints the cProfile split of one (algorithm, T) by phase.

    python -m benchmarks.refer_learner_speed                          # all three, T = 200 and 1000
    python -m benchmarks.refer_learner_speed --algos VRACER_EXT --lens 1000 --steps-timed 300 --profile
    python -m benchmarks.refer_learner_speed --repeats 3 --compile-update off   # the eager path
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import pstats
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from rllib_ext.compare.rows import Machine, append_measurement, git_commit

#: Settings per learner as benchmarks/refer.py's (γ 0.99; App. A learning rates ×10 for DDPG, NAF).
OVERRIDES = {
    "VRACER_EXT": {"lr": 1e-3, "gamma": 0.99},
    "DDPG_EXT": {"actor_lr": 1e-4, "critic_lr": 1e-3, "gamma": 0.99},
    "NAF_EXT": {"lr": 1e-3, "gamma": 0.99},
}

#: Phases of ``--profile``: label -> functions (file fragment, function name) whose cumulative time counts.
PHASES = {
    "sample (memory.sample)": [("memory.py", "sample")],
    "torch update (forward, loss, backward, optimizer, targets)": [
        ("torch_learner.py", "_update_on_sample"),
        ("learner.py", "update"),  # before issue 19's change: RLlib's Learner.update
    ],
    "write-back (incl. Eq. 8, V(s_T))": [("learner.py", "_write_back")],
    "n_far/N": [("memory.py", "far_fraction")],
    "metrics reduce (per call)": [("metrics_logger.py", "reduce")],
}


def pendulum_episode(T: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """States, rewards of a noisy pendulum for T steps (actions and μ are filled in by the learner's policy)."""
    theta = np.empty(T + 1)
    theta_dot = np.empty(T + 1)
    theta[0], theta_dot[0] = rng.uniform(-np.pi, np.pi), rng.uniform(-1, 1)
    for t in range(T):
        theta_dot[t + 1] = np.clip(theta_dot[t] + 0.05 * (3 * 10 / 2 * np.sin(theta[t]) + rng.normal(0, 3)), -8, 8)
        theta[t + 1] = theta[t] + 0.05 * theta_dot[t + 1]
    obs = np.stack([np.cos(theta), np.sin(theta), theta_dot], 1).astype(np.float32)
    wrapped = (theta[:T] + np.pi) % (2 * np.pi) - np.pi
    return {"obs": obs, "rewards": -(wrapped**2 + 0.1 * theta_dot[:T] ** 2)}


def build_learner(algo: str, T: int, memory_steps: int, batch_size: int, seed: int = 0, compile_update=None):
    """A learner with ``memory_steps`` synthetic env steps (episodes of T steps, truncated) stored and trained from."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rllib_ext import registry
    from rllib_ext.common.refer.distributions import TruncatedDiagGaussian

    env = gym.make("Pendulum-v1")
    spaces = {DEFAULT_MODULE_ID: (env.observation_space, env.action_space)}
    config = registry.get_config_class(algo)()
    config.training(
        **OVERRIDES[algo],
        n_start=1,
        replay_capacity=memory_steps + T,
        train_batch_size_per_learner=batch_size,
        torch_num_threads=1,
        **({} if compile_update is None else {"compile_update": compile_update}),
    ).debugging(seed=seed)
    learner = config.build_learner(spaces=spaces)
    module = learner.module[DEFAULT_MODULE_ID]
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    for _ in range(memory_steps // T):
        ep = pendulum_episode(T, rng)
        with torch.no_grad():
            mu = module.forward_exploration({"obs": torch.as_tensor(ep["obs"][:T])})["action_dist_inputs"]
            actions = TruncatedDiagGaussian.from_logits(mu).sample()
        ep.update(actions=actions.numpy(), mu=mu.numpy(), terminated=False)
        learner.memory.add_episode(**ep, **learner._score_episode(ep))
    learner._set_state_stats(*learner.memory.state_stats())
    learner._state_stats_set = True
    return learner


def run_steps(learner, n: int, per_call: int) -> None:
    """``n`` gradient steps through ``train_on_episodes`` (no new episodes), ``per_call`` steps a call."""
    F = learner.config.steps_per_update
    done = 0
    while done < n:
        k = min(per_call, n - done)
        learner._env_steps = int(np.ceil((learner.num_gradient_steps + k) * F))
        out = learner.train_on_episodes([])
        assert out.num_updates == k, out.num_updates
        done += k


def measure(learner, steps: int, per_call: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) per gradient step over ``steps`` steps."""
    t0, c0 = time.perf_counter(), time.process_time()
    run_steps(learner, steps, per_call)
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def profile_split(learner, steps: int, per_call: int) -> None:
    """Prints the cProfile time per phase (:data:`PHASES`) and the top functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    run_steps(learner, steps, per_call)
    wall = time.perf_counter() - t0
    prof.disable()
    stats = pstats.Stats(prof)
    total = sum(v[3] for v in stats.stats.values() if v[3] > 0) and wall
    print(f"  profile: {steps} steps, {1e3 * wall / steps:.2f} ms/step under cProfile")
    for label, funcs in PHASES.items():
        cum = 0.0
        for (file, _, name), (_, _, _, ct, _) in stats.stats.items():
            if any(file.endswith(f) and name == fn for f, fn in funcs):
                cum = max(cum, ct)  # nested matches count once (the outermost)
        print(f"    {label:<62} {1e3 * cum / steps:6.3f} ms/step  {100 * cum / total:5.1f}%")
    stats.sort_stats("tottime").print_stats(15)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", default="VRACER_EXT,DDPG_EXT,NAF_EXT")
    p.add_argument("--lens", default="200,1000", help="episode lengths T, comma-separated")
    p.add_argument("--steps", type=int, default=20000, help="env steps stored in the memory")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--steps-timed", type=int, default=500)
    p.add_argument("--per-call", type=int, default=200, help="gradient steps per train_on_episodes call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compile-update", choices=("on", "off"), default=None, help="the compile_update setting")
    p.add_argument("--profile", action="store_true", help="also print the cProfile split of each (algorithm, T)")
    p.add_argument("--code", default=None, help="label of the code measured (default: the short git commit)")
    p.add_argument("--note", default="", help="free text stored in the rows (e.g. 'machine loaded')")
    p.add_argument("--out", default=None)
    p.add_argument("--no-rows", action="store_true", help="print only, write no rows")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join("benchmarks", "results", "measurements", "refer_learner_speed", f"{date}.jsonl")
    code = args.code or git_commit()
    machine = Machine.this()
    algos = args.algos.split(",")
    lens = [int(x) for x in args.lens.split(",")]
    compile_update = None if args.compile_update is None else args.compile_update == "on"
    learners = {
        (a, T): build_learner(a, T, args.steps, args.batch_size, compile_update=compile_update)
        for a in algos
        for T in lens
    }
    for learner in learners.values():
        run_steps(learner, args.warmup, args.per_call)
    measured: dict[tuple, list[tuple[float, float]]] = {}
    for repeat in range(args.repeats):  # interleaved
        for (algo, T), learner in learners.items():
            s, cpu = measure(learner, args.steps_timed, args.per_call)
            measured.setdefault((algo, T), []).append((s, cpu))
            row = {
                "benchmark": "refer_learner_speed",
                "algorithm": algo,
                "episode_len": T,
                "batch_size": args.batch_size,
                "code": code,
                "repeat": repeat,
                "ms_per_step": 1e3 * s,
                "steps_per_s": 1.0 / s,
                "cpu_ms_per_step": 1e3 * cpu,
                "cpu_steps_per_s": 1.0 / cpu,
                "compile_update": getattr(learner.config, "compile_update", None),
                "steps_timed": args.steps_timed,
                "memory_steps": len(learner.memory),
                "gamma": learner.config.gamma,
                "torch_threads": torch.get_num_threads(),
                "note": args.note,
                "machine": {"cores": machine.cores, "description": machine.description},
                "date": date,
            }
            if not args.no_rows:
                append_measurement(out, row)
    print(f"\nmedian [min, max] of {args.repeats} repeats, code {code}, compile_update {compile_update}")
    print(f"{'algorithm':<12} {'T':>5} {'CPU ms/step':>24} {'CPU steps/s':>12} {'wall ms/step':>24} {'steps/s':>8}")
    for (algo, T), values in measured.items():
        walls, cpus = [1e3 * v[0] for v in values], [1e3 * v[1] for v in values]
        cpu, wall = statistics.median(cpus), statistics.median(walls)
        cpu_s = f"{cpu:.2f} [{min(cpus):.2f}, {max(cpus):.2f}]"
        wall_s = f"{wall:.2f} [{min(walls):.2f}, {max(walls):.2f}]"
        print(f"{algo:<12} {T:>5} {cpu_s:>24} {1e3 / cpu:>12.0f} {wall_s:>24} {1e3 / wall:>8.0f}")
    if args.profile:
        for (algo, T), learner in learners.items():
            print(f"\n{algo} T = {T}")
            profile_split(learner, args.steps_timed, args.per_call)
    if not args.no_rows:
        print(f"rows: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
