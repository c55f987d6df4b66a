"""The short learning runs of ``make test`` for ARS_EXT, AESRL_EXT, CEMRL_EXT, DDPG_EXT, NAF_EXT and TD3_EXT.

One seeded configuration per algorithm, a budget in env steps (``num_env_steps_sampled_lifetime``,
every step the algorithm simulated) and a deterministic evaluation of the final policy. The tests
(``tests/learning/algorithms/<name>/``) run seed 0 and assert the evaluation return beats the
threshold written next to them; ``benchmarks/learning_calibration.py`` runs the same function on
seeds 0-4 and writes the rows the thresholds come from
(``benchmarks/results/measurements/learning_calibration/``).

Threshold rule (the same for all six): ``b + 0.5 * (w - b)``, where ``w`` is the worst final
evaluation return over the calibrated seeds and ``b`` the best evaluation return of the *untrained*
policy over the same seeds (what a run gets when nothing is learned): halfway between not learning
and the worst seed that learned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: Seed the tests run; the calibration runs seeds 0-4, this one included.
TEST_SEED = 0
CALIBRATION_SEEDS = (0, 1, 2, 3, 4)
#: Where the calibration rows are (one JSON line per algorithm and seed).
CALIBRATION_ROWS = "benchmarks/results/measurements/learning_calibration/"
#: Bound on train() calls of one short run (each run stops on its env-step budget long before).
MAX_ITERATIONS = 500


@dataclasses.dataclass(frozen=True)
class ShortRun:
    """One algorithm's short learning run.

    Attributes:
        algorithm: Registered name.
        env: Env id.
        budget_env_steps: Training stops at the first ``train()`` that reaches this many env steps.
        eval_episodes: Deterministic evaluation episodes of the final policy.
        build: ``seed -> AlgorithmConfig`` (the evaluation settings are added by :func:`run`).
        note: What the configuration changes from the algorithm's defaults, and why.
    """

    algorithm: str
    env: str
    budget_env_steps: int
    eval_episodes: int
    build: Callable[[int], Any]
    note: str


def _td3(seed):
    from rllib_ext.algorithms.td3.td3 import TD3Config

    return (
        TD3Config()
        .environment("Pendulum-v1")
        .training(initial_steps=1000)
        .rl_module(model_config={"fcnet_hiddens": [64, 64]})
        .debugging(seed=seed)
    )


def _refer(config_cls, seed, **training):
    return (
        config_cls()
        .environment("Pendulum-v1")
        .training(gamma=0.99, n_start=1000, **training)
        .rl_module(model_config={"fcnet_hiddens": [64, 64]})
        .debugging(seed=seed)
    )


def _ddpg(seed):
    from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig

    return _refer(DDPGConfig, seed, actor_lr=1e-4, critic_lr=1e-3)


def _naf(seed):
    from rllib_ext.algorithms.naf.naf import NAFConfig

    return _refer(NAFConfig, seed, lr=1e-3)


ERL_SHORT = dict(policy_hiddens=[64, 64], critic_hiddens=[64, 64], initial_steps=1000, rl_actor_steps=300)


def _cemrl(seed):
    from rllib_ext.algorithms.cemrl.cemrl import CEMRLConfig

    return (
        CEMRLConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=1)
        .training(**ERL_SHORT)
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=seed)
    )


def _aesrl(seed):
    """tuned_examples/aesrl_ext/pendulum-v1.yaml's settings with a critic floor: AES-RL is asynchronous, and
    without ``critic_min_steps_per_env_step`` its critic's share of a fixed env-step budget depends on the
    machine (measured: 0 critic steps in 43k env steps, 2 s on 2 free cores, i.e. pure ES, no learning)."""
    from rllib_ext.algorithms.aesrl.aesrl import AESRLConfig

    return (
        AESRLConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=2, num_cpus_per_env_runner=0.5)
        .training(
            **ERL_SHORT,
            fixed_range=250.0,
            fitness_baseline=250.0,
            critic_steps_per_call=200,
            mean_eval_episodes=2,
            critic_min_steps_per_env_step=1.0,
        )
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=seed)
    )


def _ars(seed):
    from rllib_ext import ARSConfig

    return (
        ARSConfig()
        .environment("rllib_ext/VariableLength-v0", env_config={"continuous": True, "min_len": 10, "max_len": 10})
        .env_runners(num_env_runners=1)
        .training(num_directions=4, top_directions=2)
        .reporting(min_time_s_per_iteration=None)
        .debugging(seed=seed)
    )


SHORT_RUNS = {
    run.algorithm: run
    for run in (
        ShortRun("TD3_EXT", "Pendulum-v1", 8000, 10, _td3, "64-64 networks, 1000 random steps"),
        ShortRun("DDPG_EXT", "Pendulum-v1", 12000, 10, _ddpg, "tuned_examples' rates and gamma, 64-64, N_start 1000"),
        ShortRun("NAF_EXT", "Pendulum-v1", 12000, 10, _naf, "tuned_examples' rate and gamma, 64-64, N_start 1000"),
        ShortRun("CEMRL_EXT", "Pendulum-v1", 10000, 10, _cemrl, "tuned_examples' settings, 1 runner"),
        ShortRun(
            "AESRL_EXT", "Pendulum-v1", 15000, 10, _aesrl, "tuned_examples' settings, critic >= 1 step per env step"
        ),
        ShortRun("ARS_EXT", "rllib_ext/VariableLength-v0", 6000, 5, _ars, "10-step episodes, N = 4, b = 2"),
    )
}


@dataclasses.dataclass
class Outcome:
    """What one short run measured: evaluation returns before and after training, the budget spent."""

    untrained_returns: list[float]
    returns: list[float]
    env_steps: int
    iterations: int

    @property
    def mean(self) -> float:
        return sum(self.returns) / len(self.returns)

    @property
    def untrained_mean(self) -> float:
        return sum(self.untrained_returns) / len(self.untrained_returns)


def calibration_rows(root: str | None = None) -> list[dict]:
    """Every calibration row under :data:`CALIBRATION_ROWS` (``root``: the repository)."""
    import glob
    import json
    import os

    root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rows = []
    for path in sorted(glob.glob(os.path.join(root, CALIBRATION_ROWS, "*.jsonl"))):
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def threshold(rows: list[dict], algorithm: str) -> float:
    """The rule of this module's docstring over ``algorithm``'s rows, rounded down to 0.1:
    ``b + 0.5 * (w - b)``, b the best untrained evaluation return, w the worst final one."""
    import math

    mine = [r for r in rows if r["algorithm"] == algorithm]
    if len(mine) < 5:
        raise ValueError(f"{algorithm}: {len(mine)} calibration rows, the rule needs >= 5 seeds")
    b = max(r["untrained_eval_return"] for r in mine)
    w = min(r["eval_return"] for r in mine)
    return math.floor(10 * (b + 0.5 * (w - b))) / 10


def check_learns(name: str, threshold: float) -> Outcome:
    """Runs ``name``'s short run on :data:`TEST_SEED` and asserts the budget was spent and the final
    evaluation return beats ``threshold``."""
    spec = SHORT_RUNS[name]
    outcome = run(name)
    print(f"{name}: untrained {outcome.untrained_mean:.1f} -> {outcome.mean:.1f} at {outcome.env_steps} env steps")
    assert spec.budget_env_steps <= outcome.env_steps, f"{name}: stopped at {outcome.env_steps} env steps"
    assert outcome.mean > threshold, (
        f"{name} stopped learning: evaluation return {outcome.mean:.1f} <= {threshold} after {outcome.env_steps} "
        f"env steps on {spec.env} (untrained policy: {outcome.untrained_mean:.1f}); per episode {outcome.returns}"
    )
    return outcome


def env_steps_of(result: dict) -> int:
    """Every env step the algorithm simulated so far (RLlib's lifetime count)."""
    steps = result.get("num_env_steps_sampled_lifetime")
    if steps is None:
        steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
    return int(steps)


def run(name: str, seed: int = TEST_SEED, configure: Callable[[Any], Any] | None = None) -> Outcome:
    """Builds ``name``'s short configuration with ``seed``, evaluates the untrained policy, trains to
    the env-step budget (at most :data:`MAX_ITERATIONS` ``train()`` calls) and evaluates again.

    ``configure`` (config -> None) changes the config before the build, e.g. to switch learning off
    in a check that the test would fail.
    """
    from ray.tune.registry import get_trainable_cls

    from rllib_ext.compare.race import evaluator_for

    spec = SHORT_RUNS[name]
    config = spec.build(seed)
    if configure is not None:
        configure(config)
    evaluate = evaluator_for(name, get_trainable_cls(name), config)
    algo = config.build_algo()
    try:
        untrained = evaluate(algo, spec.eval_episodes)
        steps = iterations = 0
        while steps < spec.budget_env_steps and iterations < MAX_ITERATIONS:
            steps = env_steps_of(algo.train())
            iterations += 1
        returns = evaluate(algo, spec.eval_episodes)
    finally:
        algo.stop()
    return Outcome(untrained_returns=untrained, returns=returns, env_steps=steps, iterations=iterations)
