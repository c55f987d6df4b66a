"""``rllib race`` end to end: one algorithm, a tiny budget, one row with an evaluation curve."""

from __future__ import annotations

import json

from rllib_ext import cli
from rllib_ext.compare import race
from rllib_ext.compare.report import summary_table
from rllib_ext.compare.rows import read_all


def rllib_race(argv):
    """``rllib race ARGV``'s exit status."""
    return cli.main(["race", *argv])


def test_race_writes_one_row_per_run(ray_session, tmp_path):
    # One ES update per iteration (4 CartPole episodes): the 300-step budget takes several.
    common = {"policy_hiddens": [8], "num_env_runners": 1, "episodes_per_batch": 4, "min_time_s_per_iteration": 0}
    argv = ["--algos", "ES_EXT", "--env", "CartPole-v1", "--seeds", "3", "--budget-env-steps", "300"]
    argv += ["--eval-every-env-steps", "150", "--eval-episodes", "2", "--common", json.dumps(common)]
    argv += ["--benchmark", "smoke", "--race", "r1", "--results-dir", str(tmp_path)]
    # A first invocation stops at once (after one iteration), the second resumes from the checkpoint.
    assert rllib_race([*argv, "--stop-after-s", "0.001"]) == 3
    assert read_all(str(tmp_path)) == [] and (tmp_path / "smoke" / "r1.partial").is_dir()
    assert rllib_race([*argv, "--resume"]) == 0
    assert not (tmp_path / "smoke" / "r1.partial").exists()
    (row,) = read_all(str(tmp_path))
    assert row.extra["chunks"] == 2
    assert (row.benchmark, row.race, row.algorithm, row.seed) == ("smoke", "r1", "ES_EXT", 3)
    assert row.curve.env_steps[0] == 0 and row.curve.env_steps[-1] >= 300
    assert len(row.curve.eval_return) >= 2
    assert all(len(r) == 2 for r in row.extra["eval_episode_returns"])
    assert row.settings["policy_hiddens"] == [8] and row.settings["num_env_runners"] == 1
    assert row.extra["iterations"] >= 2
    assert set(race.EXECUTION_KEYS) <= set(row.shared_keys)
    assert row.protocol["eval_episodes"] == 2
    # Every simulated step is the budget, and the row keeps where the steps went: they sum to it.
    assert row.step_count == "every-simulated-step"
    breakdown = row.env_steps_breakdown
    for i, total in enumerate(row.curve.env_steps[1:], start=1):
        assert sum(values[i] for values in breakdown.values()) == total
    assert breakdown["env_steps_used_lifetime"][-1] > 0
    # The same race id again is refused (rows are appended, never overwritten).
    assert rllib_race(argv) == 2


def test_labelled_variants_record_metrics_along_the_curve(ray_session, tmp_path):
    common = {"policy_hiddens": [8], "num_env_runners": 1, "episodes_per_batch": 4}
    argv = ["--algos", "ES+Adam=ES_EXT", "ES+SGD=ES_EXT", "--env", "CartPole-v1", "--seeds", "0"]
    argv += ["--budget-env-steps", "300", "--eval-every-env-steps", "150", "--eval-episodes", "1"]
    argv += ["--common", json.dumps(common), "--set", 'ES+SGD:optimizer="sgd"']
    argv += ["--record", "blackbox/grad_norm", "--record", "blackbox/update_index", "--record", "no/such/metric"]
    argv += ["--benchmark", "smoke", "--race", "labels", "--results-dir", str(tmp_path)]
    assert rllib_race(argv) == 0
    adam, sgd = read_all(str(tmp_path))
    assert (adam.algorithm, sgd.algorithm) == ("ES+Adam", "ES+SGD")
    assert adam.registered_algorithm == sgd.registered_algorithm == "ES_EXT"
    assert sgd.settings["optimizer"] == "sgd" and "optimizer" not in adam.settings
    for row in (adam, sgd):
        n = len(row.curve.env_steps)
        recorded, updates = row.extra["recorded"], row.extra["updates"]
        assert n >= 2 and len(updates) == n and all(len(v) == n for v in recorded.values())
        assert updates[0] == 0 and updates[-1] >= 1 and updates == sorted(updates)
        assert recorded["blackbox/update_index"][0] is None
        assert recorded["blackbox/update_index"][1:] == [float(u) for u in updates[1:]]
        assert all(v is not None and v >= 0 for v in recorded["blackbox/grad_norm"][1:])
        assert recorded["no/such/metric"] == [None] * n
    table = summary_table([adam, sgd], {})
    assert "| ES+Adam | 1 |" in table and "| ES+SGD | 1 |" in table
