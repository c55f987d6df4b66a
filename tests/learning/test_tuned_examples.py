"""The full tuned examples (`make learning-tests`, not CI): each must reach its return threshold.

Every ``tuned_examples/<algo>/<env>.yaml`` (RLlib's format: ``{name: {run, env, stop, config}}``)
runs through the same path as ``rllib train file``; it passes when the best
``env_runners/episode_return_mean`` reaches the ``stop`` value given for it (or ``pass_criteria``
when the file has one), before the other stop criteria (the budget) end the run. An experiment with
``learning_test: false`` (the hours-long MuJoCo ones) is skipped and said so.
"""

from __future__ import annotations

import pytest

from rllib_ext import experiment
from tests.helpers import TUNED_EXAMPLE_IDS, TUNED_EXAMPLES, build_tuned_example, tuned_example_threshold


@pytest.mark.learning_long
@pytest.mark.parametrize("path", TUNED_EXAMPLES, ids=TUNED_EXAMPLE_IDS)
def test_tuned_example_learns(ray_session, storage_path, path):
    from ray import tune

    for name, exp in experiment.load_experiments(path):
        if exp.get("learning_test") is False:
            pytest.skip(f"{name}: learning_test: false (a long run, started by hand)")
        algo_cls, config = build_tuned_example(exp)
        experiment.check_resources(algo_cls, config)
        results = tune.Tuner(
            str(exp["run"]),
            param_space=config,
            run_config=tune.RunConfig(
                name=name, storage_path=storage_path, stop=experiment.StopCriteria(exp["stop"]), verbose=0
            ),
        ).fit()
        (result,) = list(results)
        assert result.error is None, result.error
        history = result.metrics_dataframe[experiment.RETURN_KEY].dropna()
        best, target = float(history.max()), tuned_example_threshold(exp)
        assert best >= target, f"{name}: best return {best:.1f} < {target} within {exp['stop']}"
