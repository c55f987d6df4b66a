"""Race results as data: one :class:`RunRow` per run, one JSON line per row.

A race (``rllib race``) writes ``<results-dir>/<benchmark>/<race>.jsonl`` (one file per race, one
line per run); ``rllib report`` (:mod:`rllib_ext.compare.report`) reads every file under the
results folder and draws the figures and the summary table from the rows alone. The project's own
rows are under ``benchmarks/results/`` (``make bench-report``).

A row holds what is needed to judge and repeat the run: the algorithm, env and seed, every setting
the race applied (``settings``; the keys the race holds identical across its algorithms are
listed in ``shared_keys``, the ones it varies on purpose in ``variable``), the evaluation protocol
and budget (``protocol``), the machine, the date, and the learning curve (``curve``): env steps
sampled, training wall seconds and the mean *evaluation* return (deterministic actions) at each
evaluation point.

Env steps (``curve.env_steps``, the budget) are ``env_runners/num_env_steps_sampled_lifetime``. Since
2026-11-27 that is every env step the algorithm simulated, in every family (design.md, convention 12),
and a row says so (``step_count`` = :data:`EVERY_SIMULATED_STEP`, schema 2) and keeps the breakdown
(``env_steps_breakdown``: used / evaluation / wasted / pending at each curve point,
:data:`rllib_ext.common.steps.BREAKDOWN_KEYS`). Rows written before (schema 1, still read) were
counted under the old rule (:data:`OLD_STEP_COUNT`): the black-box family and the ERL algorithms
then counted only the steps of the returns an update used (:data:`OLD_RULE_FAMILY` says what each
left out), RLlib's env runners every sampled step, as now (:func:`step_rule`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
from collections.abc import Iterable
from typing import Any

#: Schema of the rows written now: 2 adds ``step_count`` and ``env_steps_breakdown``; 3 adds
#: ``stage``, ``tuning`` and ``curve.cpu_s``.
SCHEMA_VERSION = 3
#: Every schema this reader reads (rows of schema 1 are read as counted :data:`OLD_STEP_COUNT`).
READABLE_SCHEMAS = (1, 2, 3)
#: ``stage`` of a row: a run on an evaluation seed (what the report compares), or a tuning run.
EVALUATION, TUNING = "evaluation", "tuning"

#: ``step_count`` of the rows written since 2026-11-27: ``curve.env_steps`` is every env step the
#: algorithm simulated (perturbations, its own evaluations, warm-up, dropped and failed episodes).
EVERY_SIMULATED_STEP = "every-simulated-step"
#: ``step_count`` of rows written before 2026-11-27 (schema 1, which has no such field).
OLD_STEP_COUNT = "before-2026-11-27"

#: Registered algorithms whose count the old rule (before 2026-11-27) left short, by family, and what
#: it left out; every other algorithm (RLlib's env runners: TD3_EXT, VRACER_EXT, DDPG_EXT, NAF_EXT,
#: IMPACT_EXT, APPO, PPO, SAC, ...) counted every sampled step then as now.
OLD_RULE_FAMILY = {
    "ES_EXT": "black-box",
    "DFD_EXT": "black-box",
    "CVES_EXT": "black-box",
    "ARS_EXT": "black-box",
    "AESRL_EXT": "AES-RL",
    "CEMRL_EXT": "CEM-RL",
}
OLD_RULE_LEFT_OUT = {
    "black-box": "the unperturbed θ_u's evaluation episodes (eval_episodes per update), stale, dropped and "
    "failed returns",
    "AES-RL": "the μ re-evaluations (mean_eval_episodes episodes per told individual), stale and failed individuals",
    "CEM-RL": "failed and no-longer-awaited individuals (none in a run without failures)",
}


class RowError(ValueError):
    """A row that does not fit the schema; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """Where a run ran: the core count and a short description (CPU model, OS).

    Attributes:
        cores: Logical cores of the machine (``os.cpu_count()``).
        description: e.g. ``"Intel Xeon ... / Linux 6.1"``.
    """

    cores: int
    description: str

    @classmethod
    def this(cls) -> Machine:
        """The machine this process runs on."""
        model = platform.processor() or ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        model = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        return cls(cores=os.cpu_count() or 1, description=f"{model or 'unknown CPU'} / {platform.system()}")


