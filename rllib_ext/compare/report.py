"""The report of races (``rllib report``): every figure and the summary table, drawn from the rows alone.

Reads every ``<results-dir>/**/*.jsonl`` (:mod:`rllib_ext.compare.rows`, written by ``rllib race``)
and writes (:func:`write_report`):

- ``<figures-dir>/<benchmark>_<env>.png``: per algorithm, the IQM over seeds of the evaluation
  return against env steps (left) and against training wall time (right), with 95% stratified
  bootstrap CI bands (:mod:`rllib_ext.stats`). Runs are put on a common grid by holding each
  run's last evaluation (:func:`rllib_ext.stats.step_hold`), only where every run has one.
- the summary table (Markdown): per (benchmark,
  env, race, algorithm) the number of seeds, the final evaluation return's IQM [95% CI], each
  seed's final return, and, where the race set a target, how many runs reached it and the env
  steps and wall seconds to it (IQM [95% CI] when every run reached it; otherwise a lower bound
  "≥" with unreached runs counted at their budget, never dropped); and, for a race of two or more
  algorithms, the probability of improvement of each over each other (P(row > column) of the final
  evaluation return, [95% CI], :func:`rllib_ext.stats.probability_of_improvement`): where two
  IQM intervals overlap, this says how often a run of one beats a run of the other.

Like with like: the rows of one race must agree on every shared setting (``shared_keys``, less the
race's declared ``variable`` keys), on the protocol (budget, evaluation) and on the machine;
otherwise the race is marked NOT comparable in the table and in its figure, naming the keys. One
exception: rows that differ only in the machine (``race --other-machine``) of a race whose budget is
env steps alone stay comparable per env step (returns, probability of improvement), and the table
and the figure say that their wall times are not.

Env steps: rows written since count every env step the algorithm simulated, and the
table shows per entry where they went (used / evaluation / wasted / pending at the end, IQM over
seeds). Rows written before counted the black-box family (ES_EXT, DFD_EXT, CVES_EXT, ARS_EXT) and
the ERL algorithms (AESRL_EXT, CEMRL_EXT) short (:data:`rllib_ext.compare.rows.OLD_RULE_LEFT_OUT`):
such a race says its step axis is "counted the old way (before 2026-11-27)", and where it holds other
families "not comparable across families", in the table and in its figure; the table gives, where
the rows allow it, an estimate of the steps simulated (:func:`recount`); and the probability of
improvement of a race with an env-step budget is not given between entries counted by different
rules. Rows of one race counted under both rules are never pooled: each algorithm's rows of each
rule are an entry of their own, and the race is NOT comparable.

Per individual env step: where some row of a race spent env steps on the algorithm's own evaluations
(``evaluation`` of the breakdown, e.g. AES-RL's f(μ) re-evaluations), the race is also read on an axis
of env steps less those (:func:`individual_step_lines`): per entry the final return, the individual env
steps at the end and the mean return over the first B of them, B the most every run reached; entries
whose rows do not log the breakdown are "not logged". The race's budget stays on total env steps.

Tuning (schema 3 rows, :mod:`rllib_ext.compare.tuning`): each race says how its entries' own
settings were chosen (:func:`tuning_words`): "equal tuning effort (grid of k per entry)", the entries
not equally tuned by name, the matched mappings, or "not tuned: rivals' own defaults" (every race
without a tuning stage, older rows too); its tuning runs (``stage="tuning"``) are listed apart, per
grid point with the chosen one marked, and never enter the table, the figures or P(X > Y).
Beside the final return the table gives the mean return over fixed budgets (the area under the
step-held curve ÷ the budget, :func:`mean_return_until`): over the race's env-step budget and over
its wall budget (each the smallest any run reached where the race had none), and CPU seconds
beside wall seconds where the rows hold them.

The project's own report (``make bench-report``, ``benchmarks/harness/report.py``) adds its
measurement tables and writes the summary into ``benchmarks/RESULTS.md``, and each docs page's
results blocks (:func:`race_block`: one race's entries, P(X > Y) said "separated" only where its
interval excludes 0.5 (:func:`separated`), its tuning rule and a link to its anchor in the summary).
Nothing here prints or exits; a bad row raises :class:`~rllib_ext.compare.rows.RowError` naming its file and line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from rllib_ext import stats
from rllib_ext.compare import tuning as tuning_lib
from rllib_ext.compare.rows import (
    EVERY_SIMULATED_STEP,
    OLD_RULE_FAMILY,
    OLD_RULE_LEFT_OUT,
    TUNING,
    RunRow,
    counted_short,
    evaluation_rows,
    group_by,
    read_all,
    step_rule,
)

SEED = 0  # of every bootstrap: the report is the same each time it is regenerated


def differing_keys(rows: Sequence[RunRow]) -> list[str]:
    """What the rows of one race disagree on, besides the algorithm, seed and declared variables.

    Returns:
        Sorted descriptions: ``settings.<key>`` for a shared setting, ``protocol.<key>``,
        ``machine``, ``env`` or ``target``.
    """
    variable = set().union(*(r.variable for r in rows))
    shared = set().union(*(r.shared_keys for r in rows)) - variable
    found = []
    missing = object()

    def differ(values) -> bool:
        return len({json.dumps(v, sort_keys=True, default=repr) for v in values}) > 1

    for key in sorted(shared):
        if differ(r.settings.get(key, missing) for r in rows):
            found.append(f"settings.{key}")
    for key in sorted(set().union(*(r.protocol for r in rows))):
        if differ(r.protocol.get(key, missing) for r in rows):
            found.append(f"protocol.{key}")
    for name, get in (("machine", lambda r: (r.machine.cores, r.machine.description)), ("env", lambda r: r.env)):
        if differ(get(r) for r in rows):
            found.append(name)
    if differ(r.target for r in rows):
        found.append("target")
    if mixes_step_counts(rows):
        found.append("step_count")
    if differ(rule_of(r) for r in rows):
        found.append("tuning rule")
    return found


# ---------------------------------------------------------------------------------------------
# Tuning and fixed budgets.
# ---------------------------------------------------------------------------------------------
def rule_of(row: RunRow) -> str:
    """The row's tuning rule: grid, matched or none (rows before schema 3: none)."""
    return (row.tuning or {}).get("rule", tuning_lib.NONE)


