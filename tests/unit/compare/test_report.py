"""rllib_ext.compare.report (``rllib report``) on hand-made rows: the table, the like-with-like check, the figures."""

from __future__ import annotations

import dataclasses

import pytest

from rllib_ext import cli
from rllib_ext.compare import report
from rllib_ext.compare.rows import OLD_STEP_COUNT, Curve, Machine, RunRow, append_row


def row(algorithm="A", seed=0, finals=(10.0, 50.0, 100.0), target=None, race="r1", **changes) -> RunRow:
    base = RunRow(
        benchmark="bench",
        race=race,
        algorithm=algorithm,
        env="CartPole-v1",
        seed=seed,
        settings={"model_config": {"fcnet_hiddens": [64]}, "num_env_runners": 1, "lr": 0.1, "threads": 1},
        shared_keys=["model_config", "num_env_runners", "threads"],
        variable=[],
        protocol={"budget_env_steps": 2000, "eval_every_env_steps": 1000, "eval_episodes": 5},
        machine=Machine(cores=2, description="cpu"),
        date="2026-01-01T00:00:00+00:00",
        curve=Curve(env_steps=[0, 1000, 2000], wall_s=[0.0, 1.0 + seed, 2.0 + seed], eval_return=list(finals)),
        target=target,
        extra={"command": "python -m benchmarks.harness.race ..."},
    )
    return dataclasses.replace(base, **changes)


def race_rows(**kw):
    rows = [row("A", s, finals=(0.0, 50.0, 100.0 + s), **kw) for s in range(5)]
    return rows + [row("B", s, finals=(0.0, 10.0, 20.0 + s), **kw) for s in range(5)]


def test_a_comparable_race_gets_iqm_ci_and_per_seed_finals():
    table = report.summary_table(race_rows(), {("bench", "CartPole-v1"): "fig.png"})
    assert "comparable" in table and "NOT" not in table
    assert "![bench CartPole-v1](fig.png)" in table
    line_a = next(line for line in table.splitlines() if line.startswith("| A |"))
    # Finals 100..104: IQM of 5 values trims 1 from each end -> 102.0.
    assert "| 5 | 102.0 [" in line_a
    assert "0: 100.0, 1: 101.0, 2: 102.0, 3: 103.0, 4: 104.0" in line_a
    assert "python -m benchmarks.harness.race" in table


def test_a_race_shows_each_algorithms_probability_of_improving_on_each_other():
    rows = race_rows() + [row("C", s, finals=(0.0, 50.0, 100.0 + s)) for s in range(5)]  # C ties A run for run
    table = report.summary_table(rows, {})
    lines = table.splitlines()
    assert "| P(row > column) | A | B | C |" in lines
    cells = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines if line.startswith(("| A |", "| B |"))}
    assert cells["A"][0] == "—" and cells["A"][1] == "1.00 [1.00, 1.00]"  # every run of A beats every run of B
    assert cells["A"][2].startswith("0.50 [")  # A and C: the same finals
    assert cells["B"][0] == "0.00 [0.00, 0.00]"
    one = report.summary_table([r for r in rows if r.algorithm == "A"], {})
    assert "P(row > column)" not in one  # one algorithm: nothing to compare


def test_every_distinct_command_of_a_race_is_shown_once():
    """An --append adds entries with their own command: the table shows each command, once, in order."""
    rows = race_rows()
    appended = [dataclasses.replace(r, algorithm="C", extra={"command": "python -m race --append C"}) for r in rows[:5]]
    table = report.summary_table(rows + appended, {})
    assert table.count("python -m benchmarks.harness.race ...") == 1 and table.count("--append C") == 1
    assert table.index("python -m benchmarks.harness.race ...") < table.index("--append C")


def test_a_row_with_another_shared_setting_marks_the_race_not_comparable():
    rows = race_rows()
    rows[3] = dataclasses.replace(rows[3], settings={**rows[3].settings, "model_config": {"fcnet_hiddens": [256]}})
    rows[4] = dataclasses.replace(rows[4], protocol={**rows[4].protocol, "eval_episodes": 1})
    assert report.differing_keys(rows) == ["settings.model_config", "protocol.eval_episodes"]
    table = report.summary_table(rows, {})
    assert "**NOT comparable**: rows differ in settings.model_config, protocol.eval_episodes" in table


