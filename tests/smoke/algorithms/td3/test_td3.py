"""TD3_EXT on Ray: 2 iterations, checkpoint round trip (networks, Adam moments, replay when asked), evaluate."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext import cli
from rllib_ext.algorithms.td3.td3 import TD3, TD3Config


def _config(**training):
    return (
        TD3Config()
        .environment("Pendulum-v1")
        .training(
            initial_steps=300,
            train_batch_size_per_learner=32,
            replay_capacity=1000,
            **training,
        )
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
        .reporting(min_sample_timesteps_per_iteration=200)
        .debugging(seed=0)
    )


def _learner_state(algo):
    return algo.learner_group._learner.get_state()


@pytest.mark.parametrize("checkpoint_replay", [False, True])
def test_train_two_iterations_and_checkpoint_round_trip(ray_session, tmp_path, capsys, checkpoint_replay):
    algo = _config(checkpoint_replay=checkpoint_replay).build_algo()
    try:
        first = algo.train()
        assert first["learners"]["__all_modules__"]["num_updates_lifetime"] == 0  # random actions, no updates yet
        result = algo.train()
        steps = result["num_env_steps_sampled_lifetime"]
        shared = result["learners"]["__all_modules__"]
        assert steps >= 400 and shared["num_env_steps_stored_lifetime"] == steps
        assert shared["num_updates_lifetime"] == steps - 300  # one iteration per env step after initial_steps
        assert shared["replay_size"] == min(steps, 1000)
        module = result["learners"]["default_policy"]
        for key in ("critic_loss", "actor_loss", "q_mean", "target_q_mean"):
            assert key in module and np.isfinite(module[key]), key
        assert "episode_return_mean" in result["env_runners"] or steps < 200
        state = _learner_state(algo)
        weights = state["rl_module"]["default_policy"]
        assert all(np.all(np.isfinite(np.asarray(v))) for v in weights.values())
        # The soft updates moved the targets, but not onto the trained weights.
        key = "critic.q1_net.0.weight"
        assert not np.array_equal(weights["critic_target." + key[len("critic.") :]], weights[key])
        updater = algo.learner_group._learner.updaters["default_policy"]
        assert updater.num_actor_steps == updater.num_critic_steps // 2
        assert ("replay" in state["td3"]) is checkpoint_replay
        replay = algo.learner_group._learner.replay.get_state()
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = TD3.from_checkpoint(path)
    try:
        learner2 = restored.learner_group._learner
        state2 = learner2.get_state()
        for k, v in weights.items():
            np.testing.assert_array_equal(
                np.asarray(state2["rl_module"]["default_policy"][k]), np.asarray(v), err_msg=k
            )
        assert set(state["optimizer"]) == {"default_policy_actor", "default_policy_critic"}
        for name, opt in state["optimizer"].items():
            moments = opt["state"]["state"][0]  # Adam's moments of the first layer's weight
            restored_moments = state2["optimizer"][name]["state"]["state"][0]
            for k in ("step", "exp_avg", "exp_avg_sq"):
                np.testing.assert_array_equal(
                    np.asarray(restored_moments[k]), np.asarray(moments[k]), err_msg=f"{name} {k}"
                )
        assert {k: v for k, v in state2["td3"].items() if k not in ("updaters", "replay")} == {
            k: v for k, v in state["td3"].items() if k not in ("updaters", "replay")
        }
        assert state2["td3"]["updaters"]["default_policy"]["num_actor_steps"] == updater.num_actor_steps
        assert len(learner2.replay) == (len(replay["data"]["rewards"]) if checkpoint_replay else 0)
        if checkpoint_replay:
            np.testing.assert_array_equal(learner2.replay.get_state()["data"]["obs"], replay["data"]["obs"])
        after = restored.train()
        assert after["learners"]["__all_modules__"]["num_updates_lifetime"] > shared["num_updates_lifetime"]
    finally:
        restored.stop()
    if not checkpoint_replay:
        assert cli.main(["evaluate", path, "--episodes", "1", "--seed", "1"]) == 0
        assert "mean return" in capsys.readouterr().out
