"""ReFERLearner (Algorithm 1's inner loop), built in-process without Ray: the schedules that
`_gradient_step` applies (PER's β; β's step and η(t) of Eq. 12-13), and Rule 1 in each of the
three losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig
from rllib_ext.algorithms.naf.naf import NAFConfig
from rllib_ext.algorithms.vracer.vracer import VRACERConfig
from tests.builders import refer_loss_gradients, small_refer_learner
from tests.replay_data import loss_batch, replay_episode


def _filled(learner, steps=40, seed=0):
    rng = np.random.default_rng(seed)
    learner.memory.add_episode(**replay_episode(steps, rng, d_s=3, d_a=2))
    return learner


def test_per_beta_reaches_one_over_the_horizon():
    """Schaul et al. (2016 §3.4): PER's β rises linearly from per_beta to 1, then stays 1."""
    learner = _filled(small_refer_learner(NAFConfig, replay_mode="per", per_beta=0.5, per_beta_anneal_steps=4))
    betas = []
    for _ in range(6):
        learner._gradient_step()
        betas.append(learner.memory.per_beta)
    np.testing.assert_allclose(betas, [0.5, 0.625, 0.75, 0.875, 1.0, 1.0])


@pytest.mark.parametrize(
    "config_cls,training",
    [
        (VRACERConfig, {"lr": 1e-3}),
        (VRACERConfig, {"lr": 1e-5}),
        (DDPGConfig, {}),  # actor_lr 1e-5
        (NAFConfig, {"lr": 1e-3}),
    ],
)
def test_beta_moves_by_the_fixed_rate_whatever_the_learning_rate(config_cls, training):
    """Eq. (12) with smarties' fixed step 1e-4: from β = 0.5 one gradient step moves β by
    0.5·1e-4 (down if n_far/N > D, up otherwise), independent of lr."""
    learner = _filled(small_refer_learner(config_cls, **training))
    learner.refer.beta = 0.5
    learner._gradient_step()
    assert abs(learner.refer.beta - 0.5) == pytest.approx(0.5e-4, rel=1e-9)


def test_beta_rate_none_uses_the_annealed_learning_rate():
    learner = _filled(small_refer_learner(VRACERConfig, lr=1e-3, refer_A=1e-2, refer_beta_rate=None))
    learner.refer.beta = 0.5
    learner._k = 100  # t = 100: η(t) = η/2 (Eq. 13)
    learner._gradient_step()
    assert abs(learner.refer.beta - 0.5) == pytest.approx(0.5 * 0.5e-3, rel=1e-9)


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
@pytest.mark.parametrize("mode", ["refer", "refer1", "er", "per"])
def test_learning_rate_is_annealed_only_with_refer(config_cls, mode):
    """Eq. (13) with ReF-ER; the ER/PER baselines keep η (paper 003 §5.1)."""
    learner = _filled(small_refer_learner(config_cls, replay_mode=mode, refer_A=1e-2))
    base = dict(learner._base_lrs)
    learner._k = 100  # A·t = 1
    learner._gradient_step()
    factor = 0.5 if mode in ("refer", "refer1") else 1.0
    for name, optimizer in learner._named_optimizers.items():
        assert optimizer.param_groups[0]["lr"] == pytest.approx(base[name] * factor)


#: The parameters that estimate values (V-RACER's V, DDPG's critic, NAF's V and L share ``net``).
VALUE_PARAMS = {VRACERConfig: "net.", DDPGConfig: "critic.", NAFConfig: "net."}


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
@pytest.mark.parametrize("mode", ["refer", "refer1", "er"])
def test_rule1_zeroes_the_gradients_of_far_policy_samples(config_cls, mode):
    """Rule 1 (§3, policy and value): the targets of far-policy samples (rewards, Q̂^ret, V̂^tbc)
    do not reach any gradient, the critic's included; without Rule 1 they do."""
    torch.manual_seed(0)
    learner = small_refer_learner(config_cls, replay_mode=mode)
    obs = torch.randn(6, 3)
    with torch.no_grad():
        mean, log_std = (
            learner.module[DEFAULT_MODULE_ID].forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS].chunk(2, -1)
        )
    batch = loss_batch(obs, mean, log_std.exp(), far=(0, 1))
    near = learner.rho_kl(batch, mean, log_std.exp())[2]
    assert near.tolist() == [False, False, True, True, True, True]

    def gradients(moved_rows=()):
        moved = dict(batch)
        for key in ("rewards", "q_ret", "v_tbc"):
            moved[key] = batch[key].clone()
            moved[key][list(moved_rows)] += 10.0
        return refer_loss_gradients(learner, moved, beta=0.5)[1]

    base, far_moved, near_moved = gradients(), gradients((0, 1)), gradients((2, 3))
    value = VALUE_PARAMS[config_cls]
    far_ignored = all(torch.equal(base[n], far_moved[n]) for n in base)
    assert far_ignored == (mode != "er")
    assert any(not torch.allclose(base[n], far_moved[n]) for n in base if n.startswith(value)) == (mode == "er")
    assert any(not torch.allclose(base[n], near_moved[n]) for n in base if n.startswith(value))


@pytest.mark.parametrize("config_cls", [VRACERConfig, DDPGConfig, NAFConfig])
def test_checkpoint_replay_puts_the_memory_in_the_learner_state(config_cls):
    """With checkpoint_replay the learner's state carries the RM (a resumed run samples the same
    memory); without, it does not (the default, as TD3_EXT's)."""
    without = _filled(small_refer_learner(config_cls))
    assert "memory" not in without.get_state()["refer"]
    learner = _filled(small_refer_learner(config_cls, checkpoint_replay=True), seed=4)
    learner.memory.reward_scale = 0.25
    state = learner.get_state()
    restored = small_refer_learner(config_cls, checkpoint_replay=True)
    assert len(restored.memory) == 0
    restored.set_state(state)
    assert len(restored.memory) == len(learner.memory) == 40 and restored.memory.reward_scale == 0.25
    np.testing.assert_array_equal(restored.memory.column("obs"), learner.memory.column("obs"))
    np.testing.assert_array_equal(restored.memory.sample(8)["idx"], learner.memory.sample(8)["idx"])
