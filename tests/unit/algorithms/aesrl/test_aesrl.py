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
        # `lr` is not TD3's rate (actor_lr, critic_lr): a silent no-op.
        ("Pendulum-v1", {"lr": 0.1}, "`lr` = 0.1 has no effect in AESRL_EXT .*black-box ES setting"),
        ("Pendulum-v1", {"noise_stdev": 0.05, "eval_episodes": 3}, "`noise_stdev` = 0.05 .*; `eval_episodes` = 3"),
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
    assert AESRLConfig().environment("gymnasium/HalfCheetah-v5").effective_fitness_baseline == 2000.0


def test_table_5_matches_the_exact_task_not_a_prefix():
    """HumanoidStandup is not Humanoid (review B5): no Table 5 entry, so the adaptive scale."""
    assert AESRLConfig().environment("Humanoid-v5").effective_fitness_baseline == 960.0
    standup = AESRLConfig().environment("HumanoidStandup-v5")
    assert standup.effective_fitness_baseline == "adaptive" and standup.effective_fixed_range == "adaptive"
    assert AESRLConfig().environment("AntMaze-v4").effective_fixed_range == "adaptive"
    assert AESRLConfig().environment("Swimmer2-v5").effective_p_desired == 0.5


def test_defaults_validate_on_an_env_without_a_table_5_entry():
    """`rllib train --algo AESRL_EXT --env Pendulum-v1` with defaults: the adaptive scale (ours), no error."""
    import numpy as np

    cfg = AESRLConfig().environment("Pendulum-v1")
    cfg.validate()
    pop = cfg.make_population(np.zeros(3))
    assert pop.fitness_baseline == "adaptive" and pop.fixed_range == "adaptive"
    # The absolute rule needs a return level: one clear error naming the setting, before any actor.
    with pytest.raises(ValueError, match="fitness_baseline .*Table 5"):
        AESRLConfig().environment("Pendulum-v1").training(mean_rule="baseline_absolute").validate()
    with pytest.raises(ValueError, match="fitness_baseline is 'adaptive'"):
        AESRLConfig().environment("Hopper-v5").training(
            mean_rule="baseline_absolute", fitness_baseline="adaptive"
        ).validate()
    for bad in ({"fixed_range": "big"}, {"fixed_range": -1.0}, {"adaptive_scale_window": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            AESRLConfig().environment("Pendulum-v1").training(**bad).validate()


def test_a_zero_absolute_baseline_is_kept():
    """f_b = 0 is a valid absolute baseline (Eq. 9); it used to become 1.0 (review B2, `or 1.0`)."""
    import numpy as np

    cfg = AESRLConfig().environment("Hopper-v5").training(mean_rule="baseline_absolute", fitness_baseline=0.0)
    cfg.validate()
    pop = cfg.make_population(np.zeros(2))
    assert pop.fitness_baseline == 0.0
    pop.f_mu = 100.0
    assert pop.tell(np.ones(2), 300.0) == pytest.approx(300.0 / (100.0 + 300.0))  # Eq. (9) with f_b = 0


def test_cem_variance_reaches_the_rank_rule():
    import numpy as np

    cfg = AESRLConfig().environment("Hopper-v5").training(mean_rule="rank", variance_rule="elite")
    assert cfg.make_population(np.zeros(3)).cem_variance == "reference"
    assert cfg.training(cem_variance="eq2").make_population(np.zeros(3)).cem_variance == "eq2"
