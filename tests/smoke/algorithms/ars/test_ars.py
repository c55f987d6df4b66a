"""ARS_EXT on Ray: M_0 = 0, 2 iterations with its metrics, checkpoint round trip (θ, obs filter), evaluate."""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm

from rllib_ext import cli
from tests.builders import small_ars_config


def test_smoke_zero_init_train_checkpoint_round_trip_and_evaluate(ray_session, tmp_path, capsys):
    algo = small_ars_config().build_algo()
    try:
        np.testing.assert_array_equal(algo.theta, np.zeros_like(algo.theta))  # Algorithm 2: M_0 = 0
        assert algo.theta.size == 2 * 1 + 1  # linear policy: M (1×2) and its bias
        for _ in range(2):
            result = algo.train()
        bb = result["blackbox"]
        assert bb["update_index"] == 2
        assert bb["ars_selected_fraction"] == 0.5  # b = 2 of N = 4
        assert np.isfinite(bb["ars_sigma_r"]) and bb["ars_sigma_r"] >= 0
        assert result["num_env_steps_sampled_lifetime"] >= 2 * 8 * 5  # 2 updates × 2N = 8 episodes of ≥ 5 steps
        assert np.any(algo.theta != 0)
        ckpt = str(tmp_path / "ckpt")
        algo.save_to_path(ckpt)
        theta, u = algo.theta.copy(), algo.update_index
        filter_state = algo.obs_filter.get_state()
    finally:
        algo.stop()

    restored = Algorithm.from_checkpoint(ckpt)
    try:
        assert type(restored).__name__ == "ARS"
        np.testing.assert_array_equal(restored.theta, theta)  # not re-zeroed by setup
        assert restored.update_index == u
        assert restored.obs_filter.stats.n == filter_state["stats"]["num_pushes"] > 0  # V2's statistics
        assert (restored.config.num_directions, restored.config.top_b) == (4, 2)
        assert restored.train()["blackbox"]["update_index"] == u + 1  # continues, not restarts
    finally:
        restored.stop()

    assert cli.main(["evaluate", ckpt, "--episodes", "2", "--seed", "1"]) == 0
    assert "mean return" in capsys.readouterr().out
