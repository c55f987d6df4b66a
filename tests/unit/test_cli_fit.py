"""The CLI fits an algorithm's env runners to the free CPUs unless the user chose a number."""

from __future__ import annotations

import pytest
import ray

from rllib_ext import cli, registry


def _config(name, env="CartPole-v1", **overrides):
    algo_cls = cli.resolve_algorithm(name)
    continuous = name not in ("IMPACT_EXT", "ES_EXT", "DFD_EXT", "CVES_EXT", "PPO", "APPO", "IMPALA")
    return algo_cls, cli.build_config(algo_cls, "Pendulum-v1" if continuous else env, overrides)


@pytest.fixture
def free_cpus(monkeypatch):
    """Pretends the cluster has N free CPUs (no Ray started)."""

    def set_free(n):
        monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": float(n)})

    return set_free


@pytest.mark.parametrize("name", sorted(registry.ALGORITHMS) + ["PPO", "APPO"])
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
