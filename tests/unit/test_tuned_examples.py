"""tuned_examples/<algo>/<env>.yaml: every example is a config the CLI builds (no Ray)."""

from __future__ import annotations

import math

import pytest

from rllib_ext import cli
from tests.helpers import TUNED_EXAMPLE_IDS, TUNED_EXAMPLES, build_tuned_example, tuned_example_threshold


@pytest.mark.parametrize("path", TUNED_EXAMPLES, ids=TUNED_EXAMPLE_IDS)
def test_tuned_example_is_a_valid_config(path):
    """Every tuned example (also the long ones CI does not train) names a registered algorithm,
    only keys its config has, values its ``validate()`` accepts, and a return threshold."""
    for name, exp in cli.load_experiments(path):
        _, config = build_tuned_example(exp)
        assert config.env == (exp.get("env") or exp["config"]["env"]), name
        assert math.isfinite(tuned_example_threshold(exp)), name