def test_rows_of_another_machine_compare_per_env_step_only_and_say_so():
    """race --other-machine: a race with an env-step budget stays comparable per env step, and says
    that its wall times are not; with a time budget, another machine makes it NOT comparable."""
    rows = race_rows()
    rows[4] = dataclasses.replace(rows[4], machine=Machine(cores=2, description="other cpu"))
    assert report.comparability(rows) == (["machine"], True)
    table = report.summary_table(rows, {})
    assert "comparable per env step; its rows ran on 2 machines (cpu, 2 cores; other cpu, 2 cores)" in table
    assert "**wall times are not comparable**" in table and "NOT comparable" not in table
    assert "| P(row > column) | A | B |" in table
    timed = [dataclasses.replace(r, protocol={**r.protocol, "budget_s": 60.0}) for r in rows]
    assert report.comparability(timed) == (["machine"], False)
    assert "**NOT comparable**: rows differ in machine" in report.summary_table(timed, {})
    settings = [*rows[:3], dataclasses.replace(rows[3], settings={**rows[3].settings, "threads": 2}), rows[4]]
    assert report.comparability(settings) == (["settings.threads", "machine"], False)  # and another setting


def test_own_settings_and_declared_variables_are_not_checked():
    rows = race_rows()
    rows[0] = dataclasses.replace(rows[0], settings={**rows[0].settings, "lr": 0.5})  # own setting
    assert report.differing_keys(rows) == []
    varied = [dataclasses.replace(r, variable=["num_env_runners"]) for r in rows]
    varied[1] = dataclasses.replace(varied[1], settings={**varied[1].settings, "num_env_runners": 4})
    assert report.differing_keys(varied) == []
    machines = list(rows)
    machines[2] = dataclasses.replace(machines[2], machine=Machine(cores=16, description="big"))
    assert report.differing_keys(machines) == ["machine"]


def test_time_to_target_counts_unreached_runs_honestly():
    # A reaches 100 at the last point in every seed; B never does.
    table = report.summary_table(race_rows(target=100.0), {})
    line_a = next(line for line in table.splitlines() if line.startswith("| A |"))
    line_b = next(line for line in table.splitlines() if line.startswith("| B |"))
    assert "| 5/5 | 2.0k [2.0k, 2.0k] |" in line_a
    assert "| 0/5 | not reached | not reached |" in line_b
    # 3 of 5 reach 102: a lower bound, with the unreached runs counted at their budget.
    rows = [row("C", s, finals=(0.0, 50.0, 100.0 + s), target=102.0) for s in range(5)]
    reached, steps, wall = report.target_cells(rows)
    assert reached == "3/5" and steps == "≥ 2.0k" and wall.startswith("≥ ")


def test_time_to_target_is_the_first_evaluation_reaching_it():
    r = row(finals=(0.0, 100.0, 50.0), target=90.0)
    assert report.time_to_target(r) == (1000.0, 1.0)
    assert report.time_to_target(row(target=None)) is None


def test_rllib_report_draws_figures_and_a_summary_from_the_rows(tmp_path, capsys):
    results = tmp_path / "results"
    for r in race_rows(target=100.0):
        append_row(str(results / "bench" / "r1.jsonl"), r)
    assert cli.main(["report", str(results)]) == 0
    assert (results / "figures" / "bench_CartPole-v1.png").stat().st_size > 1000
    text = (results / "REPORT.md").read_text()
    assert "![bench CartPole-v1](figures/bench_CartPole-v1.png)" in text and "| A | 5 |" in text
    assert "P(row > column)" in text
    assert f"summary in {results / 'REPORT.md'}" in capsys.readouterr().out
    out = tmp_path / "elsewhere" / "r.md"
    assert cli.main(["report", str(results), "--figures-dir", str(tmp_path / "png"), "-o", str(out)]) == 0
    assert "](../png/bench_CartPole-v1.png)" in out.read_text()