def tuning_words(rows: Sequence[RunRow]) -> str:
    """How a race chose its entries' own settings, in the report's words (its evaluation rows)."""
    records = {r.algorithm: r.tuning or {"rule": tuning_lib.NONE} for r in rows}
    rules = {rec["rule"] for rec in records.values()}
    if rules == {tuning_lib.NONE}:
        return "not tuned: rivals' own defaults"
    if len(rules) > 1:
        return "**mixed tuning rules** (" + ", ".join(f"{a}: {rec['rule']}" for a, rec in records.items()) + ")"
    if rules == {tuning_lib.MATCHED}:
        targets = {a: rec for a, rec in records.items() if "source" in rec}
        sources = {rec["source"] for rec in targets.values()}
        words = "matched settings: " + "; ".join(
            f"{a} given {rec['source']}'s in its own units ({rec['paper']})" for a, rec in targets.items()
        )
        others = [a for a in records if a not in targets and a not in sources]
        return words + (f"; not tuned: {', '.join(others)} (own defaults)" if others else "")
    sizes: dict[str, int] = next(iter(records.values())).get("grid_sizes", {})
    seeds = next(iter(records.values())).get("seeds", [])
    largest = max(sizes.values(), default=1)
    unequal = [a for a in records if sizes.get(a, 1) < largest]
    where = f"on tuning seeds {seeds}, disjoint from the evaluation seeds"
    if not unequal:
        return f"equal tuning effort (grid of {largest} per entry, {where})"
    named = ", ".join(f"{a} (grid of {sizes[a]})" if sizes.get(a, 1) > 1 else f"{a} (not tuned)" for a in unequal)
    return f"**unequal tuning effort**: not equally tuned: {named}, against a grid of {largest} ({where})"


def tuning_lines(race_rows: Sequence[RunRow], tuning_rows: Sequence[RunRow]) -> list[str]:
    """Markdown lines under a tuned race: each entry's chosen point and every grid point's final
    returns on the tuning seeds (IQM), the chosen one in bold. Tuning rows are never pooled with the rest."""
    chosen = {r.algorithm: r.tuning for r in race_rows if r.tuning and r.tuning.get("rule") == tuning_lib.GRID}
    if not chosen and not tuning_rows:
        return []
    lines = [f"Tuning runs (best point: {tuning_lib.CHOICE_RULE}):", ""]
    lines += ["| entry | grid point | final return per tuning seed | IQM |", "|---|---|---|---|"]
    for (algo,), runs in group_by(tuning_rows, "algorithm").items():
        best = (chosen.get(algo) or {}).get("chosen_index")
        for (index,), point_runs in _by_point(runs):
            point = "`" + json.dumps((point_runs[0].tuning or {}).get("point"), sort_keys=True) + "`"
            finals = ", ".join(f"{r.seed}: {r.final_return:.1f}" for r in sorted(point_runs, key=lambda r: r.seed))
            iqm = f"{stats.iqm([r.final_return for r in point_runs]):.1f}"
            if index == best:
                point, iqm = f"**{point}** (chosen)", f"**{iqm}**"
            lines.append(f"| {algo} | {point} | {finals} | {iqm} |")
    return lines + [""]


def _by_point(runs: Sequence[RunRow]) -> list[tuple[tuple[int], list[RunRow]]]:
    groups: dict[int, list[RunRow]] = {}
    for r in runs:
        groups.setdefault(int((r.tuning or {}).get("point_index", -1)), []).append(r)
    return [((i,), groups[i]) for i in sorted(groups)]


def mean_return_until(xs: Sequence[float], ys: Sequence[float], budget: float) -> float:
    """The area under the step-held curve (each evaluation holds until the next) from 0 to ``budget``,
    divided by ``budget``: the mean evaluation return over the budget. A curve that ends before the
    budget holds its last value; the value before the first point is the first point's."""
    area, n = 0.0, len(xs)
    for i in range(n):
        start = 0.0 if i == 0 else min(float(xs[i]), budget)
        end = budget if i == n - 1 else min(float(xs[i + 1]), budget)
        area += float(ys[i]) * max(end - start, 0.0)
    return area / budget


def fixed_budgets(rows: Sequence[RunRow]) -> tuple[float | None, float | None]:
    """(env steps, wall s) the table's mean returns are taken over: the race's budgets, or where it
    had none, the smallest any run reached (None where that is 0)."""
    protocol = rows[0].protocol
    steps = protocol.get("budget_env_steps") or min(r.curve.env_steps[-1] for r in rows)
    wall = protocol.get("budget_s") or min(r.curve.wall_s[-1] for r in rows)
    return (float(steps) or None), (float(wall) or None)


