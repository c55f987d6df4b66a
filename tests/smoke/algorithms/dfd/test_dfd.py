"""DFD_EXT on Ray: train, checkpoint round trip (θ, parameter history, DSGD state), continue."""

from __future__ import annotations

import numpy as np

from tests.builders import small_dfd_config


def _config():
    """One remote runner (the builder's two cost a process start per build and are not what these
    checks are about: the round trip of θ, the parameter history and DSGD's state)."""
    return small_dfd_config(optimizer="dsgd", lr=0.05, eval_episodes=2).env_runners(num_env_runners=1)


def test_train_checkpoint_round_trip_and_continue(ray_session, tmp_path):
    algo = _config().build_algo()
    try:
        result = algo.train()
        assert result["blackbox"]["update_index"] == 1
        for _ in range(3):
            result = algo.train()
        ckpt = str(tmp_path / "ckpt")
        algo.save_to_path(ckpt)
        u, theta = algo.update_index, algo.theta.copy()
        history_keys = [k for k, _ in algo.history.get_state()["thetas"]]
        eta = algo._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict()["dsgd"])
        # DSGD compared R̄, the running mean of the evaluation returns (one signal with ES_EXT).
        r_bar = algo.eval_return_ema
        assert r_bar is not None and eta["rewards"][-1] == r_bar
    finally:
        algo.stop()

    restored = _config().build_algo()
    try:
        restored.restore_from_path(ckpt)
        assert restored.update_index == u
        np.testing.assert_array_equal(restored.theta, theta)
        assert [k for k, _ in restored.history.get_state()["thetas"]] == history_keys
        np.testing.assert_array_equal(restored.history[u], theta)
        assert restored._on_learner(lambda l: next(iter(l._named_optimizers.values())).state_dict()["dsgd"]) == eta
        assert restored.eval_return_ema == r_bar
        # Training continues from u (counters continue, not restart).
        result = restored.train()
        assert restored.update_index > u
        assert result["blackbox"]["returns_dropped_stale_lifetime"] == restored.returns.num_dropped_stale
    finally:
        restored.stop()
