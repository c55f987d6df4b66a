"""The `rllib` command's parsing and validation: bad input is one line, exit 2, and Ray never starts."""

from __future__ import annotations

import pytest

from rllib_ext import cli, experiment, registry
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


def test_repeated_config_options_merge_in_order():
    merged = cli.parse_config_options([f"@{REPO}/configs/cemrl.yaml", '{"mode": "parallel", "population_size": 6}'])
    assert merged["mode"] == "parallel" and merged["population_size"] == 6 and merged["rl_population"] == 5
    assert cli.parse_config_options(None) == {}


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


def test_fitting_the_env_runners_is_one_line_on_stderr(monkeypatch, capsys):
    """`rllib train` without --num-env-runners on a 2-core machine: fitted, said once, then checked."""
    import ray

    algo_cls = experiment.resolve_algorithm("IMPACT_EXT")
    config = experiment.build_config(algo_cls, "CartPole-v1", {"num_env_runners": 4})
    monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    cli.fit_to_cluster("IMPACT_EXT", algo_cls, config, explicit=False)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"rllib: IMPACT_EXT: {config.num_env_runners} env runner(s) instead of 4 (4 would need ")
    assert line.endswith("the cluster has 2 free; --num-env-runners N chooses)")


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


def test_train_keeps_the_two_newest_checkpoints_by_default():
    from rllib_ext import cli

    args = cli.make_parser().parse_args(["train", "--algo", "ES_EXT", "--env", "CartPole-v1"])
    assert (args.checkpoint_freq, args.keep_checkpoints) == (cli.DEFAULT_CHECKPOINT_FREQ, 2)
    args = cli.make_parser().parse_args(
        ["train", "--algo", "ES_EXT", "--env", "CartPole-v1", "--keep-checkpoints", "0"]
    )
    assert args.keep_checkpoints == 0  # all (passed on as None)
