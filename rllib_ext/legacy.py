"""Config keys of older RLlib versions (1.x, 2.0-2.9) and what RLlib 2.60 calls them.

Tuned examples written for older RLlib use keys such as ``num_workers`` or
``num_envs_per_worker``. RLlib 2.60 translates a few of them silently (``num_workers``), turns
most into a ``ValueError`` raised from a property getter (a traceback, since ``hasattr`` does not
catch it), and ignores others (``model`` is read only by the old API stack). The CLI runs every
``--config`` and YAML ``config:`` mapping through :func:`translate_old_keys` first:

* a key with a one-to-one new name is renamed, with one notice line;
* a key without one raises :class:`OldKeyError` naming the key and what replaces it.

The table is the one list; ``tests/unit/test_legacy.py`` checks each new name exists on a 2.60
``AlgorithmConfig`` and each old one does not work there as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Old key -> RLlib 2.60 key with the same meaning.
RENAMED: dict[str, str] = {
    "num_workers": "num_env_runners",
    "num_rollout_workers": "num_env_runners",
    "num_envs_per_worker": "num_envs_per_env_runner",
    "evaluation_num_workers": "evaluation_num_env_runners",
    "num_cpus_per_worker": "num_cpus_per_env_runner",
    "num_gpus_per_worker": "num_gpus_per_env_runner",
    "custom_resources_per_worker": "custom_resources_per_env_runner",
    "num_learner_workers": "num_learners",
    "num_cpus_per_learner_worker": "num_cpus_per_learner",
    "num_gpus_per_learner_worker": "num_gpus_per_learner",
    "num_cpus_for_local_worker": "num_cpus_for_main_process",
    "num_cpus_for_driver": "num_cpus_for_main_process",
    "ignore_worker_failures": "ignore_env_runner_failures",
    "recreate_failed_workers": "restart_failed_env_runners",
    "recreate_failed_env_runners": "restart_failed_env_runners",
    "max_num_worker_restarts": "max_num_env_runner_restarts",
    "delay_between_worker_restarts_s": "delay_between_env_runner_restarts_s",
    "num_consecutive_worker_failures_tolerance": "num_consecutive_env_runner_failures_tolerance",
    "worker_health_probe_timeout_s": "env_runner_health_probe_timeout_s",
    "worker_restore_timeout_s": "env_runner_restore_timeout_s",
    "validate_workers_after_construction": "validate_env_runners_after_construction",
    "min_iter_time_s": "min_time_s_per_iteration",
    "min_time_s_per_reporting": "min_time_s_per_iteration",
    "min_sample_timesteps_per_reporting": "min_sample_timesteps_per_iteration",
    "min_train_timesteps_per_reporting": "min_train_timesteps_per_iteration",
    "metrics_smoothing_episodes": "metrics_num_episodes_for_smoothing",
    "collect_metrics_timeout": "metrics_episode_collection_timeout_s",
    "sgd_minibatch_size": "minibatch_size",
    "num_sgd_iter": "num_epochs",
    # The old stack's network settings; the new API stack reads the same keys from model_config.
    "model": "model_config",
}

# Old key -> what to use instead, where 2.60 has no one-to-one rename.
REPLACED: dict[str, str] = {
    "timesteps_per_iteration": "min_sample_timesteps_per_iteration or min_train_timesteps_per_iteration",
    "evaluation_num_episodes": "evaluation_duration with evaluation_duration_unit: episodes",
    "_enable_new_api_stack": "api_stack (the new API stack is the default)",
    "_enable_rl_module_api": "api_stack (the new API stack is the default)",
    "_enable_learner_api": "api_stack (the new API stack is the default)",
    "exploration_config": "the RLModule's exploration (the new API stack has no exploration_config)",
}


class OldKeyError(ValueError):
    """A config key RLlib 2.60 no longer has and that has no one-to-one new name."""


def translate_old_keys(
    config: dict[str, Any], where: str, notice: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """``config`` with old RLlib keys renamed to their 2.60 names.

    Args:
        config: A config mapping as a user wrote it (``--config`` JSON or a YAML ``config:``).
        where: Names the source in messages, e.g. ``"--config"`` or ``"x.yaml: experiment 'a'"``.
        notice: Called with one line per renamed key (the CLI prints it); None: silent.

    Returns:
        A new dict; the input is not changed.

    Raises:
        OldKeyError: For an old key without a one-to-one new name, or an old key given together
            with its new name (which one would win is not clear).
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in REPLACED:
            raise OldKeyError(
                f"{where}: {key!r} is an old RLlib key that 2.60's new API stack does not use; use {REPLACED[key]}"
            )
        new = RENAMED.get(key)
        if new is None:
            out[key] = value
            continue
        if new in config:
            raise OldKeyError(f"{where}: both {key!r} and its RLlib 2.60 name {new!r} are set; keep {new!r}")
        if notice is not None:
            notice(f"{where}: {key!r} is called {new!r} in RLlib 2.60; using it as {new!r}")
        out[new] = value
    return out
