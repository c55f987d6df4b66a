"""The registry on Ray: names resolve through Tune, registration is idempotent and survives a restart,
envs build on remote runners."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from rllib_ext import cli, experiment, registry

NAMES = sorted(registry.ALGORITHMS)


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
        assert experiment.resolve_algorithm(name) is get_trainable_cls(name)


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
