"""DDPG_EXT and NAF_EXT (paper 003, ReFERAlgorithm with ReFERQConfig) on Ray: 2 iterations, checkpoint round trip
(networks, target networks, β, t), `rllib evaluate`."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext import cli
from rllib_ext.algorithms.ddpg.ddpg import DDPG, DDPGConfig
from rllib_ext.algorithms.naf.naf import NAF, NAFConfig


@pytest.mark.parametrize("algo_cls,config_cls", [(DDPG, DDPGConfig), (NAF, NAFConfig)])
def test_train_checkpoint_round_trip_and_evaluate(ray_session, tmp_path, capsys, algo_cls, config_cls):
    config = (
        config_cls()
        .environment("Pendulum-v1")
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
        .reporting(min_sample_timesteps_per_iteration=200)
        .training(n_start=200, replay_capacity=2000, train_batch_size_per_learner=32, refer_A=1e-3)
    )
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        shared = result["learners"]["__all_modules__"]
        assert shared["num_gradient_steps_lifetime"] > 0 and shared["refer_c_max"] < 5.0
        module = result["learners"]["default_policy"]
        for key in ("mean_kl", "zeroed_grad_fraction", "mean_rho", "total_loss"):
            assert key in module and np.isfinite(module[key]), key
        learner = algo.learner_group._learner
        learner.refer.beta = 0.625
        state = learner.get_state()
        weights = state["rl_module"]["default_policy"]
        targets = [k for k in weights if k.startswith("target_")]
        assert targets
        # Soft updates moved the targets away from their initial copy but not onto the weights.
        main = targets[0][len("target_") :]
        assert not np.array_equal(np.asarray(weights[targets[0]]), np.asarray(weights[main]))
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = algo_cls.from_checkpoint(path)
    try:
        learner2 = restored.learner_group._learner
        state2 = learner2.get_state()
        assert state2["refer"] == {**state["refer"], "beta": 0.625}
        for key in weights:
            np.testing.assert_array_equal(
                np.asarray(state2["rl_module"]["default_policy"][key]), np.asarray(weights[key]), err_msg=key
            )
        restored.train()
    finally:
        restored.stop()
    assert cli.main(["evaluate", path, "--episodes", "2", "--seed", "1"]) == 0
    assert "mean return" in capsys.readouterr().out
