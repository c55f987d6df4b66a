"""Learning curves of Tune runs (``rllib plot DIR [DIR ...] -o out.png``).

Each trial directory is read from, in this order (``source="auto"``):

1. ``result.json``: every result the trial reported, one JSON object per line, flattened with
   ``/`` (``env_runners/episode_return_mean``). Every key of every row counts, so a metric that
   first appears in a later iteration is found (IMPACT_EXT's first iteration often has no finished
   episode, hence no return).
2. ``progress.csv``: Tune fixes its columns at the first result, so a key missing from the first
   row is missing from the whole file; used only when there is no ``result.json``.
3. TensorBoard event files (``events.out.tfevents.*``, Tune's ``ray/tune/<key>`` scalars): used
   when neither file exists, or when asked for with ``source="tfevents"``.

Each directory given is a *group* (an experiment dir holds one or more trials). With one
directory every trial is drawn as its own line (``aggregate="auto"``); with several, each group's
trials are drawn as their mean (or IQM) with a 95% bootstrap CI band (:mod:`rllib_ext.stats`),
on the x values where every trial of the group has a value (each trial's last value held until
its next one, :func:`rllib_ext.stats.step_hold`). Short curves get point markers, so a run with
a single result shows as a dot, not as an invisible zero-length line.

Errors are ``FileNotFoundError`` (no such directory, nothing to read) and ``ValueError`` (a metric
or x key no trial reported, with the closest keys that were); the CLI turns them into its one-line
``rllib: error:``.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import glob
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from rllib_ext import stats

RETURN_KEY = "env_runners/episode_return_mean"
#: x axis name -> result keys tried in order (the first one a trial reported is used).
X_KEYS: dict[str, tuple[str, ...]] = {
    "env_steps": ("num_env_steps_sampled_lifetime", "env_runners/num_env_steps_sampled_lifetime"),
    "time": ("time_total_s",),
    "iteration": ("training_iteration",),
}
X_LABELS = {"env_steps": "env steps sampled", "time": "time (s)", "iteration": "training iteration"}
SOURCES = ("auto", "result.json", "progress.csv", "tfevents")
AGGREGATES = ("auto", "none", "mean", "iqm")
#: Curves with at most this many points are drawn with markers.
MARKER_MAX_POINTS = 25
TFEVENTS_PREFIX = "ray/tune/"


@dataclasses.dataclass
class Trial:
    """The results one trial reported.

    Attributes:
        path: The trial directory.
        source: Where they were read from (``result.json``, ``progress.csv`` or ``tfevents``).
        rows: One dict per reported result: flattened key -> finite number.
    """

    path: str
    source: str
    rows: list[dict[str, float]]

    def keys(self) -> set[str]:
        """Every key any row reported."""
        return set().union(*self.rows) if self.rows else set()

    def series(self, metric: str, x_key: str) -> tuple[list[float], list[float]]:
        """(x, y) of the rows that have both keys, in reported order."""
        xs, ys = [], []
        for row in self.rows:
            if metric in row and x_key in row:
                xs.append(row[x_key])
                ys.append(row[metric])
        return xs, ys


@dataclasses.dataclass
class Series:
    """One drawn curve: a trial, or a group's mean/IQM with its CI band.

    Attributes:
        label: Legend text.
        xs, ys: The curve.
        low, high: The 95% CI band (None for a single trial).
        marker: Matplotlib marker (None for long curves).
    """

    label: str
    xs: np.ndarray
    ys: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    marker: str | None = None


def flatten(data: dict[str, Any]) -> dict[str, float]:
    """Finite numbers of a nested dict, keys joined with ``/`` (Tune's ``flatten_dict``); others dropped."""
    from ray.tune.utils import flatten_dict

    return {
        key: float(value)
        for key, value in flatten_dict(data, delimiter="/").items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }


def read_result_json(path: str) -> list[dict[str, float]]:
    """Every row of a Tune ``result.json`` (the ``config`` entry left out), flattened.

    A last line cut short (a run killed while writing) is skipped.

    Raises:
        ValueError: A line before the last one is not JSON.
    """
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}:{i + 1}: not JSON ({e.msg})") from None
        if isinstance(data, dict):
            data.pop("config", None)
            rows.append(flatten(data))
    return rows


