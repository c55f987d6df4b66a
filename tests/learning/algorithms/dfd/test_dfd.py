"""DFD_EXT learns the variable-length task (short, in CI): 0.85 of the optimal return in 64 updates."""

from __future__ import annotations

from tests.builders import small_dfd_config


def test_learns_the_variable_length_task(ray_session):
    algo = small_dfd_config(optimizer="dsgd", lr=0.05, eval_episodes=2).build_algo()
    try:
        best = 0.0
        for _ in range(64):
            result = algo.train()
            best = max(best, result["env_runners"]["episode_return_mean"] / 20.0)  # mean episode length 20
            if best >= 0.85:
                break
        assert best >= 0.85, f"DFD_EXT reached only {best:.2f} of the optimal return"
    finally:
        algo.stop()
