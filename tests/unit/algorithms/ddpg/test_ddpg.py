"""DDPGConfig: learning rates and paper 003 App. A defaults."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.ddpg.ddpg import DDPGConfig


def test_ddpg_validate_learning_rates():
    with pytest.raises(ValueError, match="actor_lr"):
        DDPGConfig().environment("Pendulum-v1").training(actor_lr=0.0).validate()


def test_paper_defaults():
    d = DDPGConfig()
    assert (d.actor_lr, d.critic_lr, d.critic_weight_decay, d.train_batch_size_per_learner, d.tau) == (
        1e-5,
        1e-4,
        1e-4,
        128,
        0.01,
    )
