"""ESConfig: invalid hyperparameters fail validate(), and the CLI reports them before Ray starts."""

from __future__ import annotations

import pytest

from rllib_ext import cli
from tests.builders import small_es_config


@pytest.mark.parametrize(
    "training,match",
    [
        ({"noise_stdev": 0.0}, "noise_stdev"),
        ({"noise_stdev": -1.0}, "noise_stdev"),
        ({"episodes_per_batch": 0}, "episodes_per_batch"),
        ({"episodes_per_batch": 7}, "must be even"),
        ({"sampler": "sobol"}, "sampler"),
        ({"optimizer": "adamw"}, "optimizer"),
        ({"return_shaping": "rank"}, "return_shaping"),
        ({"perturbations_per_call": 0}, "perturbations_per_call"),
        ({"obs_clip": -5.0}, "obs_clip"),
    ],
)
def test_invalid_hyperparameters_fail_validate(training, match):
    with pytest.raises(ValueError, match=match):
        small_es_config(**training).validate()


def test_cli_rejects_invalid_sigma_before_ray(capsys):
    rc = cli.main(["train", "--algo", "ES_EXT", "--env", "CartPole-v1", "--config", '{"noise_stdev": 0}'])
    assert rc == cli.USAGE_ERROR
    assert "noise_stdev" in capsys.readouterr().err
