"""Per-step policy cost in the lean runner's loop: torch ``MLPPolicy.act`` vs ``NumpyPolicy.act``.

The black-box runners call the policy once per env step on one observation, so its fixed cost
per call adds to every env step. For each env this times, in one process and one thread (as in a
runner), on observations recorded from the env:

- ``env``: ``env.step`` alone (random actions; resets not timed),
- ``torch``: ``MLPPolicy.act(obs, explore)`` with a torch generator (as the runner calls it),
- ``numpy``: ``NumpyPolicy.act(obs, explore)``, ``begin_episode`` every ``--episode-steps`` calls,

for ``explore`` False and True with the ``gaussian`` head (Discrete: sampling the softmax), and
the ``deterministic`` head's ``explore=False`` action. Each figure is the median over
``--repeats`` runs of ``--steps`` calls, the torch and numpy runs interleaved. No Ray.

    python benchmarks/policy_step.py --envs CartPole-v1 Pendulum-v1 Hopper-v5 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from rllib_ext.common.blackbox.fast_policy import NumpyPolicy
from rllib_ext.common.policies import MLPPolicy

HIDDENS = (64, 64)
ACTIVATION = "tanh"


def record_observations(env: gym.Env, n: int, seed: int = 0) -> np.ndarray:
    """n float32 observations of random-action episodes (what the observation filter hands on)."""
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = []
    while len(out) < n:
        out.append(np.asarray(obs, dtype=np.float32))
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(out)


def env_step_us(env: gym.Env, steps: int) -> float:
    """Mean µs of one ``env.step`` with random actions (resets excluded from the timing)."""
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=1)
    total = 0.0
    for action in actions:
        t0 = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        total += time.perf_counter() - t0
        if terminated or truncated:
            env.reset()
    return total / steps * 1e6


def torch_act_us(policy: MLPPolicy, observations: np.ndarray, explore: bool) -> float:
    generator = torch.Generator().manual_seed(0)
    act = policy.act
    t0 = time.perf_counter()
    for obs in observations:
        act(obs, explore=explore, generator=generator)
    return (time.perf_counter() - t0) / len(observations) * 1e6


def numpy_act_us(fast: NumpyPolicy, observations: np.ndarray, explore: bool, episode_steps: int) -> float:
    rng = np.random.default_rng(0)
    act = fast.act
    t0 = time.perf_counter()
    for k, obs in enumerate(observations):
        if k % episode_steps == 0:
            fast.begin_episode(rng)
        act(obs, explore=explore)
    return (time.perf_counter() - t0) / len(observations) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1", "Hopper-v5"])
    parser.add_argument("--steps", type=int, default=2000, help="calls per timed run")
    parser.add_argument("--repeats", type=int, default=7, help="runs per figure (the median is reported)")
    parser.add_argument("--episode-steps", type=int, default=1000, help="NumpyPolicy.begin_episode every N calls")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the lean runner

    print(f"MLP {HIDDENS} {ACTIVATION}, µs per call, median of {args.repeats} runs of {args.steps} calls\n")
    header = f"{'env':<12} {'head':<13} {'explore':<7} {'env step':>9} {'torch':>8} {'numpy':>8} {'torch/numpy':>11}"
    header += f" {'steps/s torch':>13} {'steps/s numpy':>13}"
    print(header)
    for env_id in args.envs:
        env = gym.make(env_id)
        observations = record_observations(env, args.steps)
        env_us = statistics.median(env_step_us(env, args.steps) for _ in range(args.repeats))
        obs_dim = env.observation_space.shape[0]
        for head, explore in (("deterministic", False), ("gaussian", False), ("gaussian", True)):
            policy = MLPPolicy(obs_dim, env.action_space, hiddens=HIDDENS, activation=ACTIVATION, head=head)
            fast = NumpyPolicy(policy)
            # Interleaved, so that both see the same load on a shared machine.
            torch_runs, numpy_runs = [], []
            for _ in range(args.repeats):
                torch_runs.append(torch_act_us(policy, observations, explore))
                numpy_runs.append(numpy_act_us(fast, observations, explore, args.episode_steps))
            torch_us, numpy_us = statistics.median(torch_runs), statistics.median(numpy_runs)
            print(
                f"{env_id:<12} {head:<13} {str(explore):<7} {env_us:>9.1f} {torch_us:>8.1f} {numpy_us:>8.1f}"
                f" {torch_us / numpy_us:>11.1f} {1e6 / (env_us + torch_us):>13.0f} {1e6 / (env_us + numpy_us):>13.0f}"
            )
        env.close()


if __name__ == "__main__":
    main()
