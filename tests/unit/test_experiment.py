"""rllib_ext.experiment, the library under the `rllib` command: stop criteria, config files, configs (no Ray)."""

from __future__ import annotations

import logging

import pytest

from rllib_ext import experiment


def test_stop_aliases_map_to_rllib_260_keys():
    assert experiment.normalize_stop({"episode_reward_mean": 1, "timesteps_total": 2, "x": 3}) == {
        "env_runners/episode_return_mean": 1,
        "num_env_steps_sampled_lifetime": 2,
        "x": 3,
    }


def test_stop_criteria_thresholds_on_nested_results_like_tunes_dict_rule():
    stop = experiment.StopCriteria({"episode_reward_mean": 450, "training_iteration": 10})  # old name mapped
    assert not stop("t", {"training_iteration": 1, "env_runners": {"episode_return_mean": 449.9}})
    assert stop("t", {"training_iteration": 2, "env_runners": {"episode_return_mean": 450.0}})
    assert stop("t", {"training_iteration": 10, "env_runners": {"episode_return_mean": 3.0}})
    assert not stop("t", {"training_iteration": 3})  # the return not reported yet: keep going
    assert not stop("t", {"training_iteration": 4, "env_runners": {"episode_return_mean": None}})


def test_stop_criteria_missing_key_one_short_warning_after_warn_after():
    lines = []
    stop = experiment.StopCriteria(
        {"env_runners/episode_retrun_mean": 450, "env_runners/episode_return_mean": 500},
        warn_after=3,
        warn=lines.append,
    )
    first = {"training_iteration": 1, "num_env_steps_sampled_lifetime": 0, "config": {"lr": 1e-3}}
    no_episodes_yet = {"training_iteration": 5, "env_runners": {"num_episodes_lifetime": 0}}
    later = {"training_iteration": 3, "env_runners": {"episode_return_mean": 20.0, "num_episodes_lifetime": 4}}
    assert not stop("t", first)  # async first iterations without episodes: no noise
    assert not stop("t", no_episodes_yet)
    assert lines == []
    assert not stop("t", later)
    assert not stop("t", {**later, "training_iteration": 4})
    # One line, only for the key never reported (the typo), naming the closest real key.
    assert len(lines) == 1, lines
    assert "stop criterion 'env_runners/episode_retrun_mean' is not in the results after 3 iterations" in lines[0]
    assert "closest result keys: env_runners/episode_return_mean" in lines[0]


def test_stop_criteria_warns_without_episodes_after_ten_times_warn_after(caplog):
    stop = experiment.StopCriteria({"no_such_metric": 1}, warn_after=2)  # no `warn`: the module's logger
    with caplog.at_level(logging.WARNING, logger=experiment.__name__):
        for it in range(1, 20):
            stop("t", {"training_iteration": it})
        assert caplog.messages == []
        stop("t", {"training_iteration": 20})
    assert caplog.messages == ["stop criterion 'no_such_metric' is not in the results after 20 iterations"]


def test_stop_criteria_key_seen_once_never_warns():
    lines = []
    stop = experiment.StopCriteria({"env_runners/episode_return_mean": 450}, warn_after=1, warn=lines.append)
    stop("t", {"training_iteration": 1, "env_runners": {"episode_return_mean": 10.0}})
    stop("t", {"training_iteration": 2, "env_runners": {}})  # an iteration without episodes
    assert lines == []


def test_config_at_file_reads_a_configs_yaml_block(tmp_path):
    path = tmp_path / "paper.yaml"
    path.write_text("paper: x\nconfig:\n  lr: 0.123\n  num_epochs: 3\n")
    assert experiment.parse_json_dict(f"@{path}", "--config") == {"lr": 0.123, "num_epochs": 3}
    with pytest.raises(experiment.ExperimentError, match="no such file"):
        experiment.parse_json_dict("@/no/such.yaml", "--config")


def test_model_config_override_reaches_the_rl_module():
    from ray.rllib.algorithms.ppo import PPO

    config = experiment.build_config(PPO, "CartPole-v1", {"model_config": {"fcnet_hiddens": [7, 5]}, "lr": 0.01})
    assert config.model_config["fcnet_hiddens"] == [7, 5] and config.lr == 0.01


def test_make_tuner_keeps_the_newest_checkpoints_it_is_told_to():
    import rllib_ext  # noqa: F401 - registers the algorithms
    from rllib_ext.algorithms.es.es import ESConfig

    tuner, _ = experiment.make_tuner(
        "ES_EXT", ESConfig().environment("CartPole-v1"), {}, checkpoint_freq=10, keep_checkpoints=2
    )
    checkpoints = tuner._local_tuner.get_run_config().checkpoint_config
    assert (checkpoints.checkpoint_frequency, checkpoints.num_to_keep) == (10, 2)
