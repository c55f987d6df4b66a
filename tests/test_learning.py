"""The full tuned examples (`make learning-tests`, not CI): each must reach its return threshold.

Every ``tuned_examples/<algo>/<env>.yaml`` (RLlib's format: ``{name: {run, env, stop, config}}``)
runs through the same path as ``rllib train file``; it passes when the best
``env_runners/episode_return_mean`` reaches the ``stop`` value given for it (or ``pass_criteria``
when the file has one), before the other stop criteria (the budget) end the run. An experiment with
``learning_test: false`` (the hours-long MuJoCo ones) is skipped and said so.
"""

from __future__ import annotations

import glob
import math
import os

import pytest

from rllib_ext import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(glob.glob(os.path.join(REPO, "tuned_examples", "*", "*.yaml")))


def threshold(exp):
    criteria = cli.normalize_stop(exp.get("pass_criteria") or exp.get("stop") or {})
    if cli.RETURN_KEY not in criteria:
        pytest.fail(f"tuned example has no {cli.RETURN_KEY} in pass_criteria or stop")
    return float(criteria[cli.RETURN_KEY])


def build(exp):
    """The algorithm class and validated config of one experiment, as `rllib train file` builds them."""
    overrides = exp.get("config") or {}
    algo_cls = cli.resolve_algorithm(str(exp["run"]))
    return algo_cls, cli.build_config(algo_cls, exp.get("env") or overrides.get("env"), overrides)


@pytest.mark.learning
@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.relpath(p, REPO) for p in EXAMPLES])
def test_tuned_example_learns(ray_session, storage_path, path):
    from ray import tune

    for name, exp in cli.load_experiments(path):
        if exp.get("learning_test") is False:
            pytest.skip(f"{name}: learning_test: false (a long run, started by hand)")
        algo_cls, config = build(exp)
        cli.check_resources(algo_cls, config)
        results = tune.Tuner(
            str(exp["run"]),
            param_space=config,
            run_config=tune.RunConfig(
                name=name, storage_path=storage_path, stop=cli.StopCriteria(exp["stop"]), verbose=0
            ),
        ).fit()
        (result,) = list(results)
        assert result.error is None, result.error
        history = result.metrics_dataframe[cli.RETURN_KEY].dropna()
        best, target = float(history.max()), threshold(exp)
        assert best >= target, f"{name}: best return {best:.1f} < {target} within {exp['stop']}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.relpath(p, REPO) for p in EXAMPLES])
def test_tuned_example_is_a_valid_config(path):
    """Every tuned example (also the long ones CI does not train) names a registered algorithm,
    only keys its config has, values its ``validate()`` accepts, and a return threshold."""
    for name, exp in cli.load_experiments(path):
        _, config = build(exp)
        assert config.env == (exp.get("env") or exp["config"]["env"]), name
        assert math.isfinite(threshold(exp)), name
