"""DFD_EXT learns the variable-length task (short, in CI): 0.85 of the optimal return in 64 updates."""

from __future__ import annotations

from rllib_ext.algorithms.dfd.dfd import DFDConfig


def small_config(**training):
    training = {"episodes_per_batch": 8, "policy_hiddens": [8], "noise_stdev": 0.1, **training}
    return (
        DFDConfig()
        .environment("rllib_ext/VariableLength-v0", env_config={"min_len": 10, "max_len": 30})
        .env_runners(num_env_runners=2)
        .training(**training)
        .debugging(seed=0)
        .reporting(min_time_s_per_iteration=None)  # one update per train() call in these tests
    )


def test_learns_the_variable_length_task(ray_session):
    algo = small_config(optimizer="dsgd", lr=0.05).build_algo()
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
