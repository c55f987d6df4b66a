"""rllib_ext.compare.rows: rows round-trip, and a bad row is one error naming file and line."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from rllib_ext.compare import rows as rows_lib
from rllib_ext.compare.rows import Curve, Machine, RowError, RunRow


def make_row(**changes) -> RunRow:
    row = RunRow(
        benchmark="cartpole",
        race="2026-01-01-test",
        algorithm="IMPACT_EXT",
        env="CartPole-v1",
        seed=0,
        settings={"model_config": {"fcnet_hiddens": [64, 64]}, "num_env_runners": 1},
        shared_keys=["model_config", "num_env_runners"],
        variable=[],
        protocol={"budget_env_steps": 1000, "budget_s": None, "eval_every_env_steps": 500, "eval_episodes": 5},
        machine=Machine(cores=2, description="test CPU / Linux"),
        date="2026-01-01T00:00:00+00:00",
        curve=Curve(env_steps=[0, 500, 1000], wall_s=[0.0, 1.5, 3.0], eval_return=[10.0, 20.0, 30.0]),
        target=450.0,
        extra={"eval_episode_returns": [[10.0], [20.0], [30.0]]},
    )
    return dataclasses.replace(row, **changes)


def test_write_then_read_round_trips(tmp_path):
    path = tmp_path / "cartpole" / "race.jsonl"
    a, b = make_row(), make_row(seed=1, algorithm="APPO")
    rows_lib.append_row(str(path), a)
    rows_lib.append_row(str(path), b)
    assert rows_lib.read_rows(str(path)) == [a, b]
    assert rows_lib.read_all(str(tmp_path)) == [a, b]
    assert a.final_return == 30.0


def test_the_registered_algorithm_of_a_labelled_row_and_of_an_old_row():
    labelled = make_row(algorithm="DFD+DSGD", settings={"registered_algorithm": "DFD_EXT"})
    assert labelled.registered_algorithm == "DFD_EXT"
    assert make_row().registered_algorithm == "IMPACT_EXT"  # written before labels: the name is the label


def test_machine_this_describes_the_machine():
    m = Machine.this()
    assert m.cores >= 1 and m.description


def _write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("seed"), "missing field"),
        (lambda d: d.update(colour="red"), "unknown field"),
        (lambda d: d.update(seed="0"), "seed must be an integer"),
        (lambda d: d["curve"].update(eval_return=[1.0]), "differ in length"),
        (lambda d: d["curve"].update(env_steps=[0, 1000, 500]), "non-decreasing"),
        (lambda d: d["curve"].update(env_steps=[], wall_s=[], eval_return=[]), "no evaluation point"),
        (lambda d: d.update(date="yesterday"), "ISO 8601"),
        (lambda d: d.update(target="high"), "target"),
        (lambda d: d.update(schema=99), "schema"),
    ],
)
def test_a_bad_row_names_file_and_line(tmp_path, mutate, message):
    good = json.loads(make_row().to_json())
    bad = json.loads(make_row().to_json())
    mutate(bad)
    path = _write_lines(tmp_path / "r.jsonl", [json.dumps(good), "", json.dumps(bad)])
    with pytest.raises(RowError, match=rf"r\.jsonl:3: bad row: .*{message}"):
        rows_lib.read_rows(path)


def test_a_line_that_is_not_json_names_file_and_line(tmp_path):
    path = _write_lines(tmp_path / "r.jsonl", [make_row().to_json(), "{not json"])
    with pytest.raises(RowError, match=r"r\.jsonl:2: not JSON"):
        rows_lib.read_rows(path)


def test_a_non_finite_curve_value_is_never_written(tmp_path):
    row = make_row(curve=Curve(env_steps=[0], wall_s=[0.0], eval_return=[float("nan")]))
    with pytest.raises(ValueError):
        rows_lib.append_row(str(tmp_path / "r.jsonl"), row)
    assert not (tmp_path / "r.jsonl").exists()


def test_group_by_keeps_first_seen_order():
    rows = [make_row(algorithm="B"), make_row(algorithm="A"), make_row(algorithm="B", seed=1)]
    groups = rows_lib.group_by(rows, "env", "algorithm")
    assert list(groups) == [("CartPole-v1", "B"), ("CartPole-v1", "A")]
    assert [r.seed for r in groups[("CartPole-v1", "B")]] == [0, 0 + 1]


# ---------------------------------------------------------------------------------------------
# Env steps: rows since 2026-11-27 say how they were counted and where the steps went (schema 2);
# rows before (schema 1) are still read, as counted the old way.
# ---------------------------------------------------------------------------------------------
BREAKDOWN = {
    "env_steps_used_lifetime": [None, 400, 800],
    "env_steps_evaluation_lifetime": [None, 100, 150],
    "env_steps_wasted_lifetime": [None, 0, 30],
    "env_steps_pending": [None, 0, 20],
}


def old_row_dict(**changes) -> dict:
    """A row as the harness wrote it before 2026-11-27 (schema 1: no step_count, no breakdown)."""
    data = json.loads(make_row().to_json())
    for key in ("step_count", "env_steps_breakdown"):
        del data[key]
    return {**data, "schema": 1, **changes}


def test_a_new_row_says_how_its_steps_were_counted_and_keeps_the_breakdown(tmp_path):
    row = make_row(env_steps_breakdown=BREAKDOWN)
    assert (row.schema, row.step_count) == (rows_lib.SCHEMA_VERSION, rows_lib.EVERY_SIMULATED_STEP)
    path = str(tmp_path / "r.jsonl")
    rows_lib.append_row(path, row)
    assert rows_lib.read_rows(path) == [row]
    assert row.breakdown_at_end() == {
        "env_steps_used_lifetime": 800,
        "env_steps_evaluation_lifetime": 150,
        "env_steps_wasted_lifetime": 30,
        "env_steps_pending": 20,
    }
    assert make_row().breakdown_at_end() is None  # an algorithm that logs none


def test_a_row_of_schema_1_reads_as_counted_before_issue_39_and_round_trips():
    old = RunRow.from_dict(old_row_dict())
    assert (old.schema, old.step_count, old.env_steps_breakdown) == (1, rows_lib.OLD_STEP_COUNT, None)
    assert RunRow.from_dict(json.loads(old.to_json())) == old


def test_every_committed_row_still_reads():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "results")
    rows = rows_lib.read_all(root)
    assert rows and all(r.schema in rows_lib.READABLE_SCHEMAS for r in rows)


@pytest.mark.parametrize(
    "data, message",
    [
        (old_row_dict(step_count="every-simulated-step"), "counted before 2026-11-27"),
        (old_row_dict(env_steps_breakdown=BREAKDOWN), "no env_steps_breakdown"),
        ({**json.loads(make_row().to_json()), "step_count": "used-returns"}, "step_count must be"),
        ({**json.loads(make_row().to_json()), "env_steps_breakdown": {"used": [1, 2, 3]}}, "env_steps_breakdown must"),
        (
            {**json.loads(make_row().to_json()), "env_steps_breakdown": {**BREAKDOWN, "env_steps_pending": [0]}},
            "one value per point",
        ),
        (
            {**json.loads(make_row().to_json()), "env_steps_breakdown": {**BREAKDOWN, "env_steps_pending": [0, -1, 2]}},
            ">= 0 or null",
        ),
    ],
)
def test_a_bad_step_count_or_breakdown_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        RunRow.from_dict(data)


def test_step_rule_of_each_family_before_and_since_issue_39():
    def old(name):
        return RunRow.from_dict(old_row_dict(algorithm="X", settings={"registered_algorithm": name}))

    assert rows_lib.step_rule(old("TD3_EXT")) == rows_lib.step_rule(old("APPO")) == "every step"  # as now
    assert rows_lib.step_rule(old("DFD_EXT")) == rows_lib.step_rule(old("ES_EXT")) == "before 2026-11-27, black-box"
    assert rows_lib.step_rule(old("AESRL_EXT")) == "before 2026-11-27, AES-RL"
    assert rows_lib.counted_short(old("CEMRL_EXT")) and not rows_lib.counted_short(old("IMPACT_EXT"))
    new = make_row(algorithm="X", settings={"registered_algorithm": "AESRL_EXT"})
    assert rows_lib.step_rule(new) == "every step" and not rows_lib.counted_short(new)
