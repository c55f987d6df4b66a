"""DDPG_EXT and NAF_EXT (paper 003): NAF's Q is maximal at a = m, validate(), 2 iterations,
checkpoint round trip (networks, target networks, β, t), `rllib evaluate` on the checkpoint."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rllib_ext import cli
from rllib_ext.algorithms.ddpg.ddpg import DDPG, DDPGConfig
from rllib_ext.algorithms.naf.naf import NAF, NAFConfig


def test_naf_q_is_maximal_at_the_mean():
    from rllib_ext.algorithms.naf.naf_rl_module import NAFTorchRLModule

    torch.manual_seed(0)
    m = NAFTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (4,)), action_space=gym.spaces.Box(-1, 1, (3,)), model_config={}
    )
    obs = torch.randn(16, 4)
    with torch.no_grad():
        for p in m.net[-1].parameters():  # a non-trivial L, V and m
            p.add_(torch.randn_like(p))
        v, mean, L = m.naf_outputs(obs)
        assert torch.all(torch.triu(L, diagonal=1) == 0) and torch.all(torch.diagonal(L, dim1=1, dim2=2) > 0)
        q_at_mean = m.q_value(v, mean, L, mean)
        torch.testing.assert_close(q_at_mean, v)  # Eq. (4): Q(s, m) = V(s)
        for _ in range(20):
            a = mean + torch.randn_like(mean)
            assert torch.all(m.q_value(v, mean, L, a) < q_at_mean)
    a = mean.clone().requires_grad_(True)
    m.q_value(v, mean, L, a).sum().backward()
    assert a.grad.abs().max() < 1e-6  # stationary at a = m


def test_ddpg_policy_is_tanh_bounded_and_ou_only_without_refer():
    from rllib_ext.algorithms.ddpg.ddpg_rl_module import DDPGTorchRLModule

    assert DDPGConfig().training(replay_mode="er").model_config["ou_noise"] is True
    assert DDPGConfig().model_config["ou_noise"] is False
    m = DDPGTorchRLModule(
        observation_space=gym.spaces.Box(-1, 1, (3,)), action_space=gym.spaces.Box(-1, 1, (2,)), model_config={"ou_noise": True}
    )
    with torch.no_grad():
        for p in m.actor[-1].parameters():
            p.add_(10.0)
        assert m.policy_mean(torch.randn(8, 3)).abs().max() <= 1.0
        out = m.forward_exploration({"obs": torch.randn(8, 3)})
    assert out["actions"].shape == (8, 2)  # OU noise acts directly


@pytest.mark.parametrize("config_cls", [DDPGConfig, NAFConfig])
@pytest.mark.parametrize(
    "setting,value", [("tau", 0.0), ("exploration_sigma", 0.0), ("refer_C", 0.0), ("refer_D", 1.5), ("replay_mode", "x")]
)
def test_validate(config_cls, setting, value):
    with pytest.raises(ValueError, match=setting):
        config_cls().environment("Pendulum-v1").training(**{setting: value}).validate()


def test_ddpg_validate_learning_rates():
    with pytest.raises(ValueError, match="actor_lr"):
        DDPGConfig().environment("Pendulum-v1").training(actor_lr=0.0).validate()


def test_paper_defaults():
    d, n = DDPGConfig(), NAFConfig()
    assert (d.actor_lr, d.critic_lr, d.critic_weight_decay, d.train_batch_size_per_learner, d.tau) == (1e-5, 1e-4, 1e-4, 128, 0.01)
    assert (n.lr, n.train_batch_size_per_learner, n.tau, n.exploration_sigma, n.gamma) == (1e-4, 256, 0.01, 0.2, 0.995)


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
        main = targets[0][len("target_"):]
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
            np.testing.assert_array_equal(np.asarray(state2["rl_module"]["default_policy"][key]), np.asarray(weights[key]), err_msg=key)
        restored.train()
    finally:
        restored.stop()
    assert cli.main(["evaluate", path, "--episodes", "2", "--seed", "1"]) == 0
    assert "mean return" in capsys.readouterr().out
