"""The `rllib` command's parsing and validation: bad input is one line, exit 2, and Ray never starts."""

from __future__ import annotations

import pytest

from rllib_ext import cli, registry
from tests.helpers import REPO, assert_clean_error, run_cli_batch

UNKNOWN_ALGORITHM = ["train", "--algo", "NOPE_EXT", "--env", "CartPole-v1"]
# PPO's own validate(): minibatch larger than the train batch.
INVALID_HYPERPARAMETER = [
    "train",
    "--algo",
    "PPO",
    "--env",
    "CartPole-v1",
    "--config",
    '{"train_batch_size": 64, "minibatch_size": 128}',
]
BAD_INPUTS = [
    (["train", "--algo", "PPO", "--env", "NoSuchEnv-v9"], ["unknown environment 'NoSuchEnv-v9'"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", "{lr: 1}"], ["--config is not valid JSON"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", "[1, 2"], ["--stop is not valid JSON"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", "[1, 2]"], ["--stop must be a JSON object"]),
    (
        ["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"timesteps_total": "1e5"}'],
        ["--stop", "'num_env_steps_sampled_lifetime' must be a number", "'1e5'"],
    ),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", '{"lrr": 0.1}'], ["no config key 'lrr'", "'lr'"]),
    (["evaluate", "/definitely/not/a/checkpoint"], ["checkpoint path does not exist"]),
    (["plot", "/definitely/not/a/run"], ["run directory does not exist"]),
]
BAD_YAML = [
    ("exp:\n  env: CartPole-v1\n  stop: {training_iteration: 1}\n", "has no 'run'"),
    ("exp:\n  run: PPO\n  stop: {training_iteration: 1}\n", "has no 'env'"),
    ("exp: [1, 2\n", "not valid YAML"),
    ("- just\n- a list\n", "must map an experiment name"),
    (
        "exp:\n  run: PPO\n  env: CartPole-v1\n  stop: {training_iteration: true}\n",
        "'training_iteration' must be a number",
    ),
    ("exp:\n  run: PPO\n  env: CartPole-v1\n  stop: 5\n", "'stop' must be a mapping"),
]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every bad command line of this module, run once in one fresh interpreter."""
    folder = tmp_path_factory.mktemp("bad_yaml")
    yaml_cases = []
    for i, (content, _) in enumerate(BAD_YAML):
        path = folder / f"bad{i}.yaml"
        path.write_text(content)
        yaml_cases.append(["train", "file", str(path)])
    procs = run_cli_batch([UNKNOWN_ALGORITHM, INVALID_HYPERPARAMETER, *[args for args, _ in BAD_INPUTS], *yaml_cases])
    n = len(BAD_INPUTS)
    return {"unknown": procs[0], "invalid": procs[1], "inputs": procs[2 : 2 + n], "yaml": procs[2 + n :]}


def test_unknown_algorithm_lists_known_names_exit_2_no_ray(bad_runs):
    proc = bad_runs["unknown"]
    assert_clean_error(proc, "unknown algorithm 'NOPE_EXT'", "PPO", "APPO")
    for name in registry.ALGORITHMS:
        assert name in proc.stderr
    assert "RAY_STARTED=False" in proc.stdout


@pytest.mark.parametrize(
    "i", range(len(BAD_INPUTS)), ids=[" ".join(a[:2]) + f"-{i}" for i, (a, _) in enumerate(BAD_INPUTS)]
)
def test_bad_input_is_one_clear_error(bad_runs, i):
    assert_clean_error(bad_runs["inputs"][i], *BAD_INPUTS[i][1])


@pytest.mark.parametrize("i", range(len(BAD_YAML)), ids=[fragment for _, fragment in BAD_YAML])
def test_bad_yaml_is_one_clear_error(bad_runs, i):
    assert_clean_error(bad_runs["yaml"][i], BAD_YAML[i][1])


def test_invalid_hyperparameter_caught_by_validate_before_ray(bad_runs):
    assert_clean_error(bad_runs["invalid"], "invalid config for PPO")


def test_stop_aliases_map_to_rllib_260_keys():
    assert cli.normalize_stop({"episode_reward_mean": 1, "timesteps_total": 2, "x": 3}) == {
        "env_runners/episode_return_mean": 1,
        "num_env_steps_sampled_lifetime": 2,
        "x": 3,
    }


def test_stop_criteria_thresholds_on_nested_results_like_tunes_dict_rule():
    stop = cli.StopCriteria({"episode_reward_mean": 450, "training_iteration": 10})  # old name mapped
    assert not stop("t", {"training_iteration": 1, "env_runners": {"episode_return_mean": 449.9}})
    assert stop("t", {"training_iteration": 2, "env_runners": {"episode_return_mean": 450.0}})
    assert stop("t", {"training_iteration": 10, "env_runners": {"episode_return_mean": 3.0}})
    assert not stop("t", {"training_iteration": 3})  # the return not reported yet: keep going
    assert not stop("t", {"training_iteration": 4, "env_runners": {"episode_return_mean": None}})


def test_stop_criteria_missing_key_one_short_warning_after_warn_after(capsys):
    stop = cli.StopCriteria(
        {"env_runners/episode_retrun_mean": 450, "env_runners/episode_return_mean": 500}, warn_after=3
    )
    first = {"training_iteration": 1, "num_env_steps_sampled_lifetime": 0, "config": {"lr": 1e-3}}
    no_episodes_yet = {"training_iteration": 5, "env_runners": {"num_episodes_lifetime": 0}}
    later = {"training_iteration": 3, "env_runners": {"episode_return_mean": 20.0, "num_episodes_lifetime": 4}}
    assert not stop("t", first)  # async first iterations without episodes: no noise
    assert not stop("t", no_episodes_yet)
    assert capsys.readouterr().err == ""
    assert not stop("t", later)
    assert not stop("t", {**later, "training_iteration": 4})
    err = capsys.readouterr().err.strip().splitlines()
    # One line, only for the key never reported (the typo), naming the closest real key.
    assert len(err) == 1, err
    assert "stop criterion 'env_runners/episode_retrun_mean' is not in the results after 3 iterations" in err[0]
    assert "closest result keys: env_runners/episode_return_mean" in err[0]


def test_stop_criteria_warns_without_episodes_after_ten_times_warn_after(capsys):
    stop = cli.StopCriteria({"no_such_metric": 1}, warn_after=2)
    for it in range(1, 20):
        stop("t", {"training_iteration": it})
    assert capsys.readouterr().err == ""
    stop("t", {"training_iteration": 20})
    assert "stop criterion 'no_such_metric' is not in the results after 20 iterations" in capsys.readouterr().err


def test_stop_criteria_key_seen_once_never_warns(capsys):
    stop = cli.StopCriteria({"env_runners/episode_return_mean": 450}, warn_after=1)
    stop("t", {"training_iteration": 1, "env_runners": {"episode_return_mean": 10.0}})
    stop("t", {"training_iteration": 2, "env_runners": {}})  # an iteration without episodes
    assert capsys.readouterr().err == ""


def test_config_at_file_reads_a_configs_yaml_block(tmp_path):
    path = tmp_path / "paper.yaml"
    path.write_text("paper: x\nconfig:\n  lr: 0.123\n  num_epochs: 3\n")
    assert cli.parse_json_dict(f"@{path}", "--config") == {"lr": 0.123, "num_epochs": 3}
    with pytest.raises(cli.CLIError, match="no such file"):
        cli.parse_json_dict("@/no/such.yaml", "--config")


def test_model_config_override_reaches_the_rl_module():
    from ray.rllib.algorithms.ppo import PPO

    config = cli.build_config(PPO, "CartPole-v1", {"model_config": {"fcnet_hiddens": [7, 5]}, "lr": 0.01})
    assert config.model_config["fcnet_hiddens"] == [7, 5] and config.lr == 0.01


def test_repeated_config_options_merge_in_order():
    merged = cli.parse_config_options([f"@{REPO}/configs/cemrl.yaml", '{"mode": "parallel", "population_size": 6}'])
    assert merged["mode"] == "parallel" and merged["population_size"] == 6 and merged["rl_population"] == 5
    assert cli.parse_config_options(None) == {}


def test_output_piped_into_a_reader_that_stops_is_not_an_error():
    """`rllib list | head -1`: a reader that went away ends the command quietly, exit status 0."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write fails with EPIPE
    code = "import sys; from rllib_ext.cli import main; sys.exit(main(['list']))"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], stdout=write_end, stderr=subprocess.PIPE, cwd=REPO, text=True, timeout=120
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr


def test_the_cli_disconnects_only_a_ray_it_started(monkeypatch):
    """main() shuts Ray down inside the noise filter's window, but never a Ray it found running
    (a test session's, a notebook's)."""
    import ray

    calls = []
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append("init"))
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    cli.init_ray(None, 1)  # found running: reused
    cli.shutdown_ray()
    assert calls == []
    monkeypatch.setattr(ray, "is_initialized", lambda: bool(calls))
    cli.init_ray(None, 1)  # started here
    cli.shutdown_ray()
    cli.shutdown_ray()  # once only
    assert calls == ["init", "shutdown"]
