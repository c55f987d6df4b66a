"""VRACER_EXT learns on Pendulum-v1: a tiny CI run.

The full run (tuned_examples/vracer_ext/pendulum-v1.yaml, return -250) is part of
``tests/learning/test_tuned_examples.py`` (marker ``learning_long``), which runs every tuned example.
"""

from __future__ import annotations

import os

from rllib_ext import cli
from tests.helpers import REPO

TUNED = os.path.join(REPO, "tuned_examples", "vracer_ext", "pendulum-v1.yaml")


def test_vracer_improves_on_pendulum_quickly(ray_session):
    """CI version (~45 s on 2 idle cores): 8k env steps lift the mean return well above random (~-1230)."""

    ((_, exp),) = cli.load_experiments(TUNED)
    config = cli.build_config(cli.resolve_algorithm(exp["run"]), exp["env"], exp["config"])
    config.training(n_start=1000, train_batch_size_per_learner=128)
    algo = config.build_algo()
    try:
        best = -float("inf")
        while True:
            result = algo.train()
            best = max(best, result["env_runners"].get("episode_return_mean", -float("inf")))
            if result["num_env_steps_sampled_lifetime"] >= 8000:
                break
        far = result["learners"]["__all_modules__"]["far_policy_fraction"]
    finally:
        algo.stop()
    print("best return", best, "far-policy fraction", far)
    assert best > -1000, best
    assert far < 0.5
