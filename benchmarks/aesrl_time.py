"""Paper 001 Table 1, scaled to this machine: wall time for one env-step budget.

CEMRL_EXT serial (CEM-RL: 1 runner), CEMRL_EXT parallel (P-CEM-RL) and AESRL_EXT with the same
number of runners, side by side in one run, interleaved, medians over ``--repeats``. Both
algorithms use the same TD3 settings, the same networks and the same RL schedule sizes (RL
individuals train ``--rl-actor-steps`` actor steps; the critic trains as each algorithm does:
between generations for CEM-RL, in parallel for AES-RL), so the difference is the update scheme.

Scenarios:

- ``halfcheetah``: HalfCheetah-v5 (fixed 1000-step episodes, Table 1's first row), Table 5's r, f_b.
- ``sleep``: rllib_ext/VariableLength-v0 (continuous, 20–400 steps, 1 ms sleep per step: a
  stand-in for an expensive simulator whose episode lengths vary like Hopper's), 5 runners at
  0.2 CPU each, so that 5 runners fit on this 2-core machine (``--runners 9`` for the paper's 9).
- ``hopper``: Hopper-v5 (varying episode lengths, Table 1's last row), Table 5's r, f_b.

A method may name its own runner count after ``@`` (``"AES-RL (reevaluate 5)@9"``: Table 1's
last column); otherwise it gets ``--runners`` (CEM-RL serial always 1). On a machine with fewer
cores than runners + 1 the MuJoCo scenarios share cores, and the comparison says little.
``--critic-gpus 1`` trains every method's critic on the GPU (``critic_num_gpus``), as the
reference codes do; ``--runner-gpus G`` gives each env runner G of a GPU
(``num_gpus_per_env_runner``), on which it trains its RL individuals' actors, as the aes-rl
reference's workers do (with one GPU: e.g. ``--critic-gpus 0.5 --runner-gpus 0.05``). ``--out``
appends one measurement row per run (benchmark ``aesrl_time``).

AESRL_EXT is measured with each f(μ) estimate (``mean_fitness``): ``reevaluate`` with 5 episodes
(the reference code) or 1, and ``interpolate`` (μ evaluated once). The budget counts the individuals'
env steps (the paper's step budget); AES-RL's mean re-evaluations come on top.

    python -m benchmarks.aesrl_time --scenarios sleep --budget 30000 --repeats 3
    python -m benchmarks.aesrl_time --scenarios halfcheetah --hiddens 400 300 --rl-actor-steps auto \
        --initial-steps 2000 --budget 40000 --critic-gpus 1 --repeats 1 \
        --methods "P-CEM-RL@5" "AES-RL (reevaluate 5)@5" "AES-RL (reevaluate 5)@9" "CEM-RL serial" \
        --out benchmarks/results/measurements/aesrl_time/<date>.jsonl
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import time

import ray

import rllib_ext  # noqa: F401
from rllib_ext import AESRLConfig, CEMRLConfig
from rllib_ext.compare.rows import Machine, append_measurement, git_commit

# fixed_range: AES-RL's r and f_b where the task has no Table 5 row (None: Table 5's).
SCENARIOS = {
    "sleep": dict(
        env="rllib_ext/VariableLength-v0",
        env_config={"min_len": 20, "max_len": 400, "continuous": True, "step_sleep_s": 0.001},
        cpus_per_runner=0.2,
        fixed_range=60.0,
    ),
    "hopper": dict(env="Hopper-v5", env_config={}, cpus_per_runner=1, fixed_range=None),
    "halfcheetah": dict(env="HalfCheetah-v5", env_config={}, cpus_per_runner=1, fixed_range=None),
}


def method_runners(method: str, args) -> tuple[str, int]:
    """(method name, runners) of a ``--methods`` entry: ``NAME`` or ``NAME@RUNNERS``."""
    name, _, n = method.partition("@")
    if name == "CEM-RL serial":
        return name, 1
    return name, int(n) if n else args.runners


def common(config, sc: dict, runners: int, args):
    return (
        config.environment(sc["env"], env_config=sc["env_config"])
        .env_runners(
            num_env_runners=runners,
            num_cpus_per_env_runner=sc["cpus_per_runner"],
            num_gpus_per_env_runner=args.runner_gpus,
        )
        .training(
            policy_hiddens=list(args.hiddens),
            critic_hiddens=list(args.hiddens),
            initial_steps=args.initial_steps,
            rl_actor_steps=args.rl_actor_steps if args.rl_actor_steps == "auto" else int(args.rl_actor_steps),
            rl_batch_size=100,
            critic_num_gpus=args.critic_gpus,
        )
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=args.seed)
    )


def build(method: str, sc: dict, args):
    name, runners = method_runners(method, args)
    if name == "CEM-RL serial":
        return common(CEMRLConfig(), sc, 1, args).training(mode="serial").build_algo()
    if name == "P-CEM-RL":
        return common(CEMRLConfig(), sc, runners, args).training(mode="parallel").build_algo()
    fitness = "reevaluate" if "reevaluate" in name else "interpolate"
    episodes = 1 if "reevaluate 1" in name else 5
    floor = 1.0 if "floor 1" in name else 0.0  # the critic held to >= 1 step per env step, as CEM-RL's
    scale = (
        {} if sc["fixed_range"] is None else {"fixed_range": sc["fixed_range"], "fitness_baseline": sc["fixed_range"]}
    )
    return (
        common(AESRLConfig(), sc, runners, args)
        .training(
            mean_fitness=fitness,
            mean_eval_episodes=episodes,
            critic_steps_per_call=args.critic_steps_per_call,
            critic_min_steps_per_env_step=floor,
            **scale,
        )
        .build_algo()
    )


def measure(method: str, sc: dict, args) -> dict:
    algo = build(method, sc, args)
    try:
        # The clock starts once the critic worker is up (on a GPU, CUDA's start takes seconds): at
        # the paper's 1M steps that start is noise, at this budget it would decide the race.
        t_ready = time.perf_counter()
        ray.get(algo.critic.critic_weights.remote())
        t_ready = time.perf_counter() - t_ready
        t0 = time.perf_counter()
        while algo.counters["individual_steps"] < args.budget:
            algo.train()
        wall = time.perf_counter() - t0
        c = algo.counters
        return {
            "wall_s": wall,
            "steps": c["individual_steps"],
            "updates": algo.update_index,
            "critic_steps": c["critic_steps"],
            "rl": c["n_rl"],
            "es": c["n_es"],
            "rl_train_s": c["rl_train_s"],  # runners' seconds training RL individuals' actors (summed)
            "rl_actor_steps_trained": c["rl_actor_steps"],
            "mean_eval_steps": c.get("mean_eval_env_steps", 0),
            "warmup_individuals": c.get("warmup_individuals", 0),
            "es_before_rl": c.get("es_before_rl", 0),  # ES individuals before the critic's first weights
            "critic_ready_s": t_ready,
            "f_mu": getattr(getattr(algo, "population", None), "f_mu", None),
        }
    finally:
        algo.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=["sleep"], choices=list(SCENARIOS))
    parser.add_argument("--runners", type=int, default=5)
    parser.add_argument("--budget", type=int, default=20_000, help="individuals' env steps per run")
    parser.add_argument("--initial-steps", type=int, default=2_000)
    parser.add_argument("--rl-actor-steps", default="200", help="an integer, or 'auto' (the reference codes')")
    parser.add_argument("--hiddens", type=int, nargs="+", default=[64, 64], help="actor and critic (paper: 400 300)")
    parser.add_argument("--critic-gpus", type=float, default=0, help="critic_num_gpus of every method")
    parser.add_argument("--runner-gpus", type=float, default=0, help="num_gpus_per_env_runner of every method")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="append one measurement row per run to this .jsonl")
    parser.add_argument("--note", default="", help="free text stored in the rows")
    parser.add_argument("--critic-steps-per-call", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["CEM-RL serial", "P-CEM-RL", "AES-RL (reevaluate 5)", "AES-RL (reevaluate 1)", "AES-RL (interpolate)"],
    )
    args = parser.parse_args()
    most = max(method_runners(m, args)[1] for m in args.methods)
    ray.init(num_cpus=max(3, most, os.cpu_count() or 1), include_dashboard=False, logging_level=logging.WARNING)
    machine, code, date = Machine.this(), git_commit(), datetime.date.today().isoformat()
    for name in args.scenarios:
        sc = SCENARIOS[name]
        runs = {m: [] for m in args.methods}
        for repeat in range(args.repeats):  # interleaved, so machine noise hits every method alike
            for m in args.methods:
                runs[m].append(measure(m, sc, args))
                print(
                    name, m, {k: round(v, 2) if isinstance(v, float) else v for k, v in runs[m][-1].items()}, flush=True
                )
                if args.out:
                    method, runners = method_runners(m, args)
                    row = {
                        "benchmark": "aesrl_time",
                        "env": sc["env"],
                        "method": method,
                        "runners": runners,
                        "budget": args.budget,
                        "initial_steps": args.initial_steps,
                        "rl_actor_steps": args.rl_actor_steps,
                        "hiddens": list(args.hiddens),
                        "critic_gpus": args.critic_gpus,
                        "runner_gpus": args.runner_gpus,
                        "seed": args.seed,
                        "repeat": repeat,
                        **runs[m][-1],
                        "code": code,
                        "note": args.note,
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    }
                    append_measurement(args.out, row)
        med = {m: statistics.median(r["wall_s"] for r in runs[m]) for m in args.methods}
        first = {method_runners(m, args)[0]: med[m] for m in reversed(args.methods)}
        serial, parallel = first.get("CEM-RL serial"), first.get("P-CEM-RL")
        print(f"\n{name}: {args.runners} runners, budget {args.budget} env steps, medians of {args.repeats}")
        print("| method | runners | wall s | vs CEM-RL serial | vs P-CEM-RL |")
        print("| --- | --- | --- | --- | --- |")
        for m in args.methods:
            n = method_runners(m, args)[1]
            vs_s = f"{med[m] / serial:.2f}x" if serial else "-"
            vs_p = f"{med[m] / parallel:.2f}x" if parallel else "-"
            print(f"| {m} | {n} | {med[m]:.1f} | {vs_s} | {vs_p} |")
    ray.shutdown()


if __name__ == "__main__":
    main()
