"""IMPACT_EXT smoke tests: build, train 2 iterations, checkpoint round trip, `rllib` CLI."""

from __future__ import annotations

import os

import numpy as np
import pytest
import ray
import torch
from ray.rllib.core import COMPONENT_RL_MODULE

from rllib_ext import cli
from rllib_ext.algorithms.impact.impact import IMPACT, IMPACTConfig

SMALL = {"fcnet_hiddens": [32, 32]}


def _config(env="CartPole-v1", **training):
    return (
        IMPACTConfig()
        .environment(env)
        .env_runners(num_env_runners=1)
        .rl_module(model_config=SMALL)
        .reporting(min_time_s_per_iteration=1, min_train_timesteps_per_iteration=1000)
        .training(lr=5e-4, **training)
    )


def _module_state(algo):
    state = algo.learner_group.get_state()["learner"]
    module = state["rl_module"]["default_policy"]
    impact = state["impact"]
    return module, impact


@pytest.mark.parametrize("env,env_config", [("CartPole-v1", {}), ("rllib_ext/VariableLength-v0", {"continuous": True})])
def test_train_two_iterations_and_checkpoint_round_trip(ray_session, tmp_path, variable_length_env, env, env_config):
    # Tiny kl_target: the KL coefficient moves away from its initial value at every target sync.
    config = _config(
        env,
        use_kl_loss=True,
        kl_coeff=1.0,
        kl_target=1e-8,
        target_network_update_freq=2,  # §4.1.1's "does not learn" range: syncs in a short run
        force_target_network_update_freq=True,
    )
    config.environment(env, env_config=env_config)
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        learner = result["learners"]["default_policy"]
        for key in (
            "ratio_r1_mean",
            "ratio_r1_max",
            "ratio_r2_mean",
            "ratio_r2_max",
            "ratio_r3_mean",
            "ratio_r3_max",
            "frac_clipped_rho",
            "frac_clipped_eps",
            "mean_kl_loss",
            "curr_kl_coeff",
            "policy_loss",
            "vf_loss",
        ):
            assert key in learner, key
        shared = result["learners"]["__all_modules__"]
        for key in ("num_target_syncs_lifetime", "circular_buffer_fill", "circular_buffer_num_dropped_lifetime"):
            assert key in shared, key
        # Batches leave C(N, K) only after K draws (the wait queue drops undrawn ones instead).
        assert shared.get("circular_buffer_mean_draws_per_batch", 2) == 2
        assert shared["num_target_syncs_lifetime"] >= 1
        assert result["num_env_steps_sampled_lifetime"] > 0
        assert np.isfinite(learner["total_loss"])

        module, impact = _module_state(algo)
        assert impact["num_target_syncs"] >= 1 and impact["kl_coeffs"]["default_policy"] > 1.0
        assert any(k.startswith("_old_pi") for k in module)  # target weights are in the state
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = IMPACT.from_checkpoint(path)
    try:
        module2, impact2 = _module_state(restored)
        assert impact2 == impact
        assert module2.keys() == module.keys()
        for key in module:
            np.testing.assert_array_equal(np.asarray(module2[key]), np.asarray(module[key]), err_msg=key)
        learner = restored.learner_group._learner
        assert learner.curr_kl_coeffs_per_module["default_policy"].item() == pytest.approx(
            impact["kl_coeffs"]["default_policy"]
        )
        restored.train()  # keeps training after the restore
    finally:
        restored.stop()


def test_several_envs_per_runner_train_before_any_episode_ends(ray_session):
    """Issue 21: 8 Pendulum envs (200-step episodes) on one runner; the first train batch
    (2 samples x 8 envs x 50 steps) arrives before any episode has finished, so the workers'
    `episode_return_mean` does not exist yet. That used to be a KeyError in `training_step`.

    The learner runs in `training_step` here (the peek is the same with the learner thread), so
    that the first iteration's updates provably happen before the first episode ends."""
    config = (
        _config("Pendulum-v1", learner_thread=False)
        .env_runners(num_env_runners=1, num_envs_per_env_runner=8, rollout_fragment_length=50)
        .reporting(
            min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=800, min_train_timesteps_per_iteration=0
        )
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        # The case of the issue is exercised: learning happened, no episode had finished.
        assert result["learners"]["__all_modules__"]["num_learner_updates_lifetime"] > 0
        assert not np.isfinite(result["env_runners"].get("episode_return_mean", np.nan))
        # Training goes on until the first episodes end (8 x 200 steps), then reports them.
        for _ in range(6):
            result = algo.train()
            if np.isfinite(result["env_runners"].get("episode_return_mean", np.nan)):
                break
        assert result["num_env_steps_sampled_lifetime"] >= 8 * 200
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
    finally:
        algo.stop()


def test_rllib_cli_train_and_evaluate(ray_session, storage_path, capsys):
    """The README's command on 2 CPUs (no --num-env-runners): fitted to 1 runner, only progress lines."""
    rc = cli.main(
        [
            "train",
            "--algo",
            "IMPACT_EXT",
            "--env",
            "CartPole-v1",
            "--stop",
            '{"training_iteration": 2}',
            "--config",
            '{"min_time_s_per_iteration": 1, "min_train_timesteps_per_iteration": 1000, "lr": 0.0005}',
            "--checkpoint-at-end",
            "--storage-path",
            storage_path,
            "--name",
            "impact_smoke",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "done 2 iterations" in captured.out
    assert any(line.startswith("rllib: IMPACT_EXT: 1 env runner(s) instead of 2") for line in captured.err.splitlines())
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    others = [line for line in lines if not line.startswith(("rllib: ", "iter "))]
    assert others == [], "\n".join(others)
    rc = cli.main(["evaluate", os.path.join(storage_path, "impact_smoke"), "--episodes", "2", "--seed", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "episode 2/2" in out and "mean return" in out


@pytest.mark.parametrize("optimizer", ["adam", "dsgd"])
def test_driver_only_config_trains(ray_session, optimizer):
    """num_env_runners=0 (what `rllib evaluate` rebuilds): the local runner samples and learns.

    Also runs the optimizer chosen by name (rllib_ext.optim's DSGD gets the workers' return).
    """
    config = _config(optimizer=optimizer).env_runners(num_env_runners=0)
    algo = config.build_algo()
    broadcast = []
    send = algo._impact_broadcast

    def record(rl_module_state, connector_states):
        broadcast.append(rl_module_state)
        send(rl_module_state, connector_states)

    algo._impact_broadcast = record
    try:
        result = algo.train()
        assert result["learners"]["__all_modules__"]["num_learner_updates_lifetime"] > 0
        # The last broadcast reached the local env runner: its weights equal that snapshot. Not
        # the learner's live weights: the learner thread may have updated them since (Figure 1c).
        assert broadcast, "no weights were broadcast"
        snapshot = broadcast[-1][COMPONENT_RL_MODULE]
        snapshot = ray.get(snapshot) if isinstance(snapshot, ray.ObjectRef) else snapshot
        runner_w = algo.env_runner.module.get_state()
        assert set(runner_w) == set(snapshot["default_policy"])
        for key, value in runner_w.items():
            torch.testing.assert_close(torch.as_tensor(value), torch.as_tensor(snapshot["default_policy"][key]))
    finally:
        algo.stop()
