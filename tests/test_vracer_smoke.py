"""VRACER_EXT smoke tests: validate(), build, 2 iterations, metrics, checkpoint round trip, CLI."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

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


@pytest.mark.parametrize(
    "setting,value,match",
    [
        ("refer_C", 0.0, "refer_C"),
        ("refer_C", -1.0, "refer_C"),
        ("refer_D", 0.0, "refer_D"),
        ("refer_D", 1.0, "refer_D"),
        ("train_batch_size_per_learner", 0, "train_batch_size_per_learner"),
        ("replay_mode", "bogus", "replay_mode"),
        ("optimizer", "rmsprop", "optimizer"),
        ("n_start", 10**9, "n_start"),
        ("steps_per_update", 0, "steps_per_update"),
    ],
)
def test_validate_rejects_bad_settings(setting, value, match):
    config = VRACERConfig().environment("Pendulum-v1").training(**{setting: value})
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_paper_defaults():
    c = VRACERConfig()
    assert (c.gamma, c.train_batch_size_per_learner, c.lr, c.steps_per_update) == (0.995, 256, 1e-4, 1.0)
    assert (c.refer_C, c.refer_A, c.refer_D, c.replay_capacity, c.replay_mode) == (4.0, 5e-7, 0.1, 2**18, "refer")


def test_module_network_and_truncated_sampling():
    import gymnasium as gym

    from rllib_ext.algorithms.refer.distributions import TruncatedDiagGaussian
    from rllib_ext.algorithms.vracer.vracer_rl_module import VRACERTorchRLModule

    m = VRACERTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (3,)), action_space=gym.spaces.Box(-1, 1, (2,)), model_config={}
    )
    assert [l.out_features for l in m.net if isinstance(l, torch.nn.Linear)] == [128, 128, 3]
    assert sum(isinstance(l, torch.nn.Softsign) for l in m.net) == 2
    v, mean, sigma = m.value_and_policy(torch.randn(5, 3))
    torch.testing.assert_close(sigma, torch.full((5, 2), 0.2))  # σ = softplus(w) = 0.2 at init
    assert v.abs().max() < 0.5 and mean.abs().max() < 0.5  # near-zero outputs at init (App. A)
    dist = TruncatedDiagGaussian(loc=torch.zeros(20000, 2), scale=torch.full((20000, 2), 0.5))
    a = dist.sample()
    assert a.abs().max() <= 1.5 + 1e-5 and a.abs().max() > 1.3  # truncated at 3σ
    assert a.std().item() == pytest.approx(0.5 * 0.9865, rel=0.03)  # truncated-normal std


def test_train_two_iterations_and_checkpoint_round_trip(ray_session, tmp_path):
    algo = _config(refer_A=1e-3).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        shared = result["learners"]["__all_modules__"]
        for key in ("refer_beta", "refer_c_max", "refer_lr", "far_policy_fraction", "replay_size", "num_gradient_steps_lifetime"):
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
            "train", "--algo", "VRACER_EXT", "--env", "Pendulum-v1",
            "--stop", '{"training_iteration": 2}',
            "--config", '{"n_start": 200, "replay_capacity": 2000, "train_batch_size_per_learner": 32, "min_sample_timesteps_per_iteration": 200}',
            "--checkpoint-at-end", "--storage-path", storage_path, "--name", "vracer_smoke",
        ]
    )
    assert rc == 0
    assert "done 2 iterations" in capsys.readouterr().out
    rc = cli.main(["evaluate", os.path.join(storage_path, "vracer_smoke"), "--episodes", "2", "--seed", "1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "episode 2/2" in out and "mean return" in out
