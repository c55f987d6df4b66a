"""VRACER_EXT on Ray: 2 iterations, checkpoint round trip, other replay modes, `rllib train`/`evaluate`."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rllib_ext import cli
from rllib_ext.algorithms.vracer.vracer import VRACER, VRACERConfig


def _config(**training):
    training = {"n_start": 200, "replay_capacity": 2000, "train_batch_size_per_learner": 32, **training}
    return (
        VRACERConfig()
        .environment("Pendulum-v1")
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
        .reporting(min_sample_timesteps_per_iteration=200)
        .training(**training)
    )


def test_train_two_iterations_and_checkpoint_round_trip(ray_session, tmp_path):
    algo = _config(refer_A=1e-3).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        shared = result["learners"]["__all_modules__"]
        for key in (
            "refer_beta",
            "refer_c_max",
            "refer_lr",
            "far_policy_fraction",
            "replay_size",
            "num_gradient_steps_lifetime",
        ):
            assert key in shared, key
        module = result["learners"]["default_policy"]
        for key in ("mean_kl", "zeroed_grad_fraction", "mean_rho", "policy_loss", "vf_loss"):
            assert key in module, key
        assert shared["num_gradient_steps_lifetime"] > 0 and shared["refer_c_max"] < 5.0
        assert np.isfinite(module["total_loss"])
        learner = algo.learner_group._learner
        learner.refer.beta = 0.375  # a value the restore must bring back
        state = learner.get_state()["refer"]
        assert state["k"] > 0 and state["t"] > 0 and state["state_stats_set"]
        weights = learner.get_state()["rl_module"]["default_policy"]
        assert np.any(np.asarray(weights["standardize.std"]) != 1.0)  # App. B statistics are set
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = VRACER.from_checkpoint(path)
    try:
        learner2 = restored.learner_group._learner
        state2 = learner2.get_state()["refer"]
        assert state2 == {**state, "beta": 0.375}
        assert learner2.refer.c_max == pytest.approx(1 + 4.0 / (1 + 1e-3 * state["t"]))
        w2 = learner2.get_state()["rl_module"]["default_policy"]
        for key in weights:
            np.testing.assert_array_equal(np.asarray(w2[key]), np.asarray(weights[key]), err_msg=key)
        assert len(learner2.memory) == 0  # memory contents are not checkpointed
        restored.train()  # refills and keeps going
    finally:
        restored.stop()


def test_checkpoint_replay_restores_the_memory(ray_session, tmp_path):
    """checkpoint_replay: a restored VRACER_EXT samples the same RM (a race resumed across sessions
    goes on with it) instead of refilling N_start steps."""
    algo = _config(checkpoint_replay=True).build_algo()
    try:
        algo.train()
        memory = algo.learner_group._learner.memory
        saved = {"len": len(memory), "obs": memory.column("obs"), "v_tbc": memory.column("v_tbc")}
        assert saved["len"] >= 200
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    restored = VRACER.from_checkpoint(path)
    try:
        memory = restored.learner_group._learner.memory
        assert len(memory) == saved["len"]
        np.testing.assert_array_equal(memory.column("obs"), saved["obs"])
        np.testing.assert_array_equal(memory.column("v_tbc"), saved["v_tbc"])
        result = restored.train()  # goes on training at once: the memory holds N_start steps
        assert result["learners"]["__all_modules__"]["replay_size"] > saved["len"]
    finally:
        restored.stop()


@pytest.mark.parametrize("mode", ["er", "per", "refer1", "refer2"])
def test_other_replay_modes_train(ray_session, mode):
    algo = _config(replay_mode=mode).build_algo()
    try:
        algo.train()
        result = algo.train()
        shared = result["learners"]["__all_modules__"]
        assert shared["num_gradient_steps_lifetime"] > 0
        if mode in ("er", "per", "refer1"):
            assert shared["refer_beta"] == 1.0  # no Rule 2
        assert np.isfinite(result["learners"]["default_policy"]["total_loss"])
    finally:
        algo.stop()


def test_rllib_cli_train_and_evaluate(ray_session, storage_path, capsys):
    rc = cli.main(
        [
            "train",
            "--algo",
            "VRACER_EXT",
            "--env",
            "Pendulum-v1",
            "--stop",
            '{"training_iteration": 2}',
            "--config",
            json.dumps(
                {
                    "n_start": 200,
                    "replay_capacity": 2000,
                    "train_batch_size_per_learner": 32,
                    "min_sample_timesteps_per_iteration": 200,
                }
            ),
            "--checkpoint-at-end",
            "--storage-path",
            storage_path,
            "--name",
            "vracer_smoke",
        ]
    )
    assert rc == 0
    assert "done 2 iterations" in capsys.readouterr().out
    rc = cli.main(["evaluate", os.path.join(storage_path, "vracer_smoke"), "--episodes", "2", "--seed", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "episode 2/2" in out and "mean return" in out
