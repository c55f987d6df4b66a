"""tuned_examples/<algo>/<env>.yaml: every example is a config the CLI builds, and sets only what
differs from the algorithm's defaults (no Ray)."""

from __future__ import annotations

import math

import pytest

from rllib_ext import experiment
from tests.helpers import (
    TUNED_EXAMPLE_IDS,
    TUNED_EXAMPLES,
    build_tuned_example,
    same_value,
    settings_with_defaults,
    tuned_example_threshold,
)

# Settings a tuned example may restate although they equal the default: they document its scale.
MAY_RESTATE = {"num_env_runners"}


@pytest.mark.parametrize("path", TUNED_EXAMPLES, ids=TUNED_EXAMPLE_IDS)
def test_tuned_example_is_a_valid_config(path):
    """Every tuned example (also the long ones CI does not train) names a registered algorithm,
    only keys its config has, values its ``validate()`` accepts, and a return threshold."""
    for name, exp in experiment.load_experiments(path):
        _, config = build_tuned_example(exp)
        assert config.env == (exp.get("env") or exp["config"]["env"]), name
        assert math.isfinite(tuned_example_threshold(exp)), name


@pytest.mark.parametrize("path", TUNED_EXAMPLES, ids=TUNED_EXAMPLE_IDS)
def test_tuned_example_sets_only_values_that_differ_from_the_default(path):
    """A tuned example holds its stop criteria and the overrides it needs; the defaults live in
    the Config class (RLlib's built-ins count too), the paper tables in configs/."""
    restated = []
    for name, exp in experiment.load_experiments(path):
        for key, value, default in settings_with_defaults(str(exp["run"]), exp.get("config") or {}):
            if key not in MAY_RESTATE and same_value(value, default):
                restated.append(f"{name}: {key}: {value!r} is {exp['run']}'s default; drop it")
    assert not restated, f"{path}:\n  " + "\n  ".join(restated)