def read_progress_csv(path: str) -> list[dict[str, float]]:
    """Every row of a Tune ``progress.csv``: its columns (fixed at the first result), as numbers."""
    rows = []
    with open(path, newline="") as f:
        for record in csv.DictReader(f):
            row = {}
            for key, text in record.items():
                try:
                    value = float(text)
                except (TypeError, ValueError):
                    continue
                if key is not None and math.isfinite(value):
                    row[key] = value
            rows.append(row)
    return rows


def read_tfevents(trial_dir: str) -> list[dict[str, float]]:
    """Tune's ``ray/tune/<key>`` scalars of the trial's event files, one row per logged step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    by_step: dict[int, dict[str, float]] = {}
    for path in sorted(glob.glob(os.path.join(trial_dir, "events.out.tfevents.*"))):
        acc = EventAccumulator(path, size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            key = tag[len(TFEVENTS_PREFIX) :] if tag.startswith(TFEVENTS_PREFIX) else tag
            for event in acc.Scalars(tag):
                if math.isfinite(event.value):
                    by_step.setdefault(int(event.step), {})[key] = float(event.value)
    return [by_step[step] for step in sorted(by_step)]


def _has(path: str) -> bool:
    return os.path.isfile(path) and os.path.getsize(path) > 0


def find_trials(run_dir: str) -> list[str]:
    """Every directory under ``run_dir`` (itself included) with results of a trial, sorted."""
    found = []
    for root, _, files in os.walk(run_dir):
        if (
            _has(os.path.join(root, "result.json"))
            or _has(os.path.join(root, "progress.csv"))
            or any(f.startswith("events.out.tfevents.") for f in files)
        ):
            found.append(root)
    return sorted(found)


def read_trial(trial_dir: str, source: str = "auto") -> Trial:
    """The results of one trial, from ``source`` or the first available (see module docstring).

    Raises:
        FileNotFoundError: The requested source (or, for ``auto``, every source) is missing.
        ValueError: An unknown source, or a corrupt ``result.json``.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    readers = {
        "result.json": lambda: read_result_json(os.path.join(trial_dir, "result.json")),
        "progress.csv": lambda: read_progress_csv(os.path.join(trial_dir, "progress.csv")),
        "tfevents": lambda: read_tfevents(trial_dir),
    }
    available = {
        "result.json": _has(os.path.join(trial_dir, "result.json")),
        "progress.csv": _has(os.path.join(trial_dir, "progress.csv")),
        "tfevents": bool(glob.glob(os.path.join(trial_dir, "events.out.tfevents.*"))),
    }
    order = list(readers) if source == "auto" else [source]
    for name in order:
        if available[name]:
            return Trial(trial_dir, name, readers[name]())
    raise FileNotFoundError(f"no {' or '.join(order)} in {trial_dir}")


def _close_keys(metric: str, trials: Sequence[Trial]) -> str:
    keys = sorted(set().union(*(t.keys() for t in trials)))
    close = difflib.get_close_matches(metric, keys, n=5, cutoff=0.4)
    return f"; closest reported keys: {', '.join(close)}" if close else f"; {len(keys)} keys were reported"


def resolve_x_key(x: str, trials: Sequence[Trial]) -> str:
    """The result key of x axis ``x``: the first of :data:`X_KEYS` that every trial reported.

    Falls back to ``training_iteration`` when no trial reported env steps.

    Raises:
        ValueError: An unknown ``x``, or no key of it that every trial has.
    """
    if x not in X_KEYS:
        raise ValueError(f"x must be one of {sorted(X_KEYS)}, got {x!r}")
    candidates = X_KEYS[x] + (X_KEYS["iteration"] if x == "env_steps" else ())
    for key in candidates:
        if all(key in t.keys() for t in trials):
            return key
    raise ValueError(f"no x key for {x!r} ({', '.join(candidates)}) in every trial")


def _marker(n_points: int) -> str | None:
    return "o" if n_points <= MARKER_MAX_POINTS else None


def _label(trial_dir: str, run_dir: str) -> str:
    rel = os.path.relpath(trial_dir, run_dir)
    return os.path.basename(run_dir) if rel == "." else rel


