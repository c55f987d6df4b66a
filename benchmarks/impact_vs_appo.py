"""IMPACT_EXT against RLlib's APPO, IMPALA and PPO: time and env steps to a return threshold.

Usage (one Ray job at a time, on a quiet machine)::

    .venv/bin/python benchmarks/impact_vs_appo.py race [--env CartPole-v1] [--target 450]
        [--seeds 0 1 2] [--budget-s 180] [--num-env-runners 2] [--algos IMPACT_EXT APPO ...]
        [--impact-set KEY=JSON ...] [--rival-set KEY=JSON ...]
    .venv/bin/python benchmarks/impact_vs_appo.py buffer-placement
    .venv/bin/python benchmarks/impact_vs_appo.py learner-step [--env CartPole-v1] [--profile 25]

``race`` trains each algorithm with each seed until the smoothed training return
(``env_runners/episode_return_mean``) reaches the target or the budget runs out, and reports
medians of wall-clock seconds (from the first ``train()`` call) and env steps sampled, the ratios
IMPACT_EXT/APPO and IMPACT_EXT/IMPALA, each algorithm's sampled env steps per second, and, measured
in the same run, the raw rate of the env with a policy network in a plain single-process loop
(the physical limit). Every algorithm gets the same env runners (``--num-env-runners``, one env
each), a learner in the driver (``num_learners=0``), and a 2 s reporting interval (the return
is checked after each iteration).

Rivals use RLlib's own tuned settings for the env (rllib/tuned_examples/{appo,impala,ppo}/
{cartpole,pendulum}_*.py, see ``RIVALS_BY_ENV``); IMPACT_EXT uses
tuned_examples/impact_ext/<env>.yaml. Pendulum-v1: ``race --env Pendulum-v1 --target -300``.

``buffer-placement`` measures where IMPACT's circular buffer should live: in the learner (a
plain object) or in a ``ray.remote(num_cpus=0)`` replay actor, for real CartPole train batches.

``learner-step`` splits one IMPACT_EXT learner update into the torch step, RLlib's
``Learner.update`` around it, and the whole ``impact_update`` call (optionally with a profile).

``race`` judges smoothed *training* returns and prints its tables; it writes no results. Races
whose results are kept run through ``benchmarks/harness/race.py`` (evaluation returns, rows of
data, IQM with bootstrap CIs), and ``make bench-report`` turns them into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import statistics
import sys
import time
from typing import Any

from _args import parse_set

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RETURN_KEY = ("env_runners", "episode_return_mean")

# RLlib's tuned settings (new API stack) for the rivals, per env: rllib/tuned_examples/
# {appo,impala,ppo}/{cartpole,pendulum}_*.py. Their env-runner counts and vectorization are not
# taken over: every algorithm in a race gets the same runners with one env each.
RIVALS_BY_ENV: dict[str, dict[str, dict[str, Any]]] = {
    "CartPole-v1": {
        "APPO": {"vf_loss_coeff": 0.05, "entropy_coeff": 0.0, "model_config": {"vf_share_layers": True}},
        "IMPALA": {
            "train_batch_size_per_learner": 500,
            "grad_clip": 40.0,
            "lr": 0.0005,
            "vf_loss_coeff": 0.05,
            "entropy_coeff": 0.0,
            "model_config": {"vf_share_layers": True},
        },
        "PPO": {
            "lr": 0.0003,
            "num_epochs": 6,
            "vf_loss_coeff": 0.01,
            "model_config": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True},
        },
    },
    "Pendulum-v1": {
        "APPO": {
            "train_batch_size_per_learner": 500,
            "circular_buffer_num_batches": 16,
            "circular_buffer_iterations_per_batch": 10,
            "target_network_update_freq": 2,
            "clip_param": 0.4,
            "lr": 0.0003,
            "gamma": 0.95,
            "lambda_": 0.5,
            "entropy_coeff": 0.0,
            "use_kl_loss": True,
            "kl_coeff": 1.0,
            "kl_target": 0.04,
            "model_config": {"fcnet_activation": "relu"},
        },
        "IMPALA": {
            "train_batch_size_per_learner": 256,
            "grad_clip": 40.0,
            "lr": 0.0003,
            "vf_loss_coeff": 0.05,
            "entropy_coeff": [[0, 0.1], [2000000, 0.0]],
            "model_config": {"vf_share_layers": True, "fcnet_hiddens": [512, 512]},
        },
        "PPO": {
            "lr": 0.0003,
            "lambda_": 0.1,
            "vf_clip_param": 10.0,
            "num_epochs": 6,
            "model_config": {"fcnet_activation": "relu"},
        },
    },
}


def rival_settings(algo: str, env: str) -> dict[str, Any]:
    """RLlib's tuned settings of ``algo`` for ``env``; an env without them is an error, not defaults."""
    if env not in RIVALS_BY_ENV:
        raise SystemExit(f"no rival settings for {env!r}; known: {', '.join(RIVALS_BY_ENV)}")
    return dict(RIVALS_BY_ENV[env].get(algo, {}))


