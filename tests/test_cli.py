"""The `rllib` command: bad input fails fast and clearly; train/evaluate/plot work end to end."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rllib_ext import cli, registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPO_SMALL = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}


def run_cli_subprocess(args, timeout=120):
    """Runs `rllib ARGS` in a fresh interpreter; reports whether Ray got started."""
    code = textwrap.dedent(
        f"""
        import sys, ray
        from rllib_ext.cli import main
        rc = main({list(args)!r})
        print("RAY_STARTED=" + str(ray.is_initialized()))
        sys.exit(rc)
        """
    )
    env = dict(os.environ, RAY_AIR_NEW_OUTPUT="0")
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


def assert_clean_error(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rllib: error:")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert "RAY_STARTED=True" not in proc.stdout


# ------------------------------------------------------------------------------------------
# Bad input: one line, non-zero exit, no Ray started.
# ------------------------------------------------------------------------------------------
def test_unknown_algorithm_lists_known_names_exit_2_no_ray():
    proc = run_cli_subprocess(["train", "--algo", "NOPE_EXT", "--env", "CartPole-v1"])
    assert_clean_error(proc, "unknown algorithm 'NOPE_EXT'", "PPO", "APPO")
    for name in registry.ALGORITHMS:
        assert name in proc.stderr
    assert "RAY_STARTED=False" in proc.stdout


BAD_INPUTS = [
    (["train", "--algo", "PPO", "--env", "NoSuchEnv-v9"], ["unknown environment 'NoSuchEnv-v9'"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", "{lr: 1}"], ["--config is not valid JSON"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", "[1, 2"], ["--stop is not valid JSON"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", "[1, 2]"], ["--stop must be a JSON object"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"timesteps_total": "1e5"}'],
     ["--stop", "'num_env_steps_sampled_lifetime' must be a number", "'1e5'"]),
    (["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", '{"lrr": 0.1}'], ["no config key 'lrr'", "'lr'"]),
    (["evaluate", "/definitely/not/a/checkpoint"], ["checkpoint path does not exist"]),
    (["plot", "/definitely/not/a/run"], ["run directory does not exist"]),
]


@pytest.mark.parametrize("args,fragments", BAD_INPUTS, ids=[" ".join(a[:2]) + f"-{i}" for i, (a, _) in enumerate(BAD_INPUTS)])
def test_bad_input_is_one_clear_error(args, fragments):
    assert_clean_error(run_cli_subprocess(args), *fragments)


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("exp:\n  env: CartPole-v1\n  stop: {training_iteration: 1}\n", "has no 'run'"),
        ("exp:\n  run: PPO\n  stop: {training_iteration: 1}\n", "has no 'env'"),
        ("exp: [1, 2\n", "not valid YAML"),
        ("- just\n- a list\n", "must map an experiment name"),
        ("exp:\n  run: PPO\n  env: CartPole-v1\n  stop: {training_iteration: true}\n", "'training_iteration' must be a number"),
        ("exp:\n  run: PPO\n  env: CartPole-v1\n  stop: 5\n", "'stop' must be a mapping"),
    ],
)
def test_bad_yaml_is_one_clear_error(tmp_path, content, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert_clean_error(run_cli_subprocess(["train", "file", str(path)]), fragment)


def test_invalid_hyperparameter_caught_by_validate_before_ray():
    # PPO's own validate(): minibatch larger than the train batch.
    proc = run_cli_subprocess(
        ["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", '{"train_batch_size": 64, "minibatch_size": 128}']
    )
    assert_clean_error(proc, "invalid config for PPO")


def test_more_env_runners_than_cpus_fails_fast_instead_of_hanging(ray_session):
    rc = cli.main(["train", "--algo", "PPO", "--env", "CartPole-v1", "--num-env-runners", "8"])
    assert rc == cli.USAGE_ERROR


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
    stop = cli.StopCriteria({"env_runners/episode_retrun_mean": 450, "env_runners/episode_return_mean": 500}, warn_after=3)
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


# ------------------------------------------------------------------------------------------
# End to end: train -> TensorBoard events, checkpoint -> evaluate, plot.
# ------------------------------------------------------------------------------------------
def read_tensorboard_scalars(trial_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = glob.glob(os.path.join(trial_dir, "events.out.tfevents.*"))
    assert files, f"no events.out.tfevents.* in {trial_dir}"
    acc = EventAccumulator(trial_dir)
    acc.Reload()
    # Tune logs each result at step = training_iteration.
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def trial_dirs(experiment_dir):
    return sorted(os.path.dirname(p) for p in glob.glob(os.path.join(experiment_dir, "*", "progress.csv")))


@pytest.fixture(scope="module")
def ppo_run(ray_session, tmp_path_factory):
    """`rllib train --algo PPO ... --checkpoint-at-end`, 2 iterations, once for this module."""
    storage = str(tmp_path_factory.mktemp("cli_runs"))
    rc = cli.main(
        [
            "train", "--algo", "PPO", "--env", "CartPole-v1",
            "--stop", '{"training_iteration": 2}',
            "--config", json.dumps(PPO_SMALL),
            "--num-env-runners", "1", "--seed", "1",
            "--storage-path", storage, "--name", "ppo_cli", "--checkpoint-at-end",
        ]
    )
    assert rc == 0
    return os.path.join(storage, "ppo_cli")


def test_train_writes_tensorboard_events_readable_by_tensorboard(ppo_run, capsys):
    (trial,) = trial_dirs(ppo_run)
    scalars = read_tensorboard_scalars(trial)
    assert scalars["ray/tune/iterations_since_restore"] == {1: 1.0, 2: 2.0}
    returns = scalars["ray/tune/env_runners/episode_return_mean"]
    assert sorted(returns) == [1, 2] and all(r > 0 for r in returns.values())
    assert scalars["ray/tune/num_env_steps_sampled_lifetime"][2] >= 2 * PPO_SMALL["train_batch_size"]


def test_train_prints_tensorboard_command_and_one_line_per_iteration(ray_session, storage_path, capsys):
    rc = cli.main(
        [
            "train", "--algo", "PPO", "--env", "rllib_ext/VariableLength-v0",
            "--stop", '{"training_iteration": 2}', "--config", json.dumps(PPO_SMALL),
            "--num-env-runners", "0", "--storage-path", storage_path, "--name", "printed",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    logdir = os.path.join(storage_path, "printed")
    assert out.count(f"tensorboard --logdir {logdir}") == 2  # at the start and at the end
    lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(lines) == 2 and "env steps" in lines[0] and "return" in lines[0]


def test_evaluate_checkpoint_from_checkpoint_at_end(ppo_run, capsys):
    rc = cli.main(["evaluate", ppo_run, "--episodes", "3", "--seed", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    assert len([line for line in out.splitlines() if line.startswith("episode ")]) == 3
    summary = [line for line in out.splitlines() if "mean return" in line]
    assert summary and float(summary[0].split("mean return ")[1].split()[0]) > 0


def test_evaluate_with_a_seed_is_reproducible_and_episodes_differ(ppo_run, capsys):
    def episode_lines():
        assert cli.main(["evaluate", ppo_run, "--episodes", "4", "--seed", "5"]) == 0
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("episode ")]

    first, second = episode_lines(), episode_lines()
    assert first == second
    # RLlib re-seeds at every sample(num_episodes=...) call; the CLI must not replay one episode.
    assert len({line.split(": ", 1)[1] for line in first}) > 1


def test_plot_writes_png(ppo_run, tmp_path):
    out = tmp_path / "curve.png"
    assert cli.main(["plot", ppo_run, "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plot_unknown_metric_is_a_clear_error(ppo_run, capsys):
    assert cli.main(["plot", ppo_run, "--metric", "no/such/metric"]) == cli.USAGE_ERROR
    assert "no values of 'no/such/metric'" in capsys.readouterr().err


def test_train_file_runs_a_tuned_example_with_command_line_overrides(ray_session, storage_path):
    path = os.path.join(REPO, "tuned_examples", "ppo", "cartpole-v1.yaml")
    rc = cli.main(
        [
            "train", "file", path, "--stop", '{"training_iteration": 1}',
            "--config", json.dumps(PPO_SMALL), "--storage-path", storage_path,
        ]
    )
    assert rc == 0
    (trial,) = trial_dirs(os.path.join(storage_path, "cartpole-ppo"))
    params = json.load(open(os.path.join(trial, "params.json")))
    assert params["train_batch_size"] == PPO_SMALL["train_batch_size"]  # from the command line
    assert params["num_epochs"] == PPO_SMALL["num_epochs"]  # the command line beats the file's 6
    assert params["lr"] == 0.0003  # from the file
    assert read_tensorboard_scalars(trial)["ray/tune/iterations_since_restore"] == {1: 1.0}


def test_tune_run_by_name_writes_readable_events(ray_session, storage_path):
    from ray import tune
    from ray.rllib.algorithms.ppo import PPOConfig

    config = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(**PPO_SMALL)
    tune.run("PPO", config=config.to_dict(), stop={"training_iteration": 2}, storage_path=storage_path,
             name="tune_run", verbose=0)
    (trial,) = trial_dirs(os.path.join(storage_path, "tune_run"))
    assert read_tensorboard_scalars(trial)["ray/tune/iterations_since_restore"] == {1: 1.0, 2: 2.0}


# ------------------------------------------------------------------------------------------
# Multi-node: a 2-node cluster, the CLI connects with --ray-address.
# ------------------------------------------------------------------------------------------
def test_train_against_a_two_node_cluster(tmp_path):
    script = textwrap.dedent(
        f"""
        import subprocess, sys
        from ray.cluster_utils import Cluster
        cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 1, "include_dashboard": False}})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "rllib_ext.cli", "train", "--algo", "PPO", "--env", "CartPole-v1",
                 "--stop", '{{"training_iteration": 1}}', "--config", '{json.dumps(PPO_SMALL)}',
                 "--num-env-runners", "1", "--ray-address", cluster.address,
                 "--storage-path", "{tmp_path}", "--name", "cluster"],
                capture_output=True, text=True, timeout=240)
            print(proc.stdout); print(proc.stderr, file=sys.stderr)
            sys.exit(proc.returncode)
        finally:
            cluster.shutdown()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "iter    1" in proc.stdout
    assert trial_dirs(os.path.join(tmp_path, "cluster"))


