"""ES_EXT learns the variable-length task (short, in CI)."""

from __future__ import annotations

from tests.builders import small_es_config


def test_learns_the_variable_length_task(ray_session):
    """Short CI learning test: random play gets ~50% of the optimal return (= episode length)."""
    config = small_es_config(
        env_config={"min_len": 10, "max_len": 30}, episodes_per_batch=20, noise_stdev=0.1, lr=0.05, eval_episodes=4
    )
    algo = config.build_algo()
    try:
        best = 0.0
        for _ in range(40):
            result = algo.train()
            bb = result["blackbox"]
            best = max(best, bb["eval_return_mean"] / 20.0)  # mean episode length is 20
            if best >= 0.9:
                break
        assert best >= 0.9, f"ES_EXT reached only {best:.2f} of the optimal return"
    finally:
        algo.stop()
