"""Small, fast configs of every registered rllib_ext algorithm, for the reliability tests.

Tests iterate over :data:`rllib_ext.registry.ALGORITHMS`, so an algorithm that is registered
later is covered without editing them: :func:`small_config` shrinks whatever of the common
size settings its config has (networks, batches, replay warm-up, population sizes).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rllib_ext import registry

VAR_ENV = "rllib_ext/VariableLength-v0"
FAULTY_ENV = "rllib_ext/Faulty-v0"
NAMES = sorted(registry.ALGORITHMS)
EPISODE_LENGTHS = {"min_len": 5, "max_len": 15}

# Size settings, applied when the algorithm's config has them (names used across rllib_ext).
SMALL_SETTINGS: dict[str, Any] = {
    # black-box family
    "episodes_per_batch": 4,
    "policy_hiddens": [16, 16],
    "phi_num_perturbations": 2,
    # ReF-ER / replay-based learners
    "n_start": 64,
    "replay_capacity": 1000,
    "steps_per_update": 4.0,
    "train_batch_size_per_learner": 32,
    "initial_steps": 50,
    "compile_update": False,  # ReF-ER's compiled step costs seconds to compile; tested in tests/unit/common/refer
    # IMPACT
    "circular_buffer_num_batches": 2,
    "circular_buffer_iterations_per_batch": 1,
    # populations and TD3 parts (AES-RL, CEM-RL)
    "population_size": 4,
    "rl_population": 2,
    "critic_hiddens": [16, 16],
    "rl_batch_size": 16,
}
SMALL_MODEL = {"fcnet_hiddens": [16, 16]}
# Settings an algorithm needs for an env it has no paper value for (AES-RL's Table 5: r, f_b);
# returns on the variable-length env are 2.5-15.
ENV_SETTINGS: dict[str, Any] = {"fixed_range": 2.0, "fitness_baseline": 2.0}


def config_class(name):
    return registry.get_config_class(name)


def supports_continuous(name: str) -> bool:
    """Whether ``name`` validates on the continuous variant of the variable-length env."""
    return _validates(name, {"continuous": True})


def supports_discrete(name: str) -> bool:
    """Whether ``name`` validates on the discrete variant of the variable-length env."""
    return _validates(name, {"continuous": False})


def for_variable_length_env(name: str, continuous: bool):
    """The default config of ``name`` on the variable-length env (plus :data:`ENV_SETTINGS`)."""
    config = config_class(name)()
    config.training(**{k: v for k, v in ENV_SETTINGS.items() if hasattr(config, k)})
    return config.environment(VAR_ENV, env_config={**EPISODE_LENGTHS, "continuous": continuous})


def _validates(name: str, env_config: dict[str, Any]) -> bool:
    try:
        for_variable_length_env(name, env_config["continuous"]).validate()
        return True
    except ValueError:
        return False


def small_config(name: str, env: str = VAR_ENV, env_config=None, num_env_runners: int = 1, seed: int = 0):
    """A tiny, seeded config of algorithm ``name``: one short update per ``train()`` call."""
    config = config_class(name)()
    unused = getattr(config, "unused_settings", {})  # settings a config refuses (it would not read them)
    training = {k: v for k, v in {**SMALL_SETTINGS, **ENV_SETTINGS}.items() if hasattr(config, k) and k not in unused}
    config.training(**training)
    config.rl_module(model_config=SMALL_MODEL)
    # The continuous variant where the algorithm takes it, else the discrete one.
    env_config = {**EPISODE_LENGTHS, "continuous": supports_continuous(name), **(env_config or {})}
    config.environment(env, env_config=env_config)
    config.env_runners(num_env_runners=num_env_runners, rollout_fragment_length=25)
    # No minimum time per iteration; sample-driven algorithms sample 100 env steps per
    # iteration, the black-box family makes one update per training_step.
    config.reporting(min_time_s_per_iteration=None, min_sample_timesteps_per_iteration=100)
    if hasattr(config, "episodes_per_batch"):
        config.reporting(min_sample_timesteps_per_iteration=0)
    config.fault_tolerance(delay_between_env_runner_restarts_s=0.0)
    config.debugging(seed=seed)
    return config


def learner_state(algo) -> dict[str, Any]:
    """The learner group's state (weights, optimizer states, algorithm-specific learner state)."""
    return algo.learner_group.get_state()["learner"]


def assert_nested_equal(a, b, path="state"):
    """Recursively equal dicts/lists of arrays, tensors and scalars (NaN == NaN)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            assert_nested_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            assert_nested_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, (torch.Tensor, np.ndarray)) or isinstance(b, (torch.Tensor, np.ndarray)):
        x = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        y = b.detach().cpu().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        np.testing.assert_array_equal(x, y, err_msg=path)
    elif isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def runner_weights_finite(algo) -> bool:
    """Whether every env runner's (local and remote) module parameters are finite."""
    from rllib_ext.common.guards import nonfinite_parameters

    def check(runner):
        module = getattr(runner, "module", None)
        theta = getattr(runner, "_theta", None)
        ok = module is None or not nonfinite_parameters(module)
        return ok and (theta is None or bool(np.isfinite(theta).all()))

    return all(algo.env_runner_group.foreach_env_runner(check, local_env_runner=True))
