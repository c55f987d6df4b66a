"""``rllib train --resume``: a ``rllib train`` whose driver is killed goes on from its last checkpoint.

The driver is killed with SIGKILL (no chance to save anything) once Tune's experiment state
records a checkpoint; ``rllib train --resume EXPERIMENT_DIR`` then continues the trial from it:
the iteration and env-step counts go on from the checkpoint's, not from 0, and the saved stop
criteria still end the run.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

from rllib_ext import cli

STOP_AT = 8  # iterations; >= 1 s each (min_time_s_per_iteration), so the kill comes well before
CONFIG = {"policy_hiddens": [8], "episodes_per_batch": 4, "min_time_s_per_iteration": 1, "eval_episodes": 0}
WAIT_S = 180  # for the first checkpoint to be recorded (Ray's start-up on a busy 2-core machine)


def recorded_checkpoint(experiment: str) -> bool:
    """Whether Tune's experiment state (what a resume reads) names a trial checkpoint yet (Tune 2.60
    keeps the trial's checkpoint manager in it as a hex-encoded pickle)."""
    name = "checkpoint_0000"
    for path in glob.glob(os.path.join(experiment, "experiment_state-*.json")):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:  # being replaced: look again
            continue
        if name in text or name.encode().hex() in text:
            return True
    return False


def results(experiment: str) -> list[dict]:
    """Every result line of the experiment's one trial, in order (both runs append to it)."""
    (path,) = glob.glob(os.path.join(experiment, "*", "result.json"))
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_killed_rllib_train_resumes_from_its_last_checkpoint(tmp_path):
    storage = str(tmp_path)
    experiment = os.path.join(storage, "killed")
    argv = ["train", "--algo", "ES_EXT", "--env", "CartPole-v1", "--num-env-runners", "1", "--num-cpus", "2"]
    argv += ["--config", json.dumps(CONFIG), "--stop", json.dumps({"training_iteration": STOP_AT})]
    argv += ["--checkpoint-freq", "2", "--storage-path", storage, "--name", "killed"]
    # Tune records checkpoints in its experiment state every >= 10 s by default; every step here,
    # so that the kill comes soon after the first checkpoint.
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "0"}
    log = open(tmp_path / "first.log", "w")
    driver = subprocess.Popen(
        [sys.executable, "-m", "rllib_ext.cli", *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its Ray processes in its own group, cleaned up below
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not recorded_checkpoint(experiment):
            assert driver.poll() is None, f"rllib train ended before its first checkpoint: {log.name}"
            assert time.monotonic() < deadline, f"no checkpoint recorded in {WAIT_S} s: {log.name}"
            time.sleep(0.2)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        try:  # the killed driver's Ray (its own process group)
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.close()
    before = results(experiment)
    assert before[-1]["training_iteration"] < STOP_AT, "the run finished before it was killed"

    assert cli.main(["train", "--resume", experiment, "--num-cpus", "2"]) == 0
    after = results(experiment)[len(before) :]
    first, last = after[0], after[-1]
    # Restored from a checkpoint (iteration 2, 4, ...), not started again at iteration 1.
    assert first["iterations_since_restore"] == 1
    assert first["training_iteration"] >= 3 and first["training_iteration"] % 2 == 1
    checkpoint = next(r for r in before if r["training_iteration"] == first["training_iteration"] - 1)
    assert first["num_env_steps_sampled_lifetime"] > checkpoint["num_env_steps_sampled_lifetime"] > 0
    assert first["blackbox"]["update_index"] > checkpoint["blackbox"]["update_index"]
    # The saved stop criteria still hold: the resumed trial stops at STOP_AT iterations in all.
    assert last["training_iteration"] == STOP_AT
    assert last["iterations_since_restore"] == STOP_AT - checkpoint["training_iteration"]


def test_resume_of_a_folder_without_an_experiment_is_one_line(tmp_path, capsys):
    assert cli.main(["train", "--resume", str(tmp_path)]) == cli.USAGE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rllib: error: --resume") and "no experiment to resume" in err[-1]
    assert cli.main(["train", "--resume", "no_such_name", "--storage-path", str(tmp_path)]) == cli.USAGE_ERROR
    assert os.path.join(str(tmp_path), "no_such_name") in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(tmp_path), "--stop", "{}"]) == cli.USAGE_ERROR
    assert "drop --stop" in capsys.readouterr().err