def impact_settings(env: str) -> dict[str, Any]:
    """IMPACT_EXT's tuned example for ``env`` (tuned_examples/impact_ext/<env>.yaml)."""
    import yaml

    path = os.path.join(REPO, "tuned_examples", "impact_ext", f"{env.lower()}.yaml")
    (exp,) = yaml.safe_load(open(path)).values()
    return dict(exp.get("config") or {})


def build(algo: str, env: str, seed: int, num_env_runners: int, settings: dict[str, Any]):
    """The algorithm with the benchmark's common resources and its own tuned settings."""
    from rllib_ext import registry

    settings = dict(settings)
    model = settings.pop("model_config", None)
    for key in ("num_env_runners", "num_envs_per_env_runner", "num_learners", "min_time_s_per_iteration"):
        settings.pop(key, None)
    cls = registry.resolve_algorithm_class(algo)
    config = cls.get_default_config().environment(env).debugging(seed=seed)
    config.update_from_dict(settings)
    if model:
        config.rl_module(model_config=model)
    config.env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=1)
    config.learners(num_learners=0)
    config.reporting(min_time_s_per_iteration=2)
    return config.build_algo()


def race_one(algo: str, env: str, seed: int, target: float, budget_s: float, num_env_runners: int, settings) -> dict:
    """One run until the return reaches ``target`` or ``budget_s`` passes."""
    t_build = time.time()
    a = build(algo, env, seed, num_env_runners, settings)
    build_s = time.time() - t_build
    t0 = time.time()
    reached, steps, ret, best = False, 0, float("nan"), float("-inf")
    try:
        while time.time() - t0 < budget_s:
            r = a.train()
            ret = (r.get(RETURN_KEY[0]) or {}).get(RETURN_KEY[1], float("nan"))
            steps = int(r.get("num_env_steps_sampled_lifetime") or 0)
            if ret == ret:
                best = max(best, ret)
            if ret == ret and ret >= target:
                reached = True
                break
    finally:
        wall = time.time() - t0
        a.stop()
    out = dict(
        algo=algo,
        seed=seed,
        reached=reached,
        wall_s=round(wall, 2),
        env_steps=steps,
        best=float(best),
        build_s=round(build_s, 2),
    )
    print(json.dumps(out), flush=True)
    return out