def test_config_at_file_reads_a_configs_yaml_block(tmp_path):
    path = tmp_path / "paper.yaml"
    path.write_text("paper: x\nconfig:\n  lr: 0.123\n  num_epochs: 3\n")
    assert cli.parse_json_dict(f"@{path}", "--config") == {"lr": 0.123, "num_epochs": 3}
    with pytest.raises(cli.CLIError, match="no such file"):
        cli.parse_json_dict("@/no/such.yaml", "--config")


def test_every_configs_yaml_is_accepted_by_its_algorithm():
    """configs/*.yaml hold the papers' tables: each key must exist on the algorithm's config."""
    import yaml

    configs = sorted(glob.glob(os.path.join(REPO, "configs", "*.yaml")))
    assert configs
    by_prefix = {spec.config_path.split(":")[0].split(".")[2]: name for name, spec in registry.ALGORITHMS.items()}
    for path in configs:
        block = cli.load_config_file(path, "--config")
        prefix = os.path.basename(path).split("_")[0].split(".")[0]
        name = by_prefix.get(prefix)
        if name is None:
            continue
        config = registry.get_config_class(name)()
        unknown = [k for k in block if not hasattr(config, config._translate_special_keys(k, warn_deprecated=False))]
        assert not unknown, f"{path}: {name} has no {unknown}"
        assert yaml.safe_load(open(path)).get("paper"), f"{path} should name its paper table"


def test_model_config_override_reaches_the_rl_module():
    from ray.rllib.algorithms.ppo import PPO

    config = cli.build_config(PPO, "CartPole-v1", {"model_config": {"fcnet_hiddens": [7, 5]}, "lr": 0.01})
    assert config.model_config["fcnet_hiddens"] == [7, 5] and config.lr == 0.01


def test_repeated_config_options_merge_in_order():
    merged = cli.parse_config_options([f"@{REPO}/configs/cemrl.yaml", '{"mode": "parallel", "population_size": 6}'])
    assert merged["mode"] == "parallel" and merged["population_size"] == 6 and merged["rl_population"] == 5
    assert cli.parse_config_options(None) == {}