def test_rllib_report_names_a_missing_folder_or_a_bad_row(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert "no results folder" in capsys.readouterr().err
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "r1.jsonl").write_text(row().to_json() + "\n{}\n")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "r1.jsonl:2: bad row" in capsys.readouterr().err


def test_git_commit_names_the_checkout_of_a_path(tmp_path):
    """How a before/after measurement row names the code it measured."""
    import subprocess

    from rllib_ext.compare.rows import git_commit

    repo = tmp_path / "repo"
    repo.mkdir()
    assert git_commit(str(repo)) == "unknown"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.check_output([*git, "rev-parse", "--short", "HEAD"], text=True).strip()
    assert git_commit(str(repo)) == head


def test_append_measurement_writes_what_read_measurements_reads(tmp_path):
    from rllib_ext.compare.rows import RowError, append_measurement, read_measurements

    path = tmp_path / "results" / "measurements" / "b" / "d.jsonl"
    append_measurement(str(path), {"benchmark": "b", "x": 1.5})
    append_measurement(str(path), {"benchmark": "b", "x": 2.5})
    assert read_measurements(str(tmp_path / "results")) == [{"benchmark": "b", "x": 1.5}, {"benchmark": "b", "x": 2.5}]
    with pytest.raises(RowError, match="'benchmark'"):
        append_measurement(str(path), {"x": 3.0})
    assert len(path.read_text().splitlines()) == 2


# ---------------------------------------------------------------------------------------------
# Env steps: the breakdown per entry; rows counted the old way are marked, never pooled.
# ---------------------------------------------------------------------------------------------
def old(r: RunRow, name: str, **settings) -> RunRow:
    """``r`` as a row written before 2026-11-27 (schema 1) of the registered algorithm ``name``."""
    return dataclasses.replace(
        r,
        schema=1,
        step_count=OLD_STEP_COUNT,
        settings={**r.settings, **settings, "registered_algorithm": name},
    )


def halfcheetah(algo, name, seed, updates=None, **settings):
    """A HalfCheetah race's row at 200k counted env steps (every episode 1000 steps)."""
    r = row(algo, seed, finals=(0.0, 50.0, 100.0 + seed))
    r = dataclasses.replace(
        r,
        env="HalfCheetah-v5",
        protocol={**r.protocol, "budget_env_steps": 200_000},
        curve=dataclasses.replace(r.curve, env_steps=[0, 100_000, 200_000]),
        extra={**r.extra, **({"updates": [0, 100, updates]} if updates else {})},
    )
    return old(r, name, **settings)


def test_the_breakdown_of_each_entry_is_shown_where_the_rows_have_it():
    breakdown = {
        "env_steps_used_lifetime": [None, 700, 1400],
        "env_steps_evaluation_lifetime": [None, 200, 400],
        "env_steps_wasted_lifetime": [None, 100, 150],
        "env_steps_pending": [None, 0, 50],
    }
    rows = [dataclasses.replace(r, env_steps_breakdown=breakdown) if r.algorithm == "A" else r for r in race_rows()]
    table = report.summary_table(rows, {})
    assert "env steps used / evaluation / wasted / pending at the end (IQM)" in table
    line_a = next(line for line in table.splitlines() if line.startswith("| A |"))
    line_b = next(line for line in table.splitlines() if line.startswith("| B |"))
    assert line_a.endswith("| 1.4k / 400 / 150 / 50 |") and line_b.endswith("| not logged |")
    assert "old way" not in table and "n/c" not in table
    assert "breakdown" not in report.summary_table(race_rows(), {})  # no row has one: no column


