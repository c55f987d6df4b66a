"""AESRLConfig: bad input is one clear error; Table 5 values resolve per env."""

import pytest

from rllib_ext.algorithms.aesrl.aesrl import AESRLConfig


@pytest.mark.parametrize(
    "env, settings, match",
    [
        ("CartPole-v1", {}, "continuous"),
        ("Pendulum-v1", {"observation_filter": True}, "observation_filter"),
        ("Pendulum-v1", {"variance_rule": "elite"}, "elite"),
        ("Pendulum-v1", {"mean_rule": "bogus"}, "mean_rule"),
        ("Pendulum-v1", {"sigma_init": 0.0}, "sigma_init"),
        ("Pendulum-v1", {"p_desired": 1.5}, "p_desired"),
        ("Pendulum-v1", {"tau": 0.0}, "tau"),
        ("Pendulum-v1", {"critic_min_steps_per_env_step": 2.0}, "critic_min_steps_per_env_step"),
        ("Pendulum-v1", {"common_random_numbers": True}, "common_random_numbers"),
        ("Pendulum-v1", {"cem_variance": "printed"}, "cem_variance"),
    ],
)
def test_aesrl_bad_input_is_one_clear_error(env, settings, match):
    cfg = AESRLConfig().environment(env).training(**{"fixed_range": 250.0, "fitness_baseline": 250.0, **settings})
    with pytest.raises(ValueError, match=match):
        cfg.validate()


def test_table_5_values_resolve_per_env():
    from rllib_ext.algorithms.aesrl.aesrl import TABLE_5

    cfg = AESRLConfig().environment("Hopper-v5")
    assert cfg.effective_fixed_range == TABLE_5["Hopper"] == 600.0
    assert cfg.effective_fitness_baseline == 600.0 and cfg.effective_p_desired == 0.5
    cfg.training(mean_rule="baseline_absolute")
    assert cfg.effective_fitness_baseline == -600.0
    assert AESRLConfig().environment("Swimmer-v5").effective_p_desired == 0.1
    with pytest.raises(ValueError, match="Table 5"):
        AESRLConfig().environment("Pendulum-v1").validate()  # no Table 5 value: must be set


def test_cem_variance_reaches_the_rank_rule():
    import numpy as np

    cfg = AESRLConfig().environment("Hopper-v5").training(mean_rule="rank", variance_rule="elite")
    assert cfg.make_population(np.zeros(3)).cem_variance == "reference"
    assert cfg.training(cem_variance="eq2").make_population(np.zeros(3)).cem_variance == "eq2"
