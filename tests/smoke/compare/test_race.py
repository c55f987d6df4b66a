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


def test_a_tiny_tuned_race_tunes_each_entry_then_races_the_best_points(ray_session, tmp_path):
    # 2 entries x a grid of 2 on 1 tuning seed, then the best point of each on 2 evaluation seeds: 8 short runs
    # of PPO sampling on the driver (no actor to start per run), one 64-step iteration each.
    common = {
        "model_config": {"fcnet_hiddens": [8]},
        "num_env_runners": 0,
        "train_batch_size_per_learner": 64,
        "minibatch_size": 32,
        "num_epochs": 1,
        "min_time_s_per_iteration": 0,
    }
    argv = ["--algos", "PPO", "PPO+KL=PPO", "--env", "CartPole-v1", "--seeds", "0", "1"]
    argv += ["--budget-env-steps", "64", "--eval-every-steps", "64", "--eval-episodes", "1"]
    argv += ["--common", json.dumps(common), "--set", "PPO+KL:use_kl_loss=true", "--tune-seeds", "9"]
    argv += ["--tune", "PPO:lr=[0.001, 0.0003]", "--tune", "PPO+KL:clip_param=[0.1, 0.3]"]
    argv += ["--benchmark", "smoke", "--race", "tuned", "--results-dir", str(tmp_path)]
    assert rllib_race(argv) == 0
    rows = read_all(str(tmp_path))
    tuning = [r for r in rows if r.stage == "tuning"]
    evaluation = [r for r in rows if r.stage == "evaluation"]
    assert len(tuning) == 4 and {r.seed for r in tuning} == {9}
    assert len(evaluation) == 4 and {r.seed for r in evaluation} == {0, 1}
    for r in evaluation:
        assert r.tuning["rule"] == "grid" and r.tuning["grid_sizes"] == {"PPO": 2, "PPO+KL": 2}
        key = "lr" if r.algorithm == "PPO" else "clip_param"
        assert r.settings[key] == r.tuning["chosen"][key]
        assert len(r.curve.cpu_s) == len(r.curve.env_steps) and r.curve.cpu_s[-1] > 0  # the driver's, here
    table = summary_table(rows, {})
    assert "equal tuning effort (grid of 2 per entry" in table and "(chosen)" in table
    assert "| PPO | 2 |" in table and "| PPO+KL | 2 |" in table  # evaluation rows only