def test_an_old_race_of_several_families_is_marked_and_not_compared_across_them(tmp_path):
    rows = [halfcheetah("TD3", "TD3_EXT", s) for s in range(5)]
    # CEM-RL: 20 generations x 10 individuals x 1000 steps = 200k counted: none failed, nothing left out.
    rows += [halfcheetah("CEM-RL", "CEMRL_EXT", s, updates=20) for s in range(5)]
    rows += [halfcheetah("P-CEM-RL", "CEMRL_EXT", s, updates=21) for s in range(5)]  # some steps not counted
    rows += [halfcheetah("AES-RL", "AESRL_EXT", s, updates=198) for s in range(5)]
    note = "counted the old way (before 2026-11-27): not comparable across families"
    assert report.step_axis_note(rows) == note and report.differing_keys(rows) == []
    table = report.summary_table(rows, {})
    assert f"Step axis **{note}**" in table
    lines = table.splitlines()
    cells = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and " | 5 | " in line}
    assert cells["TD3"].endswith("| every sampled step (counted as now) |")
    assert "counted the old way: = 200.0k simulated (nothing left out" in cells["CEM-RL"]
    assert "counted the old way: ≥ 200.0k simulated (what it left out is not recorded)" in cells["P-CEM-RL"]
    # AES-RL: 198 told individuals x 5 μ episodes x 1000 steps (HalfCheetah's limit; 200k/198 > 1000).
    assert "≈ 1190.0k simulated, of which ≈ 990.0k μ re-evaluation steps (83%) not counted" in cells["AES-RL"]
    p_table = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines if "| — |" in line or " — " in line}
    assert p_table["TD3"][1].startswith("0.") and p_table["TD3"][2:] == ["n/c †", "n/c † |"]  # TD3 vs CEM-RL: alike
    assert p_table["CEM-RL"][2] == "n/c †" and p_table["AES-RL"][:3] == ["n/c †"] * 3
    assert "† not compared" in table
    report.write_figures(rows, str(tmp_path), str(tmp_path))  # the title says it (drawn without error)


def test_an_old_race_of_one_family_is_comparable_within_and_its_uncounted_evaluations_estimated():
    # ES, 40 perturbations and 10 θ_u episodes per update: 1/5 of the steps were not counted.
    rows = [old(r, "ES_EXT", eval_episodes=10, episodes_per_batch=40) for r in race_rows()]
    rows = [dataclasses.replace(r, extra={**r.extra, "updates": [0, 5, 10]}) for r in rows]
    assert (
        report.step_axis_note(rows)
        == "counted the old way (before 2026-11-27), one family's rule: not comparable with steps counted since"
    )
    table = report.summary_table(rows, {})
    assert "≥ 2.5k simulated, of which ≈ 500 θ_u evaluation steps (20%) not counted" in table
    assert "| P(row > column) | A | B |" in table and "n/c" not in table
    # With its default eval_episodes (0 then) nothing is estimated beyond what was counted.
    plain = [old(r, "CVES_EXT") for r in race_rows()]
    plain = [dataclasses.replace(r, extra={**r.extra, "updates": [0, 5, 10]}) for r in plain]
    assert "≥ 2.0k simulated (what it left out is not recorded)" in report.summary_table(plain, {})


def test_a_time_budget_compares_final_returns_whatever_the_step_count():
    rows = [old(r, "ES_EXT" if r.algorithm == "A" else "TD3_EXT") for r in race_rows()]
    timed = [dataclasses.replace(r, protocol={"budget_s": 60.0, "eval_every_env_steps": 1000}) for r in rows]
    table = report.summary_table(timed, {})
    assert "not comparable across families" in table and "n/c" not in table


def test_rows_counted_before_and_since_issue_39_are_never_pooled():
    rows = race_rows()
    rows[:3] = [old(r, "ES_EXT") for r in rows[:3]]  # A's seeds 0-2 counted the old way, 3-4 since
    rows[3:] = [dataclasses.replace(r, settings={**r.settings, "registered_algorithm": "ES_EXT"}) for r in rows[3:]]
    assert report.differing_keys(rows) == ["step_count"]
    assert list(report.entry_groups(rows)) == ["A [before-2026-11-27]", "A [every-simulated-step]", "B"]
    table = report.summary_table(rows, {})
    assert "**NOT comparable**: rows differ in step_count" in table
    assert "| A [before-2026-11-27] | 3 |" in table and "| A [every-simulated-step] | 2 |" in table
    # Old rows of algorithms that counted every step then as now join new ones.
    rlib = [old(r, "IMPACT_EXT") if r.seed < 2 else r for r in race_rows()]
    assert report.differing_keys(rlib) == [] and report.step_axis_note(rlib) is None