# ---------------------------------------------------------------------------------------------
# The same race read per individual env step (less the algorithm's own evaluation steps).
# ---------------------------------------------------------------------------------------------
def individual_steps(row: RunRow) -> list[float] | None:
    """The row's curve on the individual-step axis: at each evaluation point, the env steps less the
    algorithm's own evaluation steps (``used + wasted + pending`` = total − ``evaluation`` of
    ``env_steps_breakdown``, e.g. AES-RL's f(μ) re-evaluations, ES's θ_u episodes), one per curve point;
    None where the row does not log the breakdown at its end (schema 1, an algorithm that does not log
    it). A point without a breakdown is 0 where no step was taken yet (before training) and else the
    last known count before it carried (an upper bound; lifetime counts never fall)."""
    if row.breakdown_at_end() is None or row.env_steps_breakdown is None:
        return None
    evaluation = row.env_steps_breakdown["env_steps_evaluation_lifetime"]
    out, known = [], 0
    for total, ev in zip(row.curve.env_steps, evaluation, strict=True):
        known = known if ev is None else ev
        out.append(float(total) - (known if total else 0))
    return out


def has_evaluation_steps(rows: Sequence[RunRow]) -> bool:
    """Whether some row of a race spent env steps on the algorithm's own evaluations (at its end)."""
    return any((end := r.breakdown_at_end()) and end.get("env_steps_evaluation_lifetime", 0) > 0 for r in rows)


def individual_step_budget(rows: Sequence[RunRow]) -> float | None:
    """The largest budget on the individual-step axis (:func:`individual_steps`) that every run of the
    race logging the breakdown reaches (the smallest individual steps at an end); None where none logs it."""
    ends = [axis[-1] for axis in (individual_steps(r) for r in rows) if axis]
    return min(ends) if ends else None


