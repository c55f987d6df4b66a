"""Every registered name is usable through Tune, the CLI and its Config; registration is idempotent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import rllib_ext
from rllib_ext import cli, registry

NAMES = sorted(registry.ALGORITHMS)


def test_registry_entries_are_well_formed():
    for name, spec in registry.ALGORITHMS.items():
        assert spec.name == name
        for path in (spec.algo_path, spec.config_path):
            module, _, attr = path.partition(":")
            assert module.startswith("rllib_ext.algorithms.") and attr, path
        assert set(spec.paper.replace(" ", "").split(",")) <= {"000", "001", "002", "003", "004"}, spec.paper
        assert spec.summary
    assert not registry.import_errors(), registry.import_errors()


def test_every_listed_name_resolves_with_get_trainable_cls(ray_session, capsys):
    from ray.tune.registry import get_trainable_cls

    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out
        cls = get_trainable_cls(name)
        assert cls is registry.get_algorithm_class(name)
    for name in ("PPO", "APPO", "IMPALA", "SAC"):  # RLlib's built-ins still resolve side by side
        assert name in out
        assert get_trainable_cls(name).__name__ in (name, "Impala")
        assert cli.resolve_algorithm(name) is get_trainable_cls(name)


@pytest.mark.parametrize("name", NAMES)
def test_config_with_algo_class_name_and_lazy_export(name):
    config_cls = registry.get_config_class(name)
    assert getattr(rllib_ext, config_cls.__name__) is config_cls
    config = config_cls(algo_class=name)
    assert config.algo_class == name


def test_register_all_is_idempotent(ray_session):
    from ray.tune.registry import TRAINABLE_CLASS, _global_registry

    assert registry.register_all() == []
    assert registry.register_all() == []
    for name in NAMES:
        assert _global_registry.contains(TRAINABLE_CLASS, name)


def test_names_and_envs_survive_a_ray_restart():
    """Tune's registry is per Ray job: our post-init hook must re-register after shutdown/init."""
    code = textwrap.dedent(
        """
        import ray, rllib_ext
        from rllib_ext import registry
        from ray.tune.registry import ENV_CREATOR, TRAINABLE_CLASS, _global_registry, get_trainable_cls
        for _ in range(2):
            ray.init(num_cpus=1, include_dashboard=False)
            for name in registry.ALGORITHMS:
                assert get_trainable_cls(name) is registry.get_algorithm_class(name), name
            for env_id in registry.ENVS:
                assert _global_registry.contains(ENV_CREATOR, env_id), env_id
            ray.shutdown()
        print("OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


def test_registered_env_builds_on_remote_env_runners(ray_session):
    """An env registered by rllib_ext is found by env runners that never imported rllib_ext."""
    from ray.rllib.algorithms.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment("rllib_ext/VariableLength-v0", env_config={"min_len": 4, "max_len": 4})
        .env_runners(num_env_runners=1)
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        assert result["env_runners"]["episode_len_mean"] == 4
    finally:
        algo.stop()


@pytest.mark.parametrize("name", NAMES)
def test_torch_num_threads_setting_reaches_the_learner(name):
    """A config that offers ``torch_num_threads`` has a learner that applies it, before building."""
    import torch

    from rllib_ext.common.threads import TorchThreadsLearner

    config = registry.get_config_class(name)()
    if not hasattr(config, "torch_num_threads"):
        pytest.skip(f"{name} has no learner-side torch work to size")
    learner_cls = config.get_default_learner_class()
    assert issubclass(learner_cls, TorchThreadsLearner), learner_cls

    class Built:
        def build(self):
            self.threads_at_build = torch.get_num_threads()

    class Learner(TorchThreadsLearner, Built):
        pass

    before = torch.get_num_threads()
    learner = Learner()
    learner.config = config.training(torch_num_threads=1)
    try:
        torch.set_num_threads(3)  # not already 1, so the assertion below can fail
        learner.build()
        assert learner.threads_at_build == 1
    finally:
        torch.set_num_threads(before)