# ---------------------------------------------------------------------------------------------
# Tuning (issue 40): the report's words, tuning rows apart, mean return over fixed budgets, CPU s.
# ---------------------------------------------------------------------------------------------
def grid_record(sizes, chosen=None, point=None, seeds=(1000, 1001)):
    unequal = [a for a, k in sizes.items() if k < max(sizes.values())]
    lrs = [0.1, 0.2, 0.3, 0.4]
    record = {"rule": "grid", "grid": {"lr": lrs[:2]}, "grid_sizes": sizes, "seeds": list(seeds)}
    record["not_equally_tuned"] = unequal
    if chosen is not None:
        record.update(chosen={"lr": lrs[chosen]}, chosen_index=chosen)
    if point is not None:
        record.update(point={"lr": lrs[point]}, point_index=point)
    return record


def tuned_rows(sizes):
    rows = [
        dataclasses.replace(r, tuning=grid_record(sizes, chosen=1 if sizes.get(r.algorithm, 1) > 1 else None))
        for r in race_rows()
    ]
    tuning = [
        row(a, seed, finals=(0.0, 1.0, 1000.0 * (i + 1)), stage="tuning", tuning=grid_record(sizes, point=i))
        for a in sizes
        if sizes[a] > 1
        for seed in (1000, 1001)
        for i in range(sizes[a])
    ]
    return rows, tuning


def test_equal_tuning_effort_is_said_and_tuning_rows_stay_apart():
    rows, tuning = tuned_rows({"A": 2, "B": 2})
    table = report.summary_table(rows + tuning, {})
    assert "Tuning: equal tuning effort (grid of 2 per entry, on tuning seeds [1000, 1001]" in table
    line_a = next(line for line in table.splitlines() if line.startswith("| A | 5 |"))
    assert "| 5 | 102.0 [" in line_a  # the evaluation rows alone: the tuning finals (1000, 2000) are not pooled
    assert '| A | `{"lr": 0.1}` | 1000: 1000.0, 1001: 1000.0 | 1000.0 |' in table
    assert '| A | **`{"lr": 0.2}`** (chosen) | 1000: 2000.0, 1001: 2000.0 | **2000.0** |' in table
    assert "P(row > column)" in table and "1.00 [1.00, 1.00]" in table  # A over B, from evaluation rows
    assert report.differing_keys(rows) == []


def test_unequal_tuning_names_the_entries_and_untuned_races_say_so():
    rows, tuning = tuned_rows({"A": 2, "B": 1})
    table = report.summary_table(rows + tuning, {})
    assert "**unequal tuning effort**: not equally tuned: B (not tuned), against a grid of 2" in table
    rows3, _ = tuned_rows({"A": 4, "B": 2})
    assert "not equally tuned: B (grid of 2), against a grid of 4" in report.tuning_words(rows3)
    assert "Tuning: not tuned: rivals' own defaults." in report.summary_table(race_rows(), {})
    mixed = race_rows()[:5] + [dataclasses.replace(r, tuning={"rule": "grid"}) for r in race_rows()[5:]]
    assert "tuning rule" in report.differing_keys(mixed)


def test_matched_races_name_the_mapping_and_the_untuned_rivals():
    rules = {"A": {"rule": "matched", "pairs": {"B": "A"}}}
    rules["B"] = {**rules["A"], "source": "A", "paper": "paper 004 §3.2, §4.1.1", "values": {"lr": 0.1}}
    rules["C"] = rules["A"]
    rows = [dataclasses.replace(r, tuning=rules[r.algorithm]) for r in race_rows()]
    rows += [row("C", s, tuning=rules["C"]) for s in range(5)]
    words = report.tuning_words(rows)
    assert words == (
        "matched settings: B given A's in its own units (paper 004 §3.2, §4.1.1); not tuned: C (own defaults)"
    )


