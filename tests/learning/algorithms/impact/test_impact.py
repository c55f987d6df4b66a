"""Short CI learning test for IMPACT_EXT on CartPole-v1 (the full tuned examples are `learning_long`).

Uses the settings of tuned_examples/impact_ext/cartpole-v1.yaml with one env runner (the CI
Ray has 2 CPUs: driver + runner) and a lower bar: return 150 within 120 s of training.
"""

from __future__ import annotations

import os
import time

import yaml

from rllib_ext.algorithms.impact.impact import IMPACTConfig
from tests.helpers import REPO

TARGET, BUDGET_S = 150.0, 120.0


def test_cartpole_reaches_150(ray_session):
    with open(os.path.join(REPO, "tuned_examples", "impact_ext", "cartpole-v1.yaml")) as f:
        (exp,) = yaml.safe_load(f).values()
    settings = dict(exp["config"])
    model = settings.pop("model_config", None)
    settings.pop("num_env_runners", None)
    config = IMPACTConfig().environment("CartPole-v1").debugging(seed=0)
    config.update_from_dict(settings)
    config.rl_module(model_config=model).env_runners(num_env_runners=1).reporting(min_time_s_per_iteration=2)
    algo = config.build_algo()
    returns = []
    try:
        t0 = time.time()
        while time.time() - t0 < BUDGET_S:
            result = algo.train()
            returns.append(result["env_runners"].get("episode_return_mean") or 0.0)
            if returns[-1] >= TARGET:
                break
    finally:
        algo.stop()
    assert max(returns) >= TARGET, f"best return {max(returns):.1f} < {TARGET} in {BUDGET_S} s: {returns}"
