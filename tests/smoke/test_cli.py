"""The `rllib` command end to end: train -> TensorBoard events, checkpoint -> evaluate, plot, clusters."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rllib_ext import cli
from rllib_ext.quiet import is_noise
from tests.helpers import REPO

PPO_SMALL = {"train_batch_size": 256, "minibatch_size": 64, "num_epochs": 1}


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
            "train",
            "--algo",
            "PPO",
            "--env",
            "CartPole-v1",
            "--stop",
            '{"training_iteration": 2}',
            "--config",
            json.dumps(PPO_SMALL),
            "--num-env-runners",
            "1",
            "--seed",
            "1",
            "--storage-path",
            storage,
            "--name",
            "ppo_cli",
            "--checkpoint-at-end",
        ]
    )
    assert rc == 0
    return os.path.join(storage, "ppo_cli")


def test_more_env_runners_than_cpus_fails_fast_instead_of_hanging(ray_session):
    rc = cli.main(["train", "--algo", "PPO", "--env", "CartPole-v1", "--num-env-runners", "8"])
    assert rc == cli.USAGE_ERROR


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
            "train",
            "--algo",
            "PPO",
            "--env",
            "rllib_ext/VariableLength-v0",
            "--stop",
            '{"training_iteration": 2}',
            "--config",
            json.dumps(PPO_SMALL),
            "--num-env-runners",
            "0",
            "--storage-path",
            storage_path,
            "--name",
            "printed",
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
            "train",
            "file",
            path,
            "--stop",
            '{"training_iteration": 1}',
            "--config",
            json.dumps(PPO_SMALL),
            "--storage-path",
            storage_path,
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
    tune.run(
        "PPO",
        config=config.to_dict(),
        stop={"training_iteration": 2},
        storage_path=storage_path,
        name="tune_run",
        verbose=0,
    )
    (trial,) = trial_dirs(os.path.join(storage_path, "tune_run"))
    assert read_tensorboard_scalars(trial)["ray/tune/iterations_since_restore"] == {1: 1.0, 2: 2.0}


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
    # The workers' last lines, which Ray prints as it disconnects, pass the noise filter too.
    noise = [line for line in (proc.stdout + proc.stderr).splitlines() if is_noise(line)]
    assert noise == [], "\n".join(noise)