def test_mean_return_over_a_budget_is_the_step_held_area_divided_by_the_budget():
    xs, ys = [0, 1000, 2000], [0.0, 50.0, 100.0]
    assert report.mean_return_until(xs, ys, 2000) == 25.0  # 0 over [0, 1k), 50 over [1k, 2k)
    assert report.mean_return_until(xs, ys, 1500) == 50.0 * 500 / 1500
    assert report.mean_return_until(xs, ys, 4000) == (50.0 * 1000 + 100.0 * 2000) / 4000  # the last value held
    assert report.mean_return_until([0], [7.0], 10) == 7.0


def test_the_table_gives_mean_returns_at_fixed_budgets_and_cpu_beside_wall_seconds():
    rows = [
        dataclasses.replace(r, curve=dataclasses.replace(r.curve, cpu_s=[0.0, 1.5, 3.0 + r.seed])) for r in race_rows()
    ]
    table = report.summary_table(rows, {})
    assert "env steps, wall s, CPU s (, updates) at the end (IQM)" in table
    assert "mean return over the first 2.0k env steps (AUC ÷ budget)" in table
    assert "mean return over the first 2 s (AUC ÷ budget)" in table  # no wall budget: the shortest run's wall
    line_a = next(line for line in table.splitlines() if line.startswith("| A |"))
    assert "2.0k, 4.0, 5.0 CPU s |" in line_a and "| 25.0 [" in line_a
    assert "CPU s" not in report.summary_table(race_rows(), {})  # rows without CPU time


# ---------------------------------------------------------------------------------------------
# race_block: a race's short table for a docs page (make bench-report writes it between markers).
# ---------------------------------------------------------------------------------------------
def test_race_block_says_separated_only_where_the_interval_excludes_half():
    rows = race_rows(target=60.0) + [row("C", s, finals=(0.0, 50.0, 100.0 + s), target=60.0) for s in range(5)]
    rows = rows[::-1]  # seeds out of order: the block's intervals are still the summary's
    block = report.race_block(rows, "../RESULTS.md#race-bench-r1")
    assert block.startswith("Race [`r1`](../RESULTS.md#race-bench-r1): bench, CartPole-v1; 2000 env steps per run.")
    assert "Tuning: not tuned: rivals' own defaults." in block
    assert "| entry | seeds | final return, IQM [95% CI] | env steps to 60 (reached) |\n" in block
    assert "| 2.0k [2.0k, 2.0k] (5/5) |" in block and "| not reached (0/5) |" in block
    summary = report.summary_table(rows, {})
    for entry in "ABC":
        line = next(x for x in block.splitlines() if x.startswith(f"| {entry} | 5 | "))
        assert f"| {entry} | 5 | {line.split(' | ')[2]} |" in summary
    # Each pair once, read the way round its point favours; the numbers are the summary's.
    assert "| P(A > B) | 1.00 [1.00, 1.00], separated |" in block
    assert "| P(C > B) | 1.00 [1.00, 1.00], separated |" in block
    a_c = next(line for line in block.splitlines() if line.startswith("| P(") and "A" in line and "C" in line)
    assert a_c.endswith(", not separated |") and "0.50 [" in a_c  # the same finals
    assert "P(B >" not in block
    assert a_c.split(" | ")[1].split(",")[0] in summary


def test_separated_means_the_interval_excludes_half():
    from rllib_ext.stats import Interval

    assert report.separated(Interval(0.88, 0.60, 1.00)) and report.separated(Interval(0.10, 0.0, 0.45))
    assert not report.separated(Interval(0.60, 0.50, 0.80))  # touching 0.5 is not excluding it
    assert not report.separated(Interval(0.24, 0.00, 0.60))


def test_race_block_shows_the_entries_asked_for_and_refuses_unknown_ones():
    rows = race_rows() + [row("C", s, finals=(0.0, 50.0, 100.0 + s)) for s in range(5)]
    block = report.race_block(rows, "R.md#x", entries=["B", "A"])
    assert block.index("| B | 5 |") < block.index("| A | 5 |") and "| C |" not in block  # in the order asked
    assert "| P(A > B) |" in block and "P(A > C)" not in block
    assert "env steps to" not in block  # no target
    with pytest.raises(ValueError, match="has no entry D"):
        report.race_block(rows, "R.md#x", entries=["A", "D"])
    with pytest.raises(ValueError, match="has no entry D"):
        report.race_block(rows, "R.md#x", against="D")


