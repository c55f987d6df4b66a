"""Resume (issue 9): checkpoint -> fresh Algorithm.from_checkpoint -> counters continue, state equal.

For every registered algorithm: train 2 iterations, ``save_to_path``, restore into a fresh
``Algorithm.from_checkpoint``; the learner state (weights, optimizer states and what each
learner adds: ReF-ER's β, t, k; IMPACT's update and target-sync counts and KL coefficients),
the algorithm's own state (the black-box family's update index u, batch seed, observation
filter, counters and e.g. DFD's parameter history, CV-ES's η and φ), the lifetime env steps and
the iteration all equal the saved ones, and one more ``train()`` continues from them. For the
algorithms that are deterministic under a seed (the synchronous black-box ones with
``common_random_numbers``), restore + one ``train()`` equals training straight through, to the
bit, and their restored state is compared there (the first test does not repeat them). Then one
Tune-level test: a ``tune.Tuner("DFD_EXT")`` run that crashes mid-way resumes from its last
checkpoint with ``tune.Tuner.restore``.
"""

from __future__ import annotations

import os

import pytest
from ray.rllib.algorithms.algorithm import Algorithm

from rllib_ext.common.blackbox import BlackBoxConfig

# env_steps: written once, in the module that the old-checkpoint writer also runs on older checkouts.
from tests.data.checkpoint_digest import env_steps
from tests.reliability.helpers import NAMES, assert_nested_equal, config_class, learner_state, small_config


def own_state(algo):
    """The algorithm's state beyond RLlib's components (the black-box family's, if any)."""
    if not hasattr(algo, "update_index"):
        return {}
    return {
        "u": algo.update_index,
        "batch_seed": algo.batch_seed,
        "obs_filter": algo.obs_filter.get_state(),
        "counters": dict(algo.counters),
        "extra": algo._extra_state(),
    }


def learner_counters(state) -> dict:
    """Algorithm-specific learner counters that must keep counting after a restore."""
    if "refer" in state:
        return {"k": state["refer"]["k"], "t": state["refer"]["t"], "beta": state["refer"]["beta"]}
    if "impact" in state:
        return {"updates": state["impact"]["num_updates"], "target_syncs": state["impact"]["num_target_syncs"]}
    return {}


# Synchronous updates from seeded perturbations; with ``common_random_numbers`` every episode is
# seeded from its job, so nothing depends on a runner's history (which a restore cannot bring back).
# Their restore is checked (with the same state comparisons, and more) by
# test_restore_then_train_equals_training_straight_through below.
DETERMINISTIC = ["ES_EXT", "CVES_EXT", "ARS_EXT"]


@pytest.mark.parametrize("name", [name for name in NAMES if name not in DETERMINISTIC])
def test_restore_continues_counters_with_equal_weights_and_optimizer_state(ray_session, tmp_path, name):
    # The black-box family evaluates on remote runners only; the others sample locally (faster builds).
    runners = 1 if issubclass(config_class(name), BlackBoxConfig) else 0
    algo = small_config(name, num_env_runners=runners).build_algo()
    try:
        for _ in range(2):
            algo.train()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        saved = {
            "learner": learner_state(algo),
            "own": own_state(algo),
            "steps": env_steps(algo),
            "iteration": algo.iteration,
        }
    finally:
        algo.stop()
    assert saved["iteration"] == 2 and saved["steps"] > 0

    restored = Algorithm.from_checkpoint(path)
    try:
        assert type(restored).__name__ == type(algo).__name__
        assert restored.iteration == saved["iteration"]
        assert env_steps(restored) == saved["steps"]
        assert_nested_equal(learner_state(restored), saved["learner"], "learner state")
        assert_nested_equal(own_state(restored), saved["own"], "algorithm state")

        result = restored.train()
        assert result["training_iteration"] == saved["iteration"] + 1
        assert result["num_env_steps_sampled_lifetime"] > saved["steps"]
        after = learner_state(restored)
        for key, value in learner_counters(saved["learner"]).items():
            # ReF-ER refills its (not checkpointed) replay memory first: k and t may pause, never reset.
            assert learner_counters(after)[key] >= value, key
        if "impact" in saved["learner"]:
            assert learner_counters(after)["updates"] > learner_counters(saved["learner"])["updates"]
        if saved["own"]:  # u counts on (one update per iteration for ES/DFD/CVES, several for AES-RL)
            assert restored.update_index > saved["own"]["u"]
    finally:
        restored.stop()