def raw_rate(env: str, hidden=(64, 64), seconds: float = 5.0) -> float:
    """Env steps per second of a plain loop: gymnasium env + a torch MLP policy, one process."""
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(1)
    e = gym.make(env)
    obs, _ = e.reset(seed=0)
    n_in = int(np.prod(e.observation_space.shape))
    n_out = e.action_space.n if hasattr(e.action_space, "n") else 2 * int(np.prod(e.action_space.shape))
    layers, last = [], n_in
    for h in hidden:
        layers += [torch.nn.Linear(last, h), torch.nn.Tanh()]
        last = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(last, n_out))
    n, t0 = 0, time.time()
    with torch.no_grad():
        while time.time() - t0 < seconds:
            logits = net(torch.as_tensor(obs, dtype=torch.float32))
            if hasattr(e.action_space, "n"):
                action = int(torch.distributions.Categorical(logits=logits).sample())
            else:
                action = logits[: n_out // 2].numpy()
            obs, _, term, trunc, _ = e.step(action)
            n += 1
            if term or trunc:
                obs, _ = e.reset()
    return n / (time.time() - t0)


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(runs: list[dict], budget_s: float) -> dict[str, dict]:
    """Per algorithm: runs reaching the target, median wall time/steps (budget if not reached)."""
    table = {}
    for algo in dict.fromkeys(r["algo"] for r in runs):
        rs = [r for r in runs if r["algo"] == algo]
        n_ok = sum(r["reached"] for r in rs)
        # A run that never reached the target counts as the whole budget (a lower bound).
        walls = [r["wall_s"] if r["reached"] else budget_s for r in rs]
        # Env steps to the target: over the runs that reached it (None if none did).
        steps = [r["env_steps"] for r in rs if r["reached"]]
        rate = [r["env_steps"] / r["wall_s"] for r in rs if r["wall_s"] > 0]
        table[algo] = dict(
            reached=f"{n_ok}/{len(rs)}",
            all_reached=n_ok == len(rs),
            median_wall_s=median_or_none(walls),
            median_env_steps=median_or_none(steps),
            median_steps_per_s=median_or_none(rate),
            best=[round(float(r["best"]), 1) for r in rs],
        )
    return table


def cmd_race(args) -> int:
    import ray

    import rllib_ext  # noqa: F401

    settings = {
        algo: impact_settings(args.env) if algo == "IMPACT_EXT" else rival_settings(algo, args.env)
        for algo in args.algos
    }
    for algo in settings:
        settings[algo].update(args.impact_set if algo == "IMPACT_EXT" else args.rival_set)
    logging.getLogger("ray.rllib").setLevel(logging.ERROR)
    ray.init(address="local", num_cpus=args.num_env_runners + 1, include_dashboard=False, logging_level=logging.ERROR)
    raw = raw_rate(args.env)
    print(f"raw env+policy rate ({args.env}, 2x64 tanh MLP, 1 process): {raw:,.0f} steps/s", flush=True)
    runs = []
    for seed in args.seeds:
        for algo in args.algos:
            runs.append(
                race_one(algo, args.env, seed, args.target, args.budget_s, args.num_env_runners, settings[algo])
            )
    raw_end = raw_rate(args.env)
    ray.shutdown()
    table = summarize(runs, args.budget_s)
    md = render(args, table, runs, raw, raw_end)
    print(md)
    return 0


def render(args, table, runs, raw, raw_end) -> str:
    lines = [
        f"### {args.env}: time and env steps to return {args.target:g}",
        "",
        f"Command: `.venv/bin/python benchmarks/impact_vs_appo.py {' '.join(sys.argv[1:])}`  ",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: "
        f"{os.cpu_count()} cores; {args.num_env_runners} env runners (1 env each), learner in the "
        f"driver, seeds {' '.join(map(str, args.seeds))}, budget {args.budget_s:g} s per run.",
        "",
        "| algorithm | reached | median wall s to target | median env steps to target (runs that reached it) | median sampled steps/s | best return per seed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for algo, row in table.items():
        wall = row["median_wall_s"]
        wall_s = f"{wall:.1f}" + ("" if row["all_reached"] else " (≥, budget counted)")
        steps = row["median_env_steps"]
        steps_s = "not reached" if steps is None else f"{steps:,.0f}"
        lines.append(
            f"| {algo} | {row['reached']} | {wall_s} | {steps_s} | {row['median_steps_per_s']:,.0f} | {row['best']} |"
        )
    lines += [
        "",
        f"Raw env + policy (2x64 tanh MLP) in one plain process: {raw:,.0f} steps/s at the start, "
        f"{raw_end:,.0f} at the end of the run.",
        "",
    ]
    imp = table.get("IMPACT_EXT")
    for rival in ("APPO", "IMPALA", "PPO"):
        if imp and rival in table and table[rival]["median_wall_s"]:
            w = imp["median_wall_s"] / table[rival]["median_wall_s"]
            a, b = imp["median_env_steps"], table[rival]["median_env_steps"]
            s = f"{a / b:.2f}x" if a and b else "n/a (not reached by one of them)"
            note = (
                ""
                if (imp["all_reached"] and table[rival]["all_reached"])
                else " (budget-capped runs counted as the budget: a bound)"
            )
            lines.append(f"- IMPACT_EXT / {rival}: median wall time {w:.2f}x{note}; env steps to target {s}")
    lines += ["", "<details><summary>per run</summary>", "", "```"]
    lines += [json.dumps(r) for r in runs]
    lines += ["```", "</details>", ""]
    return "\n".join(lines)


def cmd_buffer_placement(args) -> int:
    """Learner-local CircularBuffer vs the same class in a Ray actor, on real train batches."""
    import ray
    from ray.rllib.core.learner.training_data import TrainingData

    import rllib_ext  # noqa: F401
    from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer
    from rllib_ext.algorithms.impact.impact import IMPACTConfig

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    config = (
        IMPACTConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .rl_module(model_config={"fcnet_hiddens": [64, 64]})
    )
    algo = config.build_algo()
    learner = algo.learner_group._learner
    batches = []
    for _ in range(8):
        td = TrainingData(episodes=algo.env_runner.sample(num_timesteps=500, explore=True))
        batches.append(learner._make_batch_if_necessary(training_data=td))
    N, K, rounds = 4, 2, 200
    local = CircularBuffer(N, K, seed=0)
    t0 = time.perf_counter()
    for i in range(rounds):
        local.put(batches[i % len(batches)])
        for _ in range(K):
            local.draw()
    t_local = (time.perf_counter() - t0) / rounds
    actor = ray.remote(num_cpus=0)(CircularBuffer).remote(N, K, 0)
    refs = [ray.put(b) for b in batches]
    ray.get(actor.put.remote(refs[0]))
    ray.get(actor.draw.remote())
    t0 = time.perf_counter()
    for i in range(rounds):
        # The worker-side put ships a reference (workers would put their own object refs);
        # each draw ships the batch back to the learner.
        actor.put.remote(batches[i % len(batches)])
        for _ in range(K):
            ray.get(actor.draw.remote())
    t_actor = (time.perf_counter() - t0) / rounds
    algo.stop()
    ray.shutdown()
    print(
        f"circular buffer, one put + {K} draws per 500-step CartPole train batch (N={N}, K={K}, {rounds} rounds):\n"
        f"  in the learner:        {t_local * 1e3:8.3f} ms\n"
        f"  in a replay actor:     {t_actor * 1e3:8.3f} ms  ({t_actor / max(t_local, 1e-9):,.0f}x slower)"
    )
    return 0


def cmd_learner_step(args) -> int:
    """Where one IMPACT_EXT learner update spends its time, on real train batches of ``--env``.

    Times, per learner update (median of ``--repeats`` rounds of ``--updates`` updates each):
    the torch step alone (``_update``: forward, loss, backward, grad clip, optimizer step),
    RLlib's ``Learner.update`` around it (iterator, metrics, hooks), and ``impact_update`` as
    the algorithm calls it (a new batch put into C(N, K), its K draws, the metrics reduce and
    the weights for the broadcast), amortised over its updates.
    """
    import cProfile
    import pstats

    import ray
    import torch
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.core.learner.training_data import TrainingData

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    settings = impact_settings(args.env)
    settings.update(args.impact_set)
    # The draws must run inside the call to be timed there: with the learner thread (Figure 1c,
    # the default since issue 21) `impact_update` only hands the batch over and returns. The
    # thread runs the same update (`_update_on`); code from before the thread has no such setting.
    from rllib_ext import IMPACTConfig

    if hasattr(IMPACTConfig(), "learner_thread"):
        settings["learner_thread"] = False
    algo = build("IMPACT_EXT", args.env, 0, 0, settings)
    learner = algo.learner_group._learner
    M = algo.config.train_batch_size_per_learner
    K = algo.config.circular_buffer_iterations_per_batch
    # Four sampled batches: each goes into the object store as the workers would send it (for
    # impact_update), and through the learner connector once here (for the bare update paths).
    sample_s, episode_refs, batches = [], [], []
    for _ in range(4):
        s0 = time.perf_counter()
        episodes = algo.env_runner.sample(num_timesteps=M, explore=True)
        sample_s.append(time.perf_counter() - s0)
        episode_refs.append(ray.put(episodes))  # a copy: the connector below edits episodes
        batch = learner._make_batch_if_necessary(training_data=TrainingData(episodes=episodes))
        learner._attach_target_outputs(batch)
        batches.append(batch)
    t_sample = statistics.median(sample_s) * 1e3
    timesteps = {"num_env_steps_sampled_lifetime": 0}

    def per_update(fn, n):
        rounds = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            done = 0
            while done < n:
                updates = fn(done)
                if updates < 1:
                    raise RuntimeError(
                        f"{fn.__name__} made no learner update: the time would be per call, not per update"
                    )
                done += updates
            rounds.append((time.perf_counter() - t0) / done)
        return statistics.median(rounds) * 1e3

    def inner(i):
        learner._update(batches[i % 4].policy_batches)
        return 1

    def full(i):
        Learner.update(learner, batch=batches[i % 4], timesteps=timesteps, _no_metrics_reduce=True)
        return 1

    def algo_call(i):
        # As training_step calls it: one new package, then every draw left (K per batch).
        out = learner.impact_update(packages=[[episode_refs[(i // K) % 4]]], timesteps=timesteps)
        return out.num_updates

    n = args.updates
    for fn in (inner, full):  # warm up (first calls build lazy state)
        fn(0)
    t_inner = per_update(inner, n)
    t_full = per_update(full, n)
    learner.metrics.reduce()
    algo_call(0)
    t_algo = per_update(algo_call, n)
    if args.out:
        write_learner_step_row(args, algo.config, t_inner, t_full, t_algo, t_sample)
    print(
        f"IMPACT_EXT learner update on {args.env} (train batch {M} env steps, K = {K}, "
        f"median of {args.repeats} rounds of {n} updates, torch threads {torch.get_num_threads()}):\n"
        f"  torch step (_update: forward, loss, backward, clip, optimizer): {t_inner:8.2f} ms\n"
        f"  Learner.update around it (iterator, metrics, hooks):            {t_full:8.2f} ms  ({t_full / t_inner:.2f}x)\n"
        f"  impact_update as training_step calls it (put, K draws, reduce):  {t_algo:8.2f} ms  ({t_algo / t_inner:.2f}x)\n"
        f"  for scale: sampling one batch on the local runner: {t_sample:8.2f} ms ({t_sample / K:.2f} ms per draw)"
    )
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        per_update(algo_call, n)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    algo.stop()
    ray.shutdown()
    return 0


def write_learner_step_row(args, config, t_inner: float, t_full: float, t_algo: float, t_sample: float) -> None:
    """Append one measurement row of ``learner-step`` to ``args.out`` (``make bench-report`` tabulates it).

    ``code`` names the rllib_ext measured: ``--code``, else the commit of the checkout it was
    imported from (an older checkout's package: ``PYTHONPATH=<a folder holding only a link to its
    rllib_ext>``, so that ``benchmarks`` stays this one).
    """
    import torch
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    import rllib_ext

    sys.path.append(REPO)  # after PYTHONPATH: the package measured stays the one imported above
    from rllib_ext.compare.rows import Machine, append_measurement, git_commit

    package = os.path.dirname(os.path.realpath(rllib_ext.__file__))
    row = {
        "benchmark": "impact_learner_step",
        "env": args.env,
        "code": args.code or git_commit(package),
        "package": package,
        "hiddens": "x".join(
            str(h) for h in config.model_config.get("fcnet_hiddens", DefaultModelConfig().fcnet_hiddens)
        ),
        "train_batch": config.train_batch_size_per_learner,
        "K": config.circular_buffer_iterations_per_batch,
        "torch_step_ms": t_inner,
        "learner_update_ms": t_full,
        "impact_update_ms": t_algo,
        "sample_batch_ms": t_sample,
        "updates": args.updates,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "note": args.note,
        "machine": dataclasses.asdict(Machine.this()),
        "date": datetime.date.today().isoformat(),
    }
    append_measurement(args.out, row)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd")
    p = p_race = sub.add_parser("race")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--target", type=float, default=450.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--budget-s", type=float, default=180.0)
    p.add_argument("--num-env-runners", type=int, default=2)
    p.add_argument("--algos", nargs="+", default=["IMPACT_EXT", "APPO", "IMPALA", "PPO"])
    p.add_argument(
        "--impact-set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="override a setting of IMPACT_EXT's tuned example, e.g. --impact-set lr=3e-4 (repeatable)",
    )
    p.add_argument(
        "--rival-set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="override a setting of every rival (APPO, IMPALA, PPO), e.g. to give them the same "
        "model_config as IMPACT_EXT (repeatable)",
    )
    p.set_defaults(func=cmd_race)
    p = sub.add_parser("buffer-placement")
    p.set_defaults(func=cmd_buffer_placement)
    p = p_step = sub.add_parser("learner-step")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--updates", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--impact-set", action="append", default=[], metavar="KEY=JSON")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print the N functions with the most own time (cProfile)",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="JSONL",
        help="also append the times as a measurement row, e.g. "
        "benchmarks/results/measurements/impact_learner_step/<date>.jsonl",
    )
    p.add_argument("--code", default=None, help="label of the code measured (default: its checkout's commit)")
    p.add_argument("--note", default="", help="free text stored in the row (e.g. 'machine loaded')")
    p.set_defaults(func=cmd_learner_step)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        args = parser.parse_args(["race", *(argv or sys.argv[1:])])
    if args.cmd == "learner-step":
        args.impact_set = parse_set(p_step, args.impact_set, "--impact-set")
    elif hasattr(args, "impact_set"):
        args.impact_set = parse_set(p_race, args.impact_set, "--impact-set")
        args.rival_set = parse_set(p_race, args.rival_set, "--rival-set")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
