"""Each short learning test's THRESHOLD is the rule of ``tests/learning/short_runs.py`` over the
committed calibration rows (no Ray: reads files only)."""

from __future__ import annotations

import importlib

import pytest

from tests.learning import short_runs

MODULES = {
    "ARS_EXT": "ars",
    "AESRL_EXT": "aesrl",
    "CEMRL_EXT": "cemrl",
    "DDPG_EXT": "ddpg",
    "NAF_EXT": "naf",
    "TD3_EXT": "td3",
}


@pytest.mark.parametrize("name", sorted(short_runs.SHORT_RUNS))
def test_threshold_is_the_rule_over_the_committed_rows(name):
    module = importlib.import_module(f"tests.learning.algorithms.{MODULES[name]}.test_{MODULES[name]}")
    rows = [r for r in short_runs.calibration_rows() if r["algorithm"] == name]
    spec = short_runs.SHORT_RUNS[name]
    assert {r["seed"] for r in rows} >= set(short_runs.CALIBRATION_SEEDS), f"{name}: seeds {[r['seed'] for r in rows]}"
    assert all(r["budget_env_steps"] == spec.budget_env_steps and r["env"] == spec.env for r in rows), (
        f"{name}: rows calibrated another configuration; rerun benchmarks/learning_calibration.py"
    )
    assert module.THRESHOLD == short_runs.threshold(rows, name)
    # The rule keeps the threshold strictly between not learning and the worst calibrated seed.
    assert max(r["untrained_eval_return"] for r in rows) < module.THRESHOLD < min(r["eval_return"] for r in rows)