def seeded_config(name):
    config = small_config(name, num_env_runners=1, seed=3)
    # Pendulum: returns depend on the actions (ranks differ), random start states.
    config.env_config = {}  # environment(env_config=...) would merge into the test env's settings
    return config.environment("Pendulum-v1").training(common_random_numbers=True, eval_episodes=1)


def third_iteration(algo):
    """What iteration 3 produced: the learner state and the batch's returns."""
    result = algo.train()
    assert result["training_iteration"] == 3
    blackbox = result["blackbox"]
    return {
        "learner": learner_state(algo),
        "returns": (blackbox["perturbed_return_mean"], blackbox["eval_return_mean"]),
    }


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_restore_then_train_equals_training_straight_through(ray_session, tmp_path, name):
    algo = seeded_config(name).build_algo()
    try:
        for _ in range(2):
            algo.train()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        before = learner_state(algo)
        saved = {"own": own_state(algo), "steps": env_steps(algo), "iteration": algo.iteration}
        straight = third_iteration(algo)
    finally:
        algo.stop()
    with pytest.raises(AssertionError):  # iteration 3 did change the weights
        assert_nested_equal(straight["learner"], before)

    restored = Algorithm.from_checkpoint(path)
    try:
        assert restored.iteration == saved["iteration"] == 2 and env_steps(restored) == saved["steps"] > 0
        assert_nested_equal(learner_state(restored), before, "learner state")
        assert_nested_equal(own_state(restored), saved["own"], "algorithm state")
        resumed = third_iteration(restored)
    finally:
        restored.stop()
    assert resumed["returns"] == straight["returns"]
    assert_nested_equal(resumed["learner"], straight["learner"], "learner state after iteration 3")


def test_tune_run_resumes_from_its_last_checkpoint(ray_session, tmp_path, storage_path, monkeypatch):
    """A DFD_EXT Tune run dies after iteration 2; Tuner.restore continues from the checkpoint."""
    from ray import tune

    # Tune records trial checkpoints in its experiment state every ~10 s by default, so a crash
    # loses the checkpoints made since; record at every step here (the crash comes within 10 s).
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "0")

    marker = str(tmp_path / "crashed_once")

    class CrashOnce(tune.Callback):
        """Kills the experiment (not the trial) once, at iteration 2, like a driver crash."""

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if result["training_iteration"] == 2 and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("simulated driver crash")

    run_config = tune.RunConfig(
        name="resume",
        storage_path=storage_path,
        stop={"training_iteration": 3},
        callbacks=[CrashOnce()],
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1),
        verbose=0,
    )
    config = small_config("DFD_EXT", num_env_runners=1)
    with pytest.raises(Exception, match="simulated driver crash"):  # however Tune wraps it
        tune.Tuner("DFD_EXT", param_space=config, run_config=run_config).fit()
    assert os.path.exists(marker)

    experiment = os.path.join(storage_path, "resume")
    assert tune.Tuner.can_restore(experiment)
    (result,) = tune.Tuner.restore(experiment, "DFD_EXT", resume_unfinished=True).fit()
    assert result.error is None, result.error
    metrics = result.metrics
    assert metrics["training_iteration"] == 3
    # Continued from a checkpoint (iteration 1 or 2), not from scratch; u counted on with it.
    assert 1 <= metrics["iterations_since_restore"] < 3
    assert metrics["blackbox"]["update_index"] == 3
