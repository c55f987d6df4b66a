"""The CLI fits an algorithm's env runners to the free CPUs unless the user chose a number."""

from __future__ import annotations

import pytest
import ray

from rllib_ext import cli, registry

# An env each algorithm's default config accepts (AESRL_EXT's Table 5 has no Pendulum row).
ENVS = {"AESRL_EXT": "HalfCheetah-v5", "CEMRL_EXT": "Pendulum-v1", "TD3_EXT": "Pendulum-v1"}
ENVS.update({name: "Pendulum-v1" for name in ("VRACER_EXT", "DDPG_EXT", "NAF_EXT")})


def _config(name, **overrides):
    algo_cls = cli.resolve_algorithm(name)
    return algo_cls, cli.build_config(algo_cls, ENVS.get(name, "CartPole-v1"), overrides)


@pytest.fixture
def free_cpus(monkeypatch):
    """Pretends the cluster has N free CPUs (no Ray started)."""

    def set_free(n):
        monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": float(n)})

    return set_free


@pytest.mark.parametrize("name", sorted(registry.ALGORITHMS) + ["PPO"])
def test_every_algorithm_fits_a_2_core_machine(name, free_cpus, capsys):
    algo_cls, config = _config(name, num_env_runners=4)
    free_cpus(2)
    cli.fit_env_runners(name, algo_cls, config, explicit=False)
    assert 1 <= config.num_env_runners < 4
    assert cli.cpus_needed(algo_cls, config) <= 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"rllib: {name}: {config.num_env_runners} env runner(s) instead of 4 (4 would need ")
    assert "--num-env-runners N chooses" in line


def test_the_largest_number_that_fits_is_kept(free_cpus):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=8)
    free_cpus(5)
    cli.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False)
    assert cli.cpus_needed(algo_cls, config) <= 5
    config.env_runners(num_env_runners=config.num_env_runners + 1)
    assert cli.cpus_needed(algo_cls, config) > 5


def test_a_config_that_fits_is_left_alone_silently(free_cpus, capsys):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=2)
    free_cpus(16)
    cli.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False)
    assert config.num_env_runners == 2 and capsys.readouterr().err == ""


def test_an_explicit_request_is_not_fitted(free_cpus):
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=4)
    free_cpus(2)
    cli.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=True)
    assert config.num_env_runners == 4


@pytest.mark.parametrize(
    "values, explicit",
    [
        (None, False),
        (['{"lr": 0.1}'], False),
        (['{"num_env_runners": 3}'], True),
        (['{"num_workers": 3}'], True),
        (["@configs/dfd.yaml"], False),
    ],
)
def test_explicit_env_runners_reads_json_not_files(values, explicit):
    assert cli.explicit_env_runners(values) is explicit


def test_when_one_runner_does_not_fit_the_error_says_so(free_cpus, monkeypatch, capsys):
    """RLlib's APPO needs 3 CPUs with one env runner; fitting cannot help on 2 cores."""
    algo_cls, config = _config("APPO", num_env_runners=4)
    free_cpus(2)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    cli.fit_env_runners("APPO", algo_cls, config, explicit=False)
    assert config.num_env_runners == 4 and capsys.readouterr().err == ""
    with pytest.raises(
        cli.CLIError, match=r"APPO needs at least 3 CPUs \(with 1 env runner\) but the Ray cluster has 2"
    ):
        cli.check_resources(algo_cls, config)


def test_cpus_still_held_fall_back_to_the_cluster_total(free_cpus, monkeypatch, capsys):
    """Right after another run, its actors may still hold CPUs: fit the total, Tune waits for them."""
    algo_cls, config = _config("IMPACT_EXT", num_env_runners=2)
    free_cpus(1)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    cli.fit_env_runners("IMPACT_EXT", algo_cls, config, explicit=False)
    assert config.num_env_runners == 1
    assert "the cluster has 2 in all, 1 free now;" in capsys.readouterr().err


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
    with pytest.raises(cli.CLIError, match=rf"{algo_cls.__name__} asks for 1 GPUs .* the Ray cluster has 0"):
        cli.check_resources(algo_cls, config)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})
    cli.check_resources(algo_cls, config)