def test_race_block_against_one_entry_gives_its_pairs_as_a_column():
    rows = race_rows() + [row("C", s, finals=(0.0, 50.0, 100.0 + s)) for s in range(5)]
    block = report.race_block(rows, "R.md#x", entries=["C", "B"], against="A")
    lines = block.splitlines()
    assert "| entry | seeds | final return, IQM [95% CI] | P(A > entry) [95% CI] |" in lines
    assert [line.split(" | ")[0] for line in lines if line.startswith("| ") and " | 5 | " in line] == [
        "| A",
        "| C",
        "| B",
    ]
    assert lines[-3].startswith("| A | 5 |") and lines[-3].endswith(" | — |")
    assert lines[-1].startswith("| B | 5 |") and lines[-1].endswith("| 1.00 [1.00, 1.00], separated |")
    assert lines[-2].startswith("| C | 5 |") and lines[-2].endswith(", not separated |")
    assert "P(X > Y)" not in block  # no pair table: C against B is not A's
    # Read from B's side, its column is P(B > A): the other way round, as the summary's matrix has it.
    from_b = report.race_block(rows, "R.md#x", entries=["A"], against="B")
    assert from_b.splitlines()[-1].endswith("| 0.00 [0.00, 0.00], separated |")


def test_race_block_names_the_pairs_not_compared_across_step_rules():
    rows = [halfcheetah("TD3", "TD3_EXT", s) for s in range(5)]
    rows += [halfcheetah("AES-RL", "AESRL_EXT", s, updates=198) for s in range(5)]
    block = report.race_block(rows, "R.md#x")
    assert "step axis counted the old way" in block
    assert block.endswith("| P(TD3 > AES-RL) | not compared: step rules differ |\n")
    focused = report.race_block(rows, "R.md#x", against="AES-RL")
    assert focused.splitlines()[-2].startswith("| AES-RL | 5 |")
    assert focused.splitlines()[-1].startswith("| TD3 | 5 |") and focused.endswith(
        "| not compared: step rules differ |\n"
    )


def test_race_block_of_a_tuned_race_shows_its_evaluation_rows_and_tuning_rule():
    rows, tuning = tuned_rows({"A": 2, "B": 2})
    block = report.race_block(tuning + rows, "R.md#x")
    assert "Tuning: equal tuning effort (grid of 2 per entry, on tuning seeds [1000, 1001]" in block
    assert "| A | 5 | 102.0 [" in block  # the tuning finals (1000, 2000 on seeds 1000, 1001) are not pooled
    assert "1000.0" not in block and "grid point" not in block
    assert "| P(A > B) | 1.00 [1.00, 1.00], separated |" in block
    only_tuning = report.race_block(tuning, "R.md#x")
    assert only_tuning == "Race [`r1`](R.md#x) (CartPole-v1): no evaluation rows yet (tuning under way).\n"
    rules = {"A": {"rule": "matched", "pairs": {"B": "A"}}}
    rules["B"] = {**rules["A"], "source": "A", "paper": "paper 004", "values": {"lr": 0.1}}
    matched = [dataclasses.replace(r, tuning=rules[r.algorithm]) for r in race_rows()]
    assert "Tuning: matched settings: B given A's in its own units (paper 004)." in report.race_block(matched, "R.md#x")


def test_race_block_says_what_the_summary_says_of_an_uncomparable_race_and_links_its_anchor():
    rows = race_rows()[:5] + [dataclasses.replace(r, settings={**r.settings, "threads": 2}) for r in race_rows()[5:]]
    assert "**NOT comparable**: rows differ in settings.threads" in report.race_block(rows, "R.md#x")
    other = race_rows()[:5] + [dataclasses.replace(r, machine=Machine(2, "other")) for r in race_rows()[5:]]
    block = report.race_block(other, "R.md#x")
    assert "comparable per env step; rows of 2 machines, so **wall times are not comparable**" in block
    assert "| P(A > B) | 1.00 [1.00, 1.00], separated |" in block
    table = report.summary_table(race_rows(), {})
    assert f'<a id="{report.race_anchor("bench", "r1")}"></a>' in table
    assert report.race_anchor("b", "r 1") == "race-b-r_1"


