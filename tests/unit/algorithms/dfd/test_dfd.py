"""DFDConfig: invalid settings fail validate()."""

from __future__ import annotations

import pytest

from tests.builders import small_dfd_config


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
        small_dfd_config(**training).validate()
