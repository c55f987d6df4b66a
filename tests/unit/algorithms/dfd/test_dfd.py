"""DFDConfig: invalid settings fail validate()."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.dfd.dfd import DFDConfig


def small_config(**training):
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], "noise_stdev": 0.1, **training}
    return (
        DFDConfig()
        .environment("rllib_ext/VariableLength-v0", env_config={"min_len": 10, "max_len": 30})
        .env_runners(num_env_runners=2)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


@pytest.mark.parametrize(
    "training,match",
    [
        ({"u_max": 0}, "u_max"),
        ({"sampler": "orthogonal"}, "samplers"),
        ({"return_shaping": "centered_rank"}, "standardize"),
        ({"noise_stdev": 0}, "noise_stdev"),
        ({"episodes_per_batch": 0}, "episodes_per_batch"),
        ({"optimizer": "rmsprop"}, "optimizer"),
    ],
)
def test_invalid_settings_fail_validate(training, match):
    with pytest.raises(ValueError, match=match):
        small_config(**training).validate()