# ---------------------------------------------------------------------------------------------
# The same race read per individual env step (env steps less the algorithm's own evaluations).
# ---------------------------------------------------------------------------------------------
def with_breakdown(r: RunRow, evaluation, wasted=(None, 0, 0), pending=(None, 0, 0)) -> RunRow:
    """``r`` with a breakdown whose evaluation steps are ``evaluation`` (used: the rest)."""
    used = [
        None if e is None else total - e - w - p
        for total, e, w, p in zip(r.curve.env_steps, evaluation, wasted, pending, strict=True)
    ]
    breakdown = {
        "env_steps_used_lifetime": used,
        "env_steps_evaluation_lifetime": list(evaluation),
        "env_steps_wasted_lifetime": list(wasted),
        "env_steps_pending": list(pending),
    }
    return dataclasses.replace(r, env_steps_breakdown=breakdown)


def individual_race():
    """A spends 200 / 500 of its steps (at 1k / 2k) re-evaluating μ; B never evaluates; C does not log it."""
    a = [with_breakdown(row("A", s, finals=(0.0, 50.0, 100.0 + s)), (None, 200, 500), (None, 50, 50)) for s in range(5)]
    b = [with_breakdown(row("B", s, finals=(0.0, 10.0, 20.0 + s)), (None, 0, 0)) for s in range(5)]
    c = [row("C", s, finals=(0.0, 30.0, 60.0 + s)) for s in range(5)]
    return a + b + c


def test_the_individual_step_axis_is_env_steps_less_the_evaluation_steps():
    r = with_breakdown(row(), (None, 200, 500), wasted=(None, 50, 50), pending=(None, 10, 0))
    assert report.individual_steps(r) == [0.0, 800.0, 1500.0]  # used + wasted + pending; none before training
    assert report.individual_steps(row()) is None  # no breakdown: not logged
    gap = with_breakdown(row(), (None, 200, None))
    assert report.individual_steps(gap) is None  # unknown at the end
    held = dataclasses.replace(gap, env_steps_breakdown={k: [*v[:2], v[1]] for k, v in gap.env_steps_breakdown.items()})
    held.env_steps_breakdown["env_steps_evaluation_lifetime"][1] = None  # unknown mid-curve: the last known carried
    assert report.individual_steps(held) == [0.0, 1000.0, 1800.0]


def test_a_race_with_evaluation_steps_is_also_read_at_an_equal_individual_step_budget():
    rows = individual_race()
    assert report.individual_step_budget(rows) == 1500.0  # A's 2000 - 500: the most every run reached
    table = report.summary_table(rows, {})
    assert "Read per individual env step: x = env steps less the algorithm's own evaluation steps" in table
    assert "the race's budget (2000 env steps) was on total env steps" in table
    assert "mean return over the first 1.5k individual env steps (AUC ÷ budget)" in table
    part = table[table.index("Read per individual env step") :]
    line = {name: next(x for x in part.splitlines() if x.startswith(f"| {name} |")) for name in "ABC"}
    # A: 0 over [0, 800), 50 over [800, 1500): 50 * 700 / 1500; the same final returns as the main table.
    assert line["A"].startswith("| A | 5 | 102.0 [") and "| 1.5k | 23.3 [" in line["A"]
    # B: no evaluation steps, so its own axis is total steps, read to the same 1.5k: 10 * 500 / 1500.
    assert "| 2.0k | 3.3 [" in line["B"]
    assert line["C"].endswith("| not logged | not logged |")  # no breakdown (e.g. schema 1, RLlib's own)
    assert table.index("| A | 5 |") < table.index("Read per individual env step")  # after the race's table


def test_nothing_is_read_per_individual_step_in_a_race_without_evaluation_steps():
    rows = [r for r in individual_race() if r.algorithm != "A"]  # B logs 0 evaluation steps, C none
    assert not report.has_evaluation_steps(rows)
    assert "individual env step" not in report.summary_table(rows, {})
    assert "individual env step" not in report.summary_table(race_rows(), {})
