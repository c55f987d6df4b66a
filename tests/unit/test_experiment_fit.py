"""rllib_ext.experiment fits an algorithm's env runners to the free CPUs unless the user chose a number;
the CLI says so in one line."""

from __future__ import annotations

import pytest
import ray

from rllib_ext import cli, experiment, registry

# An env each algorithm's default config accepts (AESRL_EXT's Table 5 has no Pendulum row).
ENVS = {"AESRL_EXT": "HalfCheetah-v5", "CEMRL_EXT": "Pendulum-v1", "TD3_EXT": "Pendulum-v1"}
ENVS.update({name: "Pendulum-v1" for name in ("VRACER_EXT", "DDPG_EXT", "NAF_EXT")})


def _config(name, **overrides):
    algo_cls = experiment.resolve_algorithm(name)
    return algo_cls, experiment.build_config(algo_cls, ENVS.get(name, "CartPole-v1"), overrides)


@pytest.fixture
def free_cpus(monkeypatch):
    """Pretends the cluster has N free CPUs (no Ray started)."""

    def set_free(n):
        monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": float(n)})

    return set_free


@pytest.mark.parametrize("name", sorted(registry.ALGORITHMS) + ["PPO"])
def test_every_algorithm_fits_a_2_core_machine(name, free_cpus):
    algo_cls, config = _config(name, num_env_runners=4)
    free_cpus(2)
    fit = experiment.fit_env_runners(name, algo_cls, config, explicit=False)
    assert 1 <= config.num_env_runners < 4 and (fit.wanted, fit.fitted) == (4, config.num_env_runners)
    assert experiment.cpus_needed(algo_cls, config) <= 2
    line = cli.describe_fit(name, fit)
    assert line.startswith(f"rllib: {name}: {config.num_env_runners} env runner(s) instead of 4 (4 would need ")
    assert "--num-env-runners N chooses" in line


def test_the_largest_number_that_fits_is_kept(free_cpus):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=8)
    free_cpus(5)
    experiment.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False)
    assert experiment.cpus_needed(algo_cls, config) <= 5
    config.env_runners(num_env_runners=config.num_env_runners + 1)
    assert experiment.cpus_needed(algo_cls, config) > 5


def test_a_config_that_fits_is_left_alone(free_cpus):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=2)
    free_cpus(16)
    assert experiment.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False) is None
    assert config.num_env_runners == 2


def test_an_explicit_request_is_not_fitted(free_cpus):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=4)
    free_cpus(2)
    assert experiment.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=True) is None
    assert config.num_env_runners == 4


def test_when_one_runner_does_not_fit_the_error_says_so(free_cpus, monkeypatch):
    """RLlib's APPO needs 3 CPUs with one env runner; fitting cannot help on 2 cores."""
    algo_cls, config = _config("APPO", num_env_runners=4)
    free_cpus(2)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    assert experiment.fit_env_runners("APPO", algo_cls, config, explicit=False) is None
    assert config.num_env_runners == 4
    with pytest.raises(
        experiment.ExperimentError, match=r"APPO needs at least 3 CPUs \(with 1 env runner\) but the Ray cluster has 2"
    ):
        experiment.check_resources(algo_cls, config)


def test_cpus_still_held_fall_back_to_the_cluster_total(free_cpus, monkeypatch):
    """Right after another run, its actors may still hold CPUs: fit the total, Tune waits for them."""
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=2)
    free_cpus(1)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    fit = experiment.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False)
    assert config.num_env_runners == 1 == fit.fitted
    assert "the cluster has 2 in all, 1 free now;" in cli.describe_fit("IMPACT_EXT", fit)


@pytest.mark.parametrize("name", ["AESRL_EXT", "CEMRL_EXT"])
def test_a_gpu_critic_on_a_cluster_without_gpus_is_one_error(name, monkeypatch):
    """critic_num_gpus is a bundle of the trial's placement group: without it, Tune would place the
    critic's GPU nowhere and wait forever; with no GPU in the cluster the CLI says so first."""
    algo_cls, config = _config(name, num_env_runners=1, critic_num_gpus=1, critic_num_cpus=1)
    assert algo_cls.default_resource_request(config).bundles[-1] == {"CPU": 1.0, "GPU": 1.0}
    assert algo_cls.default_resource_request(config.copy(copy_frozen=False).training(critic_num_gpus=0)).bundles[
        -1
    ] == {"CPU": 1.0}
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0})
    with pytest.raises(
        experiment.ExperimentError, match=rf"{algo_cls.__name__} asks for 1 GPUs .* the Ray cluster has 0"
    ):
        experiment.check_resources(algo_cls, config)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})
    experiment.check_resources(algo_cls, config)
