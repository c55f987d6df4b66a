"""rllib_ext.legacy: old RLlib config keys are renamed with a notice or rejected in one line."""

from __future__ import annotations

import pytest
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from rllib_ext import cli, experiment
from rllib_ext.legacy import RENAMED, REPLACED, OldKeyError, translate_old_keys


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_every_new_name_is_a_260_setting(old, new):
    config = AlgorithmConfig()
    assert hasattr(config, config._translate_special_keys(new, warn_deprecated=False)), new


def test_renames_with_one_notice_each_and_keeps_the_rest():
    notices = []
    out = translate_old_keys({"num_workers": 3, "num_envs_per_worker": 2, "lr": 0.1}, "x.yaml", notices.append)
    assert out == {"num_env_runners": 3, "num_envs_per_env_runner": 2, "lr": 0.1}
    assert len(notices) == 2 and all(n.startswith("x.yaml: ") for n in notices)
    assert "'num_envs_per_worker' is called 'num_envs_per_env_runner'" in notices[1]


def test_old_and_new_name_together_is_an_error():
    with pytest.raises(OldKeyError, match="both 'num_workers' and its RLlib 2.60 name 'num_env_runners'"):
        translate_old_keys({"num_workers": 1, "num_env_runners": 2}, "--config")


@pytest.mark.parametrize("old", sorted(REPLACED))
def test_keys_without_a_rename_name_their_replacement(old):
    with pytest.raises(OldKeyError, match=f"'{old}' is an old RLlib key.*; use "):
        translate_old_keys({old: 1}, "--config")


def test_the_old_model_dict_reaches_model_config():
    """RLlib 2.60's new API stack ignores `model`; the translation keeps the network setting."""
    config = experiment.build_config(
        experiment.resolve_algorithm("PPO"),
        "CartPole-v1",
        experiment.translate_config({"model": {"fcnet_hiddens": [16]}}, "--config"),
    )
    assert config.model_config["fcnet_hiddens"] == [16]


def _old_yaml(tmp_path, config_lines):
    path = tmp_path / "old.yaml"
    path.write_text("old:\n  run: PPO\n  env: CartPole-v1\n  stop: {training_iteration: 1}\n  config:\n" + config_lines)
    return str(path)


def test_old_yaml_with_a_rename_builds_with_one_notice_each(tmp_path, capsys):
    path = _old_yaml(tmp_path, "    num_envs_per_worker: 2\n    sgd_minibatch_size: 64\n")
    ((_, exp),) = experiment.load_experiments(path)
    notices = []
    overrides = experiment.translate_config(exp["config"], f"{path}: experiment 'old'", notice=notices.append)
    config = experiment.build_config(experiment.resolve_algorithm("PPO"), "CartPole-v1", overrides)
    assert config.num_envs_per_env_runner == 2 and config.minibatch_size == 64
    assert len(notices) == 2 and all(n.startswith(f"{path}: experiment 'old': ") for n in notices)
    assert experiment.translate_config(exp["config"], "x.yaml") == overrides  # no notice: silent
    assert capsys.readouterr().err == ""


def test_cli_prints_one_note_line_per_renamed_key(tmp_path, capsys):
    path = _old_yaml(tmp_path, "    num_envs_per_worker: 2\n")
    argv = ["train", "file", path, "--config", '{"num_workers": 1}', "--stop", '{"training_iteration": "x"}']
    assert cli.main(argv) == cli.USAGE_ERROR  # the stop criterion: checked after the config
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("rllib: note: --config: 'num_workers' is called 'num_env_runners'"), err
    assert err[1].startswith(f"rllib: note: {path}: experiment 'old': 'num_envs_per_worker' is called "), err
    assert err[2:] == [
        f"rllib: error: {path}: experiment 'old' stop (with --stop): 'training_iteration' must be a "
        "number (stop when the result reaches it), got 'x'"
    ], err


def test_cli_old_key_without_rename_is_one_error_line_before_ray(tmp_path, capsys):
    path = _old_yaml(tmp_path, "    timesteps_per_iteration: 1000\n")
    assert cli.main(["train", "file", path]) == cli.USAGE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"rllib: error: {path}: experiment 'old': 'timesteps_per_iteration' is an old RLlib key that 2.60's new "
        "API stack does not use; use min_sample_timesteps_per_iteration or min_train_timesteps_per_iteration"
    ]


def test_cli_deprecated_key_missing_from_the_table_is_one_line_not_a_traceback(capsys):
    """A key whose RLlib getter raises (not in our table) still gives one rllib: error: line."""
    assert "uses_new_env_runners" not in RENAMED and "uses_new_env_runners" not in REPLACED
    with pytest.raises(experiment.ExperimentError, match="'uses_new_env_runners' is no longer an RLlib 2.60 setting"):
        experiment.build_config(experiment.resolve_algorithm("PPO"), "CartPole-v1", {"uses_new_env_runners": True})