def individual_step_lines(race_rows: Sequence[RunRow]) -> list[str]:
    """Markdown lines: the race read per individual env step, where some row spent steps on its own
    evaluations (:func:`has_evaluation_steps`; else nothing): per entry the final return (the same
    runs), the individual env steps at the end and the mean return over the first B individual env
    steps (:func:`mean_return_until`, B = :func:`individual_step_budget`, equal for every entry);
    "not logged" for an entry whose rows do not all log the breakdown."""
    if not has_evaluation_steps(race_rows):
        return []
    budget = individual_step_budget(race_rows)
    protocol = race_rows[0].protocol
    on = "total env steps" if protocol.get("budget_env_steps") else "wall time"
    lines = [
        "Read per individual env step: x = env steps less the algorithm's own evaluation steps (used + wasted + "
        f"pending at each point, e.g. AES-RL's f(μ) re-evaluations); the race's budget ({budget_words(protocol)}) "
        f"was on {on}, so the entries are compared here over the first individual env steps every run reached.",
        "",
        "| algorithm | seeds | final eval return, IQM [95% CI] | individual env steps at the end (IQM) | "
        f"mean return over the first {_fmt(budget or 0, 'steps')} individual env steps (AUC ÷ budget), "
        "IQM [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for algo, runs in entry_groups(race_rows).items():
        runs = sorted(runs, key=lambda r: r.seed)
        axes = [individual_steps(r) for r in runs]
        line = f"| {algo} | {len(runs)} | {_interval([r.final_return for r in runs])} |"
        if all(axes):
            ends = [axis[-1] for axis in axes if axis]
            means = [mean_return_until(a, r.curve.eval_return, budget) for a, r in zip(axes, runs, strict=True) if a]
            line += f" {_fmt(stats.iqm(ends), 'steps')} | {_interval(means) if budget else '—'} |"
        else:
            line += " not logged | not logged |"
        lines.append(line)
    return lines + [""]


# ---------------------------------------------------------------------------------------------
# Env steps counted before 2026-11-27.
# ---------------------------------------------------------------------------------------------
#: The defaults of the settings :func:`recount` reads, as they were when the rows of schema 1 were
#: written (2026-11-22 to 27; a row's ``settings`` hold only what its race set).
OLD_DEFAULTS: dict[str, dict[str, Any]] = {
    "ES_EXT": {"eval_episodes": 0, "episodes_per_batch": 40},
    "DFD_EXT": {"eval_episodes": 0, "episodes_per_batch": 40},
    "CVES_EXT": {"eval_episodes": 0, "episodes_per_batch": 10},
    "ARS_EXT": {"eval_episodes": 0, "episodes_per_batch": 16},
    "CEMRL_EXT": {"population_size": 10},
    "AESRL_EXT": {
        "mean_fitness": "reevaluate",
        "mean_eval_episodes": 5,
        "mean_rule": "baseline_relative",
        "variance_rule": "online_adaptive",
    },
}
#: AES-RL's mean rules that need f(μ) (``aesrl.population.RULES_NEEDING_F_MU``), as then.
_AESRL_RULES_NEEDING_F_MU = ("one_plus_one", "fixed_linear", "fixed_sigmoid", "baseline_absolute", "baseline_relative")


def mixes_step_counts(rows: Sequence[RunRow]) -> bool:
    """Whether some rows count every simulated step and others (of the old rule's families) do not."""
    return any(r.step_count == EVERY_SIMULATED_STEP for r in rows) and any(counted_short(r) for r in rows)


def entry_groups(rows: Sequence[RunRow]) -> dict[str, list[RunRow]]:
    """A race's entries: its rows by algorithm, in first-seen order; an algorithm whose rows were
    counted under two rules (:func:`rllib_ext.compare.rows.step_rule`) is two entries, never pooled."""
    out: dict[str, list[RunRow]] = {}
    for (algo,), runs in group_by(rows, "algorithm").items():
        by_rule = group_by(runs, "step_count") if len({step_rule(r) for r in runs}) > 1 else {(None,): runs}
        for (count,), part in by_rule.items():
            out[algo if count is None else f"{algo} [{count}]"] = part
    return out


def step_axis_note(rows: Sequence[RunRow]) -> str | None:
    """What a race's step axis is, where its rows were counted before 2026-11-27 short; else None."""
    if not any(counted_short(r) for r in rows):
        return None
    if mixes_step_counts(rows):
        return "rows counted before and since 2026-11-27: shown apart, not comparable"
    if len({counted_rule(r) for r in rows}) > 1:
        return "counted the old way (before 2026-11-27): not comparable across families"
    return "counted the old way (before 2026-11-27), one family's rule: not comparable with steps counted since"


@dataclasses.dataclass(frozen=True)
class Recount:
    """What the old rule left out of one row, as far as the row tells.

    Attributes:
        uncounted: Estimated env steps simulated but not counted, at the end (None: not derivable).
        lower_bound: Other steps were left out that the row does not record (stale, failed, ...).
        what: What ``uncounted`` is, e.g. "μ re-evaluation steps".
    """

    uncounted: float | None
    lower_bound: bool
    what: str


def _max_episode_steps(env: str) -> int | None:
    import gymnasium

    try:
        return gymnasium.spec(env).max_episode_steps
    except Exception:  # an env id gymnasium does not know: no cap
        return None


def recount(row: RunRow) -> Recount | None:
    """An estimate of the env steps a row counted before 2026-11-27 left out (None: it left none out).

    - AES-RL (``mean_fitness="reevaluate"``, a rule that needs f(μ)): each told individual cost one
      evaluation of μ, ``mean_eval_episodes`` (K) episodes: ≈ u·K·L̄ steps, u the told individuals
      (``extra.updates``), L̄ the env steps per told individual (counted ÷ u, at most the env's
      ``max_episode_steps``: exact where every episode runs to the time limit, e.g. HalfCheetah).
    - The black-box family: θ_u's ``eval_episodes`` (E) episodes per update: ≈ u·E·L̄, L̄ the
      counted steps per used episode (counted ÷ (u·N), N = ``episodes_per_batch``), taking θ_u's
      episodes as long as the perturbed ones; stale, dropped and failed returns are not recorded
      (a lower bound).
    - CEM-RL: failed and no-longer-awaited individuals only, not recorded (a lower bound); none
      where the counted steps are generations × ``population_size`` × the env's episode limit
      (every individual of every generation ran to the limit, so none failed): then exact.
    """
    if not counted_short(row):
        return None
    name, family = row.registered_algorithm, OLD_RULE_FAMILY[row.registered_algorithm]
    settings = {**OLD_DEFAULTS.get(name, {}), **row.settings}
    counted = float(row.curve.env_steps[-1])
    updates = (row.extra.get("updates") or [None])[-1]
    if family == "CEM-RL":
        limit = _max_episode_steps(row.env)
        exact = bool(updates and limit and counted == updates * settings["population_size"] * limit)
        return Recount(0.0, not exact, "steps")
    if not updates:
        return Recount(None, True, "steps")
    if family == "AES-RL":
        needs_f_mu = settings["mean_rule"] in _AESRL_RULES_NEEDING_F_MU or settings["variance_rule"] == "success_rule"
        if not needs_f_mu:
            return Recount(0.0, True, "μ re-evaluation steps")
        if settings["mean_fitness"] != "reevaluate":
            return Recount(None, True, "μ evaluation steps")
        length = counted / updates
        cap = _max_episode_steps(row.env)
        length = min(length, cap) if cap else length
        return Recount(updates * settings["mean_eval_episodes"] * length, False, "μ re-evaluation steps")
    episodes, per_batch = settings.get("eval_episodes"), settings.get("episodes_per_batch")
    if not isinstance(episodes, int) or not isinstance(per_batch, int) or per_batch <= 0:
        return Recount(None, True, "θ_u evaluation steps")
    return Recount(updates * episodes * counted / (updates * per_batch), True, "θ_u evaluation steps")


def counted_rule(row: RunRow) -> str:
    """:func:`rllib_ext.compare.rows.step_rule`, but "every step" for an old row that provably left
    nothing out (:func:`recount`: none uncounted, exactly)."""
    rc = recount(row)
    return "every step" if rc is not None and rc.uncounted == 0 and not rc.lower_bound else step_rule(row)


def recount_cell(runs: Sequence[RunRow]) -> str:
    """The table's env-steps breakdown of one entry: where its steps went (rows since 2026-11-27), or
    what the old count left out and the estimated total (rows before); IQM over its runs."""
    ends = [end for end in (r.breakdown_at_end() for r in runs) if end]
    if len(ends) == len(runs):
        return " / ".join(_fmt(stats.iqm([e[k] for e in ends]), "steps") for k in ends[0])
    recounts = [recount(r) for r in runs]
    if all(rc is None for rc in recounts):
        if all(r.step_count == EVERY_SIMULATED_STEP for r in runs):
            return "not logged"
        return "every sampled step (counted as now)"
    known = [rc for rc in recounts if rc is not None and rc.uncounted is not None]
    if len(known) < len(recounts):
        return "counted the old way; not derivable from the rows"
    recounts = known
    counted = [float(r.curve.env_steps[-1]) for r in runs]
    left_out = [float(rc.uncounted) for rc in known if rc.uncounted is not None]
    total = stats.iqm([c + u for c, u in zip(counted, left_out, strict=True)])
    share = stats.iqm([u / (c + u) for c, u in zip(counted, left_out, strict=True)])
    bound = "≥ " if any(rc.lower_bound for rc in recounts) else "≈ "
    if not any(left_out):
        if bound == "≈ ":  # provably nothing left out
            return f"counted the old way: = {_fmt(total, 'steps')} simulated (nothing left out: see below)"
        return f"counted the old way: {bound}{_fmt(total, 'steps')} simulated (what it left out is not recorded)"
    return (
        f"counted the old way: {bound}{_fmt(total, 'steps')} simulated, of which "
        f"≈ {_fmt(stats.iqm(left_out), 'steps')} "
        f"{recounts[0].what} ({100 * share:.0f}%) not counted"
    )


#: How :func:`recount` estimates what each family's old count left out (the table's note).
RECOUNT_HOW = {
    "AES-RL": "μ re-evaluation steps ≈ told individuals (updates) × mean_eval_episodes × steps per told "
    "individual (at most the env's episode limit)",
    "black-box": "θ_u evaluation steps ≈ updates × eval_episodes × counted steps per used episode "
    "(θ_u's episodes taken as long as the perturbed ones)",
    "CEM-RL": "nothing to add where every individual of every generation ran to the env's episode limit "
    "(counted = generations × population_size × limit: none failed), else not recorded",
}


def old_count_lines(race_rows: Sequence[RunRow]) -> list[str]:
    """Markdown lines under a race whose rows were counted before 2026-11-27: what each family left out,
    and how the table estimates it."""
    short = [r for r in race_rows if counted_short(r)]
    if not short:
        return []
    parts = []
    families: dict[str, list[RunRow]] = {}
    for r in short:
        families.setdefault(OLD_RULE_FAMILY[r.registered_algorithm], []).append(r)
    for family, rows in sorted(families.items()):
        labels = ", ".join(dict.fromkeys(r.algorithm for r in rows))
        parts.append(f"{family} ({labels}) left out {OLD_RULE_LEFT_OUT[family]}; {RECOUNT_HOW[family]}")
    return [
        f"Env steps of this race were **{step_axis_note(race_rows)}**: " + "; ".join(parts) + ' ("≥" where the '
        "rows do not record the rest: stale, dropped, failed returns).",
        "",
    ]


def comparability(rows: Sequence[RunRow]) -> tuple[list[str], bool]:
    """(:func:`differing_keys`, whether the race compares per env step only): the rows differ in
    the machine alone and the budget is env steps alone, so what is measured per env step compares
    and what is measured in seconds does not."""
    differ = differing_keys(rows)
    per_env_step_only = differ == ["machine"] and all(
        r.protocol.get("budget_env_steps") and not r.protocol.get("budget_s") for r in rows
    )
    return differ, per_env_step_only


def verdict(rows: Sequence[RunRow]) -> str:
    """How far one race's rows compare (the summary's words)."""
    differ, per_env_step_only = comparability(rows)
    if not differ:
        return "comparable"
    if per_env_step_only:
        machines = sorted({f"{r.machine.description}, {r.machine.cores} cores" for r in rows})
        return (
            f"comparable per env step; its rows ran on {len(machines)} machines ({'; '.join(machines)}), so their "
            "**wall times are not comparable**"
        )
    return f"**NOT comparable**: rows differ in {', '.join(differ)}"


def time_to_target(row: RunRow) -> tuple[float, float] | None:
    """(env steps, wall s) at the first evaluation reaching the row's target, or None."""
    if row.target is None:
        return None
    for steps, wall, ret in zip(row.curve.env_steps, row.curve.wall_s, row.curve.eval_return, strict=True):
        if ret >= row.target:
            return float(steps), float(wall)
    return None


def _fmt(x: float, unit: str = "") -> str:
    if unit == "steps":
        return f"{x / 1000:.1f}k" if abs(x) >= 1000 else f"{x:.0f}"
    return f"{x:.1f}"


def _interval(values: Sequence[float], unit: str = "") -> str:
    ci = stats.stratified_bootstrap_ci([np.asarray(values, dtype=float)], aggregate=stats.iqm, seed=SEED)
    return f"{_fmt(float(ci.point), unit)} [{_fmt(float(ci.low), unit)}, {_fmt(float(ci.high), unit)}]"


def target_cells(rows: Sequence[RunRow]) -> tuple[str, str, str]:
    """(reached, env steps to target, wall s to target) cells of one algorithm's runs."""
    if rows[0].target is None:
        return "", "", ""
    hits = [time_to_target(r) for r in rows]
    reached = sum(h is not None for h in hits)
    cell = f"{reached}/{len(rows)}"
    if reached == 0:
        return cell, "not reached", "not reached"
    if reached == len(rows):
        done = [h for h in hits if h is not None]
        return cell, _interval([h[0] for h in done], "steps"), _interval([h[1] for h in done])
    # Censored: an unreached run counts at its budget, so the IQM is a lower bound.
    steps = [h[0] if h else float(r.curve.env_steps[-1]) for h, r in zip(hits, rows, strict=True)]
    walls = [h[1] if h else float(r.curve.wall_s[-1]) for h, r in zip(hits, rows, strict=True)]
    return cell, f"≥ {_fmt(stats.iqm(steps), 'steps')}", f"≥ {_fmt(stats.iqm(walls))}"


def improvements(race_rows: Sequence[RunRow]) -> tuple[list[str], dict[tuple[str, str], stats.Interval | None]]:
    """The race's entries (:func:`entry_groups`) and P(x > y) of the final evaluation return [95% CI]
    for every ordered pair; None where the pair is not compared: with an env-step budget, entries whose
    steps were counted by different rules were given different numbers of steps."""
    groups = entry_groups(race_rows)
    finals = {algo: np.array([r.final_return for r in runs], dtype=float) for algo, runs in groups.items()}
    per_step = bool(race_rows[0].protocol.get("budget_env_steps"))
    rule = {algo: {counted_rule(r) for r in runs} for algo, runs in groups.items()}
    pairs: dict[tuple[str, str], stats.Interval | None] = {}
    for x in finals:
        for y in finals:
            if x != y:
                refused = per_step and rule[x] != rule[y]
                pairs[x, y] = None if refused else stats.probability_of_improvement([finals[x]], [finals[y]], seed=SEED)
    return list(finals), pairs


def separated(p: stats.Interval) -> bool:
    """Whether P(X > Y)'s interval excludes 0.5 (the only case the docs may call "separated")."""
    return bool(p.low > 0.5 or p.high < 0.5)


def _probability(p: stats.Interval) -> str:
    return f"{p.point:.2f} [{p.low:.2f}, {p.high:.2f}]"


def improvement_table(race_rows: Sequence[RunRow]) -> list[str]:
    """Markdown lines: P(row > column) of the final evaluation return, [95% CI], per pair of algorithms."""
    names, pairs = improvements(race_rows)
    if len(names) < 2:
        return []
    lines = [
        "Probability of improvement, P(row > column) of the final evaluation return [95% CI] (ties count "
        "half; runs of each resampled independently):",
        "",
        "| P(row > column) | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for x in names:
        cells = []
        for y in names:
            p = pairs.get((x, y))
            cells.append("—" if x == y else "n/c †" if p is None else _probability(p))
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    if None in pairs.values():
        lines += [
            "",
            "† not compared: the two entries' env steps were counted by different rules (before 2026-11-27), so "
            "the budget gave them different numbers of simulated env steps.",
        ]
    return lines + [""]


def budget_words(protocol: dict[str, Any]) -> str:
    """A race's budget per run, e.g. "100000 env steps or 600 s"."""
    steps, wall = protocol.get("budget_env_steps"), protocol.get("budget_s")
    return " or ".join(b for b in (f"{steps} env steps" if steps else "", f"{wall} s" if wall else "") if b)


def race_anchor(benchmark: str, race: str) -> str:
    """The id of a race's place in the summary (:func:`summary_table`), for links into it."""
    return f"race-{_slug(benchmark)}-{_slug(race)}"


def race_block(
    rows: Sequence[RunRow], link: str, entries: Sequence[str] | None = None, against: str | None = None
) -> str:
    """A short Markdown summary of one race, for a docs page: per entry the seeds, the final evaluation
    return's IQM [95% CI] and, where the race set a target, the env steps to it; P(X > Y) [95% CI] of the
    pairs, each read the way round its point favours and said "separated" only where the interval excludes
    0.5 (:func:`separated`); the race's tuning rule (:func:`tuning_words`); and a link to its place in the
    full summary. The numbers are :func:`summary_table`'s, from the same functions; tuning runs left out.

    Args:
        rows: The race's rows.
        link: Where the race's full summary is, e.g. ``../RESULTS.md#race-bench-r1`` (:func:`race_anchor`).
        entries: The algorithms (the rows' labels) to show, in this order; None: all, in the race's.
        against: Only the pairs of this entry against each other one shown, as a column P(against > entry)
            (its row first); None: every pair, as a table of P(X > Y).

    Raises:
        ValueError: ``entries`` or ``against`` names an algorithm the race does not have.
    """
    first = rows[0]
    name = f"[`{first.race}`]({link})"  # as the summary names it, under its benchmark
    race_rows = evaluation_rows(rows)
    if not race_rows:
        return f"Race {name} ({first.env}): no evaluation rows yet (tuning under way).\n"
    algorithms = list(dict.fromkeys(r.algorithm for r in race_rows))
    unknown = [e for e in [*(entries or ()), *([against] if against else [])] if e not in algorithms]
    if unknown:
        has = ", ".join(algorithms)
        raise ValueError(f"race {first.benchmark}/{first.race} has no entry {', '.join(unknown)} (it has {has})")
    order = list(entries or algorithms)
    if against:  # its row first
        order = [against, *(e for e in order if e != against)]
    groups = entry_groups(race_rows)
    labels = sorted(
        (label for label in groups if groups[label][0].algorithm in order),
        key=lambda label: order.index(groups[label][0].algorithm),
    )
    about = [f"{first.benchmark}, {first.env}", f"{budget_words(first.protocol)} per run"]
    differ, per_env_step_only = comparability(race_rows)
    if per_env_step_only:  # verdict()'s words, without naming each machine
        machines = len({(r.machine.cores, r.machine.description) for r in race_rows})
        about.append(f"comparable per env step; rows of {machines} machines, so **wall times are not comparable**")
    elif differ:
        about.append(verdict(race_rows))
    note = step_axis_note(race_rows)
    if note:
        about.append(f"step axis {note}")
    lines = [f"Race {name}: {'; '.join(about)}. Tuning: {tuning_words(race_rows)}.", ""]
    _, pairs = improvements(race_rows)
    focus = [label for label in labels if groups[label][0].algorithm == against]
    column = focus[0] if len(focus) == 1 else None  # one entry against the rest: P(X > Y) as a column

    def words(p: stats.Interval | None) -> str:
        if p is None:
            return "not compared: step rules differ"
        return f"{_probability(p)}, {'separated' if separated(p) else 'not separated'}"

    target = first.target
    header = "| entry | seeds | final return, IQM [95% CI] |"
    header += f" env steps to {target:g} (reached) |" if target is not None else ""
    header += f" P({column} > entry) [95% CI] |" if column else ""
    lines += [header, "|---" * header.count(" | ") + "|---|"]
    for label in labels:
        runs = sorted(groups[label], key=lambda r: r.seed)  # as the summary: the bootstrap follows the order
        line = f"| {label} | {len(runs)} | {_interval([r.final_return for r in runs])} |"
        if target is not None:
            reached, steps, _ = target_cells(runs)
            line += f" {steps} ({reached}) |"
        if column:
            line += f" {'—' if label == column else words(pairs[column, label])} |"
        lines.append(line)
    if column:
        return "\n".join(lines) + "\n"
    shown = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if against and against not in (groups[a][0].algorithm, groups[b][0].algorithm):
                continue
            x, y = (b, a) if (p := pairs[a, b]) is not None and p.point < 0.5 else (a, b)
            shown.append(f"| P({x} > {y}) | {words(pairs[x, y])} |")  # read the way round its point favours
    if shown:
        lines += ["", "| final return | P(X > Y) [95% CI] |", "|---|---|", *shown]
    return "\n".join(lines) + "\n"


def summary_table(rows: Sequence[RunRow], figures: dict[tuple[str, str], str]) -> str:
    """The Markdown summary of every race (see the module docstring)."""
    if not rows:
        return "(no results yet: run a race with `rllib race`, then `rllib report`)\n"
    tuning_rows = {key: runs for key, runs in group_by([r for r in rows if r.stage == TUNING], "race").items()}
    rows = evaluation_rows(rows)
    lines = []
    for (benchmark, env), bench_rows in group_by(rows, "benchmark", "env").items():
        lines.append(f"### {benchmark}, {env}")
        lines.append("")
        figure = figures.get((benchmark, env))
        if figure:
            lines += [f"![{benchmark} {env}]({figure})", ""]
        for (race,), race_rows in group_by(bench_rows, "race").items():
            first = race_rows[0]
            protocol = first.protocol
            budget = budget_words(protocol)
            lines += [f'<a id="{race_anchor(benchmark, race)}"></a>', ""]
            lines.append(
                f"Race `{race}` ({first.date[:10]}, {first.machine.cores} cores): budget {budget} per run, whichever "
                f"comes first; evaluation "
                f"every {protocol.get('eval_every_env_steps')} env steps, {protocol.get('eval_episodes')} "
                f"episodes, deterministic actions; {verdict(race_rows)}."
            )
            note = step_axis_note(race_rows)
            if note:
                lines[-1] += f" Step axis **{note}**."
            lines[-1] += f" Tuning: {tuning_words(race_rows)}."
            shared = {k: first.settings[k] for k in first.shared_keys if k in first.settings}
            lines += ["", f"Shared settings: `{json.dumps(shared, sort_keys=True)}`", ""]
            has_target = first.target is not None
            # Where the steps went: rows since 2026-11-27 log it; rows counted short before get an estimate.
            has_steps = any(r.breakdown_at_end() for r in race_rows) or note is not None
            budget_steps, budget_wall = fixed_budgets(race_rows)
            has_cpu = all(r.curve.cpu_s for r in race_rows)
            header = "| algorithm | seeds | final eval return, IQM [95% CI] | per-seed final (seed: return) "
            header += f"| env steps, wall s{', CPU s' if has_cpu else ''} (, updates) at the end (IQM) |"
            for budget, unit in ((budget_steps, "steps"), (budget_wall, "s")):
                if budget:
                    shown = _fmt(budget, "steps") + " env steps" if unit == "steps" else f"{budget:g} s"
                    header += f" mean return over the first {shown} (AUC ÷ budget), IQM [95% CI] |"
            if has_steps:
                header += (
                    " env steps used / evaluation / wasted / pending at the end (IQM), or what the old count left out |"
                )
            if has_target:
                header += f" reached (target {first.target:g}) | env steps to target | wall s to target |"
            lines += [header, "|---" * header.count(" | ") + "|---|"]
            for algo, runs in entry_groups(race_rows).items():
                runs = sorted(runs, key=lambda r: r.seed)
                finals = [r.final_return for r in runs]
                per_seed = ", ".join(f"{r.seed}: {r.final_return:.1f}" for r in runs)
                end = (
                    f"{_fmt(stats.iqm([r.curve.env_steps[-1] for r in runs]), 'steps')}, "
                    f"{_fmt(stats.iqm([r.curve.wall_s[-1] for r in runs]))}"
                )
                if has_cpu:
                    end += f", {_fmt(stats.iqm([r.curve.cpu_s[-1] for r in runs if r.curve.cpu_s]))} CPU s"
                if all(r.extra.get("updates") for r in runs):  # the black-box family's update count u
                    end += f", {stats.iqm([r.extra['updates'][-1] for r in runs]):.0f} updates"
                line = f"| {algo} | {len(runs)} | {_interval(finals)} | {per_seed} | {end} |"
                for budget, field in ((budget_steps, "env_steps"), (budget_wall, "wall_s")):
                    if budget:
                        means = [mean_return_until(getattr(r.curve, field), r.curve.eval_return, budget) for r in runs]
                        line += f" {_interval(means)} |"
                if has_steps:
                    line += f" {recount_cell(runs)} |"
                if has_target:
                    line += " {} | {} | {} |".format(*target_cells(runs))
                lines.append(line)
            lines.append("")
            lines += old_count_lines(race_rows)
            lines += individual_step_lines(race_rows)
            lines += tuning_lines(race_rows, tuning_rows.get((race,), []))
            lines += improvement_table(race_rows)
            own = {(r.algorithm): {k: v for k, v in r.settings.items() if k not in r.shared_keys} for r in race_rows}
            lines.append("<details><summary>each algorithm's own settings, and the command</summary>")
            lines.append("")
            for algo, values in own.items():
                lines.append(f"- {algo}: `{json.dumps(values, sort_keys=True)}`")
            # Every distinct command of the race (an --append adds its own), in first-seen order.
            commands = list(dict.fromkeys(r.extra["command"] for r in race_rows if r.extra.get("command")))
            for command in commands:
                lines += ["", "```", command, "```"]
            lines += ["", "</details>", ""]
    return "\n".join(lines)


def _curve_band(runs: Sequence[RunRow], x_field: str):
    pairs = [(getattr(r.curve, x_field), r.curve.eval_return) for r in runs]
    grid, values = stats.aligned_curves(pairs)
    if grid.size == 0:
        return None
    ci = stats.stratified_bootstrap_ci([values], aggregate=stats.iqm, seed=SEED)
    return grid, np.atleast_1d(ci.point), np.atleast_1d(ci.low), np.atleast_1d(ci.high)


def draw_figure(rows: Sequence[RunRow], path: str, title: str) -> None:
    """Two panels (eval return vs env steps, vs wall s) per race, one race a line of panels (curves
    are compared within a race only, where the settings are equal): IQM over seeds, 95% CI bands;
    evaluation rows only (tuning runs are not drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    races = group_by(evaluation_rows(rows), "race")
    fig, axes = plt.subplots(len(races), 2, figsize=(12, 4.5 * len(races)), sharey="row", squeeze=False)
    for line, ((race,), race_rows) in zip(axes, races.items(), strict=True):
        entries = entry_groups(race_rows)
        note = step_axis_note(race_rows)
        palette = "tab20" if len(entries) > 10 else "tab10"  # no two curves of a race share a colour
        for ax, x_field, xlabel in ((line[0], "env_steps", "env steps"), (line[1], "wall_s", "training wall time (s)")):
            for i, (algo, runs) in enumerate(entries.items()):
                band = _curve_band(runs, x_field)
                if band is None:
                    continue
                grid, point, low, high = band
                color = plt.get_cmap(palette)(i)
                marker = "o" if grid.size <= 3 else None  # a run of one or two evaluations stays visible
                label = f"{algo} (n={len(runs)})"
                # An entry whose steps were counted short (before 2026-11-27): dashed, and said in the legend.
                short = any(counted_rule(r) != "every step" for r in runs)
                if short:
                    label = f"{algo} (n={len(runs)}; steps counted short before 2026-11-27)"
                style = "--" if short and x_field == "env_steps" else "-"
                ax.step(
                    grid, point, where="post", color=color, label=label, marker=marker, markersize=3, linestyle=style
                )
                ax.fill_between(grid, low, high, step="post", color=color, alpha=0.2, linewidth=0)
            target = race_rows[0].target
            if target is not None:
                ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target:g}")
            if note and x_field == "env_steps":
                xlabel = "\n".join([xlabel, *textwrap.wrap(f"({note})", 70)])
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
        line[0].set_ylabel("evaluation return (IQM over seeds, 95% CI)")
        line[0].set_title(f"race {race}", fontsize=9, loc="left")
        line[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def write_figures(rows: Sequence[RunRow], figures_dir: str, relative_to: str) -> dict[tuple[str, str], str]:
    """One PNG per (benchmark, env); returns their paths relative to ``relative_to``."""
    out = {}
    for (benchmark, env), group in group_by(evaluation_rows(rows), "benchmark", "env").items():
        path = os.path.join(figures_dir, f"{_slug(benchmark)}_{_slug(env)}.png")
        bad: list[str] = []
        machines: list[str] = []
        old: dict[str, list[str]] = {}
        for (race,), rs in group_by(group, "race").items():
            note = step_axis_note(rs)
            if note:
                old.setdefault(note, []).append(race)
            differ, per_env_step_only = comparability(rs)
            if per_env_step_only:
                machines.append(race)
            elif differ:
                bad.append(race)
        title = f"{benchmark}, {env}: evaluation return, IQM over seeds with 95% stratified bootstrap CI"
        if bad:
            title += f"\nNOT comparable: race(s) {', '.join(bad)} (see RESULTS.md)"
        if machines:
            title += f"\nwall time NOT comparable (rows of several machines): race(s) {', '.join(machines)}"
        for note, races in old.items():
            title += f"\nstep axis {note}: race(s) {', '.join(races)}"
        draw_figure(group, path, title)
        out[(benchmark, env)] = os.path.relpath(path, relative_to)
    return out


@dataclasses.dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote.

    Attributes:
        rows: The rows read.
        figures: ``{(benchmark, env): path}`` of each figure, relative to the summary's folder.
        summary: The Markdown summary (:func:`summary_table`).
        path: The summary file, or None when it was not written.
    """

    rows: list[RunRow]
    figures: dict[tuple[str, str], str]
    summary: str
    path: str | None


def write_report(results_dir: str, figures_dir: str | None = None, output: str | None = None) -> Report:
    """Reads every race's rows under ``results_dir``, draws one figure per (benchmark, env) and writes
    the summary.

    Args:
        results_dir: The folder ``rllib race`` wrote into (its ``--results-dir``).
        figures_dir: Where the PNGs go (default ``<results_dir>/figures``).
        output: The Markdown summary file (default ``<results_dir>/REPORT.md``).

    Returns:
        What was read and written.

    Raises:
        FileNotFoundError: ``results_dir`` is not a folder.
        RowError: A row that does not fit the schema (naming its file and line).
    """
    if not os.path.isdir(results_dir):
        raise FileNotFoundError(f"no results folder {results_dir} (rllib race --results-dir writes one)")
    figures_dir = figures_dir or os.path.join(results_dir, "figures")
    output = output or os.path.join(results_dir, "REPORT.md")
    rows = read_all(results_dir)
    figures = write_figures(rows, figures_dir, os.path.dirname(os.path.abspath(output)))
    summary = summary_table(rows, figures)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w") as f:
        f.write("# Race report\n\nGenerated by `rllib report` from the rows alone.\n\n" + summary)
    return Report(rows, figures, summary, output)
