"""VRACERConfig: validate() and paper defaults."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.vracer.vracer import VRACERConfig


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
        ("per_beta", 1.5, "per_beta"),
        ("retrace_tolerance", 1.0, "retrace_tolerance"),
        ("retrace_tolerance", -1e-6, "retrace_tolerance"),
        ("per_beta_anneal_steps", 0, "per_beta_anneal_steps"),
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
