"""ES_EXT sampling throughput vs the raw env+policy rate, measured side by side in one run.

For each env:

1. ``raw``: one process, a plain loop: gymnasium env + the same MLP policy (and observation
   filter) the lean runner uses — the physical limit per core.
2. ``engine``: the black-box engine alone: every runner kept busy with perturbation jobs of a
   fixed θ (no updates) — what the lean runner + async pool deliver.
3. ``ES_EXT``: full synchronous ES training (perturb, wait for N, update, publish).
4. ``rllib``: RLlib's SingleAgentEnvRunner (the component we replaced), ``sample()`` on the
   driver with a PPO default module.

Ratios are against ``raw × runners`` (runners ≤ cores). Each measurement is repeated and the
median is reported (the machine is shared and noisy).

    python benchmarks/es_throughput.py --envs CartPole-v1 Hopper-v5 --runners 1 2 --seconds 10 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import gymnasium as gym
import numpy as np
import ray
import torch

import rllib_ext  # noqa: F401 - registers ES_EXT and the envs
from rllib_ext import ESConfig
from rllib_ext.common.obs_filter import ObservationFilter
from rllib_ext.common.policies import MLPPolicy

HIDDENS = [64, 64]


def raw_rate(env_id: str, seconds: float) -> float:
    """Steps/s of a plain env + MLPPolicy + filter loop in this process."""
    torch.set_num_threads(1)
    env = gym.make(env_id)
    policy = MLPPolicy(env.observation_space.shape[0], env.action_space, hiddens=HIDDENS)
    obs_filter = ObservationFilter(env.observation_space.shape)
    obs, _ = env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, r, term, trunc, _ = env.step(policy.act(obs_filter(obs)))
        steps += 1
        if term or trunc:
            obs, _ = env.reset()
            obs_filter.pop_delta()
    return steps / (time.perf_counter() - t0)


def es_config(env_id: str, runners: int) -> ESConfig:
    return (
        ESConfig()
        .environment(env_id)
        .env_runners(num_env_runners=runners)
        .training(policy_hiddens=HIDDENS, episodes_per_batch=40, eval_episodes=0)
        .debugging(seed=0)
    )


def engine_rate(env_id: str, runners: int, seconds: float) -> float:
    """Steps/s of the runners kept busy by the pool with jobs of one θ (no updates)."""
    algo = es_config(env_id, runners).build_algo()
    try:
        seed, n, per_call = algo.next_batch_seed(), 4096, 8
        next_index = 0

        def refill():
            nonlocal next_index
            while algo.pool.num_queued < 2 * runners:
                algo.submit_perturbations(seed, n, [(next_index + i) % n for i in range(per_call)])
                next_index += per_call

        refill()
        algo.collect(timeout_s=1.0)  # warm up
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            refill()
            ok, _ = algo.collect(timeout_s=0.05)
            steps += sum(r["length"] for r in ok)
        return steps / (time.perf_counter() - t0)
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
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Hopper-v5"])
    parser.add_argument("--runners", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ray.init(num_cpus=max(args.runners) + 1, include_dashboard=False, logging_level=logging.WARNING)
    rows = []
    for env_id in args.envs:
        raw = statistics.median(raw_rate(env_id, args.seconds) for _ in range(args.repeats))
        rllib = statistics.median(rllib_runner_rate(env_id, args.seconds) for _ in range(args.repeats))
        rows.append((env_id, "raw (1 process)", 1, raw, 1.0, None))
        rows.append((env_id, "RLlib SingleAgentEnvRunner", 1, rllib, rllib / raw, None))
        for k in args.runners:
            eng = statistics.median(engine_rate(env_id, k, args.seconds) for _ in range(args.repeats))
            rows.append((env_id, "engine (lean runners + pool)", k, eng, eng / (raw * k), None))
            es = [es_rate(env_id, k, args.seconds) for _ in range(args.repeats)]
            rate = statistics.median(r for r, _ in es)
            util = statistics.median(u for _, u in es)
            rows.append((env_id, "ES_EXT training", k, rate, rate / (raw * k), util))
    print(f"\n{'env':<14} {'what':<30} {'runners':>7} {'steps/s':>10} {'/ raw×runners':>14} {'utilization':>12}")
    for env_id, what, k, rate, ratio, util in rows:
        u = f"{util:.2f}" if util is not None else ""
        print(f"{env_id:<14} {what:<30} {k:>7} {rate:>10.0f} {ratio:>14.2f} {u:>12}")
    ray.shutdown()


if __name__ == "__main__":
    main()
