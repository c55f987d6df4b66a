"""The trajectory recorder and the action-noise wrapper of the ERL runner."""

import numpy as np

from rllib_ext.common.trajectory import ActionExploration, TrajectoryRecorder


def test_recorder_transitions_and_exploration():
    import gymnasium as gym

    rec = TrajectoryRecorder(gym.make("Pendulum-v1"))
    env = ActionExploration(rec, noise=0.5, seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step(np.array([1.9], dtype=np.float32))
    tr = rec.transitions()
    assert tr["obs"].shape == (3, 3) and tr["next_obs"].shape == (3, 3) and tr["actions"].shape == (3, 1)
    assert np.array_equal(tr["obs"][1:], tr["next_obs"][:-1])
    assert (np.abs(tr["actions"]) <= 2.0).all() and not np.allclose(tr["actions"], 1.9)  # noised, clipped
    assert tr["terminateds"].sum() == 0  # Pendulum only truncates
    env.random_actions = True
    env.step(np.zeros(1, dtype=np.float32))
    assert rec.actions[-1].shape == (1,)