def build_series(
    run_dirs: Sequence[str],
    metric: str = RETURN_KEY,
    x: str = "env_steps",
    aggregate: str = "auto",
    source: str = "auto",
) -> tuple[list[Series], str]:
    """The curves to draw and the x key used (see the module docstring).

    Raises:
        FileNotFoundError: A directory that does not exist or holds no trial results.
        ValueError: An unknown option, or ``metric`` reported by no trial of a group.
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if not run_dirs:
        raise ValueError("no run directory given")
    if aggregate == "auto":
        aggregate = "none" if len(run_dirs) == 1 else "mean"
    groups: list[tuple[str, list[Trial]]] = []
    for run_dir in run_dirs:
        run_dir = os.path.abspath(os.path.expanduser(run_dir))
        if not os.path.isdir(run_dir):
            raise FileNotFoundError(f"run directory does not exist: {run_dir}")
        trial_dirs = find_trials(run_dir)
        if not trial_dirs:
            raise FileNotFoundError(f"no result.json, progress.csv or event files under {run_dir}")
        groups.append((run_dir, [read_trial(d, source) for d in trial_dirs]))
    x_key = resolve_x_key(x, [t for _, trials in groups for t in trials])
    series: list[Series] = []
    for run_dir, trials in groups:
        curves = [(t, *t.series(metric, x_key)) for t in trials]
        curves = [(t, xs, ys) for t, xs, ys in curves if xs]
        if not curves:
            sources = sorted({t.source for t in trials})
            raise ValueError(
                f"no values of {metric!r} in the {len(trials)} trial(s) under {run_dir} "
                f"(read from {', '.join(sources)}){_close_keys(metric, trials)}"
            )
        if aggregate == "none":
            for t, xs, ys in curves:
                label = _label(t.path, run_dir)[:60]
                series.append(Series(label, np.asarray(xs), np.asarray(ys), marker=_marker(len(xs))))
            continue
        grid, values = stats.aligned_curves([(xs, ys) for _, xs, ys in curves])
        label = f"{os.path.basename(run_dir)} ({aggregate} of {len(curves)} trial{'s' if len(curves) > 1 else ''})"
        if grid.size == 0:
            raise ValueError(f"the {len(curves)} trials under {run_dir} share no range of {x_key} to aggregate over")
        if len(curves) == 1:
            series.append(Series(label, grid, values[0], marker=_marker(grid.size)))
            continue
        ci = stats.stratified_bootstrap_ci([values], aggregate=stats.AGGREGATES[aggregate], seed=0)
        point, low, high = (np.atleast_1d(v) for v in (ci.point, ci.low, ci.high))
        series.append(Series(label, grid, point, low, high, marker=_marker(grid.size)))
    return series, x_key


def plot_runs(
    run_dirs: Sequence[str],
    out: str | None = None,
    metric: str = RETURN_KEY,
    x: str = "env_steps",
    aggregate: str = "auto",
    source: str = "auto",
) -> str:
    """Writes a PNG of ``metric`` against ``x`` for the run directories; returns its path.

    Args:
        run_dirs: Experiment or trial directories; each is a group.
        out: PNG path (default ``RUN_DIR/learning_curve.png`` for one directory, else
            ``./learning_curves.png``).
        metric: Any key a trial reported, ``/``-separated.
        x: ``env_steps``, ``time`` or ``iteration``.
        aggregate: ``none`` (a line per trial), ``mean`` or ``iqm`` (a line per directory with a
            95% CI band), or ``auto`` (none for one directory, mean for several).
        source: ``auto``, ``result.json``, ``progress.csv`` or ``tfevents``.

    Raises:
        FileNotFoundError, ValueError: See :func:`build_series`.
    """
    series, x_key = build_series(run_dirs, metric=metric, x=x, aggregate=aggregate, source=source)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, s in enumerate(series):
        color = f"C{i % 10}"
        ax.plot(s.xs, s.ys, label=s.label, color=color, marker=s.marker, markersize=4)
        if s.low is not None:
            ax.fill_between(s.xs, s.low, s.high, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel(X_LABELS[x] if x_key in X_KEYS[x] else x_key)
    band = any(s.low is not None for s in series)
    ax.set_ylabel(metric + (" (95% CI band)" if band else ""))
    first = os.path.abspath(os.path.expanduser(run_dirs[0]))
    ax.set_title(", ".join(os.path.basename(os.path.abspath(os.path.expanduser(d))) for d in run_dirs)[:100])
    ax.grid(alpha=0.3)
    if len(series) <= 12:
        ax.legend(fontsize=7)
    default = os.path.join(first, "learning_curve.png") if len(run_dirs) == 1 else "learning_curves.png"
    out = os.path.abspath(os.path.expanduser(out or default))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_run(run_dir: str, out: str | None = None, metric: str = RETURN_KEY) -> str:
    """One run directory, a line per trial: ``plot_runs([run_dir], out, metric)``."""
    return plot_runs([run_dir], out=out, metric=metric)