def git_commit(path: str | None = None) -> str:
    """The short commit checked out at ``path`` (default: the working directory), or "unknown"."""
    try:
        cmd = ["git", *(["-C", path] if path else []), "rev-parse", "--short", "HEAD"]
        return subprocess.check_output(cmd, text=True, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@dataclasses.dataclass(frozen=True)
class Curve:
    """A run's learning curve, one entry per evaluation point (all lists of equal length).

    Attributes:
        env_steps: Env steps sampled for training before the evaluation (non-decreasing).
        wall_s: Seconds spent in ``train()`` before the evaluation (evaluation time excluded).
        eval_return: Mean return of the evaluation episodes (deterministic actions).
        cpu_s: CPU seconds (user + system) of the run's processes before the evaluation: the
            driver's during ``train()`` (its learner threads included) plus its env runner and
            learner actors' (schema 3; None in older rows).
    """

    env_steps: list[int]
    wall_s: list[float]
    eval_return: list[float]
    cpu_s: list[float] | None = None


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One run of one algorithm with one seed in one race.

    Attributes:
        benchmark: Name of the benchmark (the folder under the results folder).
        race: Id of the race the run belongs to (the runs compared with each other).
        algorithm: The race's label of the algorithm, e.g. ``"IMPACT_EXT"`` or ``"DFD+DSGD"``: its
            registered name unless the race raced variants of one algorithm under labels (the
            registered name is then :attr:`registered_algorithm`).
        env: Env id.
        seed: ``config.debugging(seed=...)``.
        settings: Every setting the race applied (shared, the algorithm's own, threads) plus the
            execution settings read back from the built config and ``registered_algorithm``.
        shared_keys: Keys of ``settings`` the race holds identical across its runs.
        variable: Keys the race varies on purpose (not checked for equality).
        protocol: Budget and evaluation protocol: ``budget_env_steps``, ``budget_s``,
            ``eval_every_env_steps``, ``eval_episodes``.
        machine: Where it ran.
        date: ISO 8601 UTC time the run started.
        curve: The learning curve.
        target: Return the benchmark counts as solved (optional).
        extra: Anything else measured (per-episode evaluation returns, build time, ...; lists
            aligned with the curve: ``train_return_mean``, ``recorded[KEY]``, ``updates``).
        schema: Schema version of the row.
        step_count: How ``curve.env_steps`` was counted: :data:`EVERY_SIMULATED_STEP`, or
            :data:`OLD_STEP_COUNT` for a row of schema 1 (see :func:`step_rule`).
        env_steps_breakdown: ``{name: list aligned with the curve}`` for each name of
            :data:`rllib_ext.common.steps.BREAKDOWN_KEYS` (used, evaluation, wasted, pending; they sum
            to ``curve.env_steps``); null where the ``train()`` result had none (before training, an
            algorithm that does not log it). None in rows of schema 1.
        stage: :data:`EVALUATION` or :data:`TUNING` (a run of a tuning grid, on a tuning seed).
        tuning: How the race set the entry's own settings: ``{"rule": "grid"|"matched"|"none", ...}``
            (:mod:`rllib_ext.compare.tuning`); None in rows before schema 3 (not tuned).
    """

    benchmark: str
    race: str
    algorithm: str
    env: str
    seed: int
    settings: dict[str, Any]
    shared_keys: list[str]
    variable: list[str]
    protocol: dict[str, Any]
    machine: Machine
    date: str
    curve: Curve
    target: float | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema: int = SCHEMA_VERSION
    step_count: str = EVERY_SIMULATED_STEP
    env_steps_breakdown: dict[str, list[int | None]] | None = None
    stage: str = EVALUATION
    tuning: dict[str, Any] | None = None

    def to_json(self) -> str:
        """The row as one line of JSON."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, allow_nan=False)

    @property
    def registered_algorithm(self) -> str:
        """The registered name the run was built from (rows written before labels: ``algorithm``)."""
        return self.settings.get("registered_algorithm", self.algorithm)

    @property
    def final_return(self) -> float:
        """The evaluation return at the last evaluation point."""
        return self.curve.eval_return[-1]

    def breakdown_at_end(self) -> dict[str, int] | None:
        """The breakdown at the last curve point (``{name: steps}``), or None where the row has none."""
        if not self.env_steps_breakdown:
            return None
        end = {key: values[-1] for key, values in self.env_steps_breakdown.items()}
        known = {key: v for key, v in end.items() if v is not None}
        return known if len(known) == len(end) else None

    @classmethod
    def from_dict(cls, data: Any) -> RunRow:
        """Builds and validates a row from parsed JSON.

        Raises:
            ValueError: A missing, unknown or mistyped field, or an inconsistent curve.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a row must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - set(data))
        if missing:
            raise ValueError(f"missing field(s) {missing}")
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}")
        schema = data.get("schema", SCHEMA_VERSION)
        if schema not in READABLE_SCHEMAS:
            raise ValueError(f"schema {schema!r}, this reader knows {list(READABLE_SCHEMAS)}")
        if schema == 1:  # before 2026-11-27: no step_count (or the one from_dict gave it), no breakdown
            _check(
                data.get("step_count", OLD_STEP_COUNT) == OLD_STEP_COUNT, "a schema 1 row was counted before 2026-11-27"
            )
            _check(data.get("env_steps_breakdown") is None, "a schema 1 row has no env_steps_breakdown")
            data = dict(data, step_count=OLD_STEP_COUNT)
        else:
            _check(
                data.get("step_count") == EVERY_SIMULATED_STEP,
                f"step_count must be {EVERY_SIMULATED_STEP!r} in schema {schema}, got {data.get('step_count')!r}",
            )
        for key in ("benchmark", "race", "algorithm", "env", "date"):
            if not isinstance(data[key], str) or not data[key]:
                raise ValueError(f"{key} must be a non-empty string, got {data[key]!r}")
        _check(isinstance(data["seed"], int) and not isinstance(data["seed"], bool), "seed must be an integer")
        for key in ("settings", "protocol"):
            _check(isinstance(data[key], dict), f"{key} must be an object")
        _check(isinstance(data.get("extra", {}), dict), "extra must be an object")
        for key in ("shared_keys", "variable"):
            _check(
                isinstance(data[key], list) and all(isinstance(k, str) for k in data[key]),
                f"{key} must be a list of strings",
            )
        try:
            datetime.datetime.fromisoformat(data["date"])
        except ValueError:
            raise ValueError(f"date must be ISO 8601, got {data['date']!r}") from None
        machine = data["machine"]
        _check(
            isinstance(machine, dict) and set(machine) == {"cores", "description"},
            "machine must be {cores, description}",
        )
        _check(isinstance(machine["cores"], int) and machine["cores"] >= 1, "machine.cores must be an integer >= 1")
        curve = _curve(data["curve"])
        target = data.get("target")
        _check(target is None or _is_number(target), f"target must be a number or null, got {target!r}")
        breakdown = _breakdown(data.get("env_steps_breakdown"), len(curve.env_steps))
        if schema < 3:
            _check(
                data.get("stage", EVALUATION) == EVALUATION and data.get("tuning") is None,
                f"a schema {schema} row is an evaluation row without tuning",
            )
        _check(data.get("stage", EVALUATION) in (EVALUATION, TUNING), f"stage must be {EVALUATION} or {TUNING}")
        tuning = data.get("tuning")
        _check(
            tuning is None or (isinstance(tuning, dict) and isinstance(tuning.get("rule"), str)),
            "tuning must be null or an object with a rule",
        )
        fields = dict(data, machine=Machine(**machine), curve=curve, env_steps_breakdown=breakdown)
        return cls(**fields)


def step_rule(row: RunRow) -> str:
    """How the row's env steps were counted, as a key that equal counts share: ``"every step"``
    (rows since 2026-11-27, and older rows of algorithms on RLlib's env runners, which counted every
    sampled step then as now) or ``"before 2026-11-27, <family>"`` (:data:`OLD_RULE_FAMILY`)."""
    family = OLD_RULE_FAMILY.get(row.registered_algorithm)
    if row.step_count == EVERY_SIMULATED_STEP or family is None:
        return "every step"
    return f"before 2026-11-27, {family}"


def counted_short(row: RunRow) -> bool:
    """Whether the row's env steps leave out steps the algorithm simulated (the old rule's families)."""
    return step_rule(row) != "every step"


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _curve(data: Any) -> Curve:
    _check(
        isinstance(data, dict) and {"env_steps", "wall_s", "eval_return"} <= set(data) <= {*CURVE_KEYS, "cpu_s"},
        "curve must be {env_steps, wall_s, eval_return[, cpu_s]}",
    )
    cpu = data.get("cpu_s")
    _check(
        cpu is None or (isinstance(cpu, list) and len(cpu) == len(data["env_steps"]) and all(map(_is_number, cpu))),
        "curve.cpu_s must be null or finite numbers, one per point",
    )
    lists = [data[k] for k in CURVE_KEYS]
    _check(all(isinstance(v, list) for v in lists), "curve values must be lists")
    n = len(lists[0])
    _check(n >= 1, "curve has no evaluation point")
    _check(all(len(v) == n for v in lists), f"curve lists differ in length: {[len(v) for v in lists]}")
    _check(all(_is_number(v) for v in sum(lists, [])), "curve values must be finite numbers")
    for key, values in zip(("env_steps", "wall_s"), lists[:2], strict=True):
        _check(all(b >= a for a, b in zip(values, values[1:], strict=False)), f"curve.{key} must be non-decreasing")
    return Curve(
        env_steps=[int(v) for v in lists[0]],
        wall_s=[float(v) for v in lists[1]],
        eval_return=[float(v) for v in lists[2]],
        cpu_s=None if cpu is None else [float(v) for v in cpu],
    )


CURVE_KEYS = ("env_steps", "wall_s", "eval_return")


def _breakdown(data: Any, n: int) -> dict[str, list[int | None]] | None:
    if data is None:
        return None
    from rllib_ext.common.steps import BREAKDOWN_KEYS

    _check(
        isinstance(data, dict) and set(data) == set(BREAKDOWN_KEYS),
        f"env_steps_breakdown must be {{{', '.join(BREAKDOWN_KEYS)}}}",
    )
    for key in BREAKDOWN_KEYS:
        values = data[key]
        _check(
            isinstance(values, list) and len(values) == n, f"env_steps_breakdown.{key} must have one value per point"
        )
        _check(
            all(v is None or (_is_number(v) and v >= 0) for v in values),
            f"env_steps_breakdown.{key} values must be numbers >= 0 or null",
        )
    return {key: [None if v is None else int(v) for v in data[key]] for key in BREAKDOWN_KEYS}


def append_row(path: str, row: RunRow) -> None:
    """Appends ``row`` as one line to the JSON-lines file ``path`` (created with its folders)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    RunRow.from_dict(json.loads(row.to_json()))  # never write a row the reader would reject
    with open(path, "a") as f:
        f.write(row.to_json() + "\n")


def read_rows(path: str) -> list[RunRow]:
    """Every row of one JSON-lines file (blank lines skipped).

    Raises:
        RowError: A line that is not JSON or not a valid row; the message names file and line.
    """
    rows = []
    with open(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append(RunRow.from_dict(json.loads(line)))
            except json.JSONDecodeError as e:
                raise RowError(f"{path}:{lineno}: not JSON ({e.msg})") from None
            except (TypeError, ValueError) as e:
                raise RowError(f"{path}:{lineno}: bad row: {e}") from None
    return rows


#: Subfolder of the results of measurements that are not learning curves (throughput, scaling):
#: their rows are free-form JSON lines with a ``benchmark`` field, read by :func:`read_measurements`.
MEASUREMENTS = "measurements"


def find_result_files(root: str, measurements: bool = False) -> list[str]:
    """Every ``*.jsonl`` under ``root`` (the learning-curve rows, or those under ``measurements/``), sorted."""
    found = []
    base = os.path.join(root, MEASUREMENTS)
    for dirpath, _, files in os.walk(root):
        inside = os.path.commonpath([os.path.abspath(dirpath), os.path.abspath(base)]) == os.path.abspath(base)
        if inside == measurements:
            found += [os.path.join(dirpath, f) for f in files if f.endswith(".jsonl")]
    return sorted(found)


def append_measurement(path: str, row: dict[str, Any]) -> None:
    """Appends a measurement row (``results/measurements/``) as one line to ``path`` (created with
    its folders); a row without its ``benchmark``, which :func:`read_measurements` rejects, is an error."""
    if "benchmark" not in row:
        raise RowError(f"a measurement row needs a 'benchmark' field: {sorted(row)}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def read_measurements(root: str) -> list[dict[str, Any]]:
    """Every row under ``root/measurements/`` as a dict (each names its ``benchmark``)."""
    rows = []
    for path in find_result_files(root, measurements=True):
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise RowError(f"{path}:{i}: not JSON: {e}") from e
                    if "benchmark" not in row:
                        raise RowError(f"{path}:{i}: a measurement row needs a 'benchmark' field")
                    rows.append(row)
    return rows


def read_all(root: str) -> list[RunRow]:
    """Every row of every ``*.jsonl`` under ``root`` (see :func:`read_rows`)."""
    rows: list[RunRow] = []
    for path in find_result_files(root):
        rows += read_rows(path)
    return rows


def evaluation_rows(rows: Iterable[RunRow]) -> list[RunRow]:
    """The rows the report compares: every row but the tuning runs."""
    return [r for r in rows if r.stage != TUNING]


def group_by(rows: Iterable[RunRow], *keys: str) -> dict[tuple, list[RunRow]]:
    """Rows grouped by the values of the named fields, in first-seen order."""
    groups: dict[tuple, list[RunRow]] = {}
    for row in rows:
        groups.setdefault(tuple(getattr(row, k) for k in keys), []).append(row)
    return groups
