"""ESConfig: invalid hyperparameters fail validate(), and the CLI reports them before Ray starts."""

from __future__ import annotations

import pytest

from rllib_ext import ESConfig, cli

VAR_ENV = "rllib_ext/VariableLength-v0"


def small_config(env=VAR_ENV, env_config=None, runners=1, **training):
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], **training}
    return (
        ESConfig()
        .environment(env, env_config={"min_len": 5, "max_len": 15} if env_config is None else env_config)
        .env_runners(num_env_runners=runners)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


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
        small_config(**training).validate()


def test_cli_rejects_invalid_sigma_before_ray(capsys):
    rc = cli.main(["train", "--algo", "ES_EXT", "--env", "CartPole-v1", "--config", '{"noise_stdev": 0}'])
    assert rc == cli.USAGE_ERROR
    assert "noise_stdev" in capsys.readouterr().err
