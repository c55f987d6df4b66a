"""Benchmark results as data: one :class:`RunRow` per run, one JSON line per row.

A race writes ``benchmarks/results/<benchmark>/<race>.jsonl`` (one file per race, one line per
run); ``benchmarks/harness/report.py`` reads every file under ``benchmarks/results/`` and draws
the figures and the summary table from the rows alone.

A row holds what is needed to judge and repeat the run: the algorithm, env and seed, every setting
the race applied (``settings``; the keys the race holds identical across its algorithms are
listed in ``shared_keys``, the ones it varies on purpose in ``variable``), the evaluation protocol
and budget (``protocol``), the machine, the date, and the learning curve (``curve``): env steps
sampled, training wall seconds and the mean *evaluation* return (deterministic actions) at each
evaluation point.
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

SCHEMA_VERSION = 1


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
    """

    env_steps: list[int]
    wall_s: list[float]
    eval_return: list[float]


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One run of one algorithm with one seed in one race.

    Attributes:
        benchmark: Name of the benchmark (the folder under ``benchmarks/results/``).
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
        if data.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(f"schema {data['schema']!r}, this reader knows {SCHEMA_VERSION}")
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
        fields = dict(data, machine=Machine(**machine), curve=curve)
        return cls(**fields)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _curve(data: Any) -> Curve:
    _check(
        isinstance(data, dict) and set(data) == {"env_steps", "wall_s", "eval_return"},
        "curve must be {env_steps, wall_s, eval_return}",
    )
    lists = [data[k] for k in ("env_steps", "wall_s", "eval_return")]
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
    )


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


def group_by(rows: Iterable[RunRow], *keys: str) -> dict[tuple, list[RunRow]]:
    """Rows grouped by the values of the named fields, in first-seen order."""
    groups: dict[tuple, list[RunRow]] = {}
    for row in rows:
        groups.setdefault(tuple(getattr(row, k) for k in keys), []).append(row)
    return groups
