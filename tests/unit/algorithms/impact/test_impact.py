"""IMPACTConfig: validate() rejects bad hyperparameters and accepts the ablations and every optimizer name."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.impact.impact import IMPACTConfig


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"target_worker_clipping": 0.5}, "target_worker_clipping"),
        ({"target_worker_clipping": 0.0}, "target_worker_clipping"),
        ({"target_worker_clipping": -2.0}, "target_worker_clipping"),
        ({"circular_buffer_iterations_per_batch": 0}, "circular_buffer_iterations_per_batch"),
        ({"circular_buffer_num_batches": 0}, "circular_buffer_num_batches"),
        ({"surrogate_ratio": "r7"}, "surrogate_ratio"),
        ({"optimizer": "adagrad-ish"}, "optimizer"),
        ({"target_network_update_freq": 0}, "target_network_update_freq"),
        ({"broadcast_interval": 0}, "broadcast_interval"),
        ({"lambda_": 1.5}, "lambda_"),
        ({"clip_param": 0.0}, "clip_param"),
        ({"standardize_advantages": "yes"}, "standardize_advantages"),
        ({"value_target": "td0"}, "value_target"),
        ({"vtrace_clip_c_threshold": 0.0}, "vtrace_clip_c_threshold"),
        ({"vtrace_clip_rho_threshold": -1.0}, "vtrace_clip_rho_threshold"),
        ({"vtrace_clip_pg_rho_threshold": 2.0}, "vtrace_clip_pg_rho_threshold.*no effect"),
    ],
)
def test_validate_rejects_bad_hyperparameters(overrides, match):
    config = IMPACTConfig().environment("CartPole-v1").training(**overrides)
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_validate_accepts_defaults_and_ablations():
    for ratio in ("r1", "r2", "r3"):
        IMPACTConfig().environment("CartPole-v1").training(surrogate_ratio=ratio).validate()
    assert IMPACTConfig().standardize_advantages is False  # the paper
    IMPACTConfig().environment("CartPole-v1").training(standardize_advantages=True).validate()
    config = IMPACTConfig()
    assert config.target_update_interval == 4 * 2  # n = N·K (§4.1.1)
    assert config.copy().training(target_network_update_freq=3).target_update_interval == 3


def test_every_registered_optimizer_name_validates_and_others_fail():
    from rllib_ext.optim import OPTIMIZERS

    for name in OPTIMIZERS:
        IMPACTConfig().environment("CartPole-v1").training(optimizer=name.upper()).validate()
    with pytest.raises(ValueError, match="optimizer.*'adamw'"):
        IMPACTConfig().environment("CartPole-v1").training(optimizer="adamw").validate()
    with pytest.raises(ValueError, match="optimizer_kwargs"):
        IMPACTConfig().environment("CartPole-v1").training(optimizer_kwargs=[0.9]).validate()
