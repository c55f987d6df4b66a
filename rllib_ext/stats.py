"""Aggregate scores over runs the way the field reports them: IQM and stratified bootstrap CIs.

This is the method of ``rliable`` (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
Precipice"; what paper 000 reports), reimplemented with numpy/scipy:

- :func:`iqm`: the interquartile mean, ``scipy.stats.trim_mean(x, 0.25)`` over all runs (and
  tasks) pooled, as ``rliable.metrics.aggregate_iqm``.
- :func:`stratified_bootstrap_ci`: a 95% percentile interval of an aggregate. Each bootstrap
  replicate resamples the runs of every task (env) with replacement, independently per task (the
  tasks are the strata: a replicate never moves a run from one task to another), pools the
  resampled runs and recomputes the aggregate; the interval is the 2.5th and 97.5th percentiles of
  the replicates (``rliable.library.get_interval_estimates`` with its default ``percentile``
  method and ``task_bootstrap=False``). Default 2000 replicates, seeded.

Why reimplemented, not imported: ``rliable`` 1.2 needs ``arch<8``, whose import fails under
pandas 3 (which Ray 2.60 pulls in) with ``TypeError: deprecate_kwarg()``; pinning ``pandas<3``
would fight Ray. The method is a few lines of numpy; the unit tests check it with closed forms
and invariants (tests/unit/test_stats.py).

- :func:`probability_of_improvement`: P(X > Y), the probability that a run of algorithm X scores
  higher than a run of Y on the same task (ties count half), averaged over tasks
  (``rliable.metrics.probability_of_improvement``: the Mann–Whitney U statistic over n·m); its
  interval resamples the runs of X and of Y independently within each task
  (``rliable.library.StratifiedIndependentBootstrap``). Where the IQMs' intervals of two
  algorithms overlap, this is the comparison the rliable paper recommends for "is X better
  than Y".

Also here, because both ``rllib plot`` (:mod:`rllib_ext.plotting`) and the benchmark report
(:mod:`rllib_ext.compare.report`, ``rllib report``) draw curves from runs evaluated at different x values:
:func:`step_hold`, which puts runs on a common grid without inventing values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

#: Bootstrap replicates when the caller does not say (rliable's examples use 2000 as well).
DEFAULT_REPS = 2000

Aggregate = Callable[..., np.ndarray]


def iqm(scores, axis: int | None = None):
    """Interquartile mean: the mean of the middle 50% of ``scores`` (25% cut from each end).

    Args:
        scores: Array of scores.
        axis: Axis to aggregate over; None pools every value (rliable's ``aggregate_iqm``).

    Returns:
        A float (``axis=None``) or an array without ``axis``.
    """
    return scipy_stats.trim_mean(np.asarray(scores, dtype=float), proportiontocut=0.25, axis=axis)


def mean(scores, axis: int | None = None):
    """The plain mean (rliable's ``aggregate_mean``), with :func:`iqm`'s signature."""
    return np.mean(np.asarray(scores, dtype=float), axis=axis)


AGGREGATES: dict[str, Aggregate] = {"iqm": iqm, "mean": mean}


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (floats, or arrays for curves)."""

    point: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray


def _as_strata(scores) -> list[np.ndarray]:
    """Per-task arrays of shape (runs, *points) from a list of tasks or a (runs, tasks) array."""
    if isinstance(scores, np.ndarray):
        if scores.ndim == 1:
            return [scores.astype(float)]
        # rliable's layout: (runs, tasks[, points]) -> one stratum per task.
        return [np.asarray(scores[:, t], dtype=float) for t in range(scores.shape[1])]
    strata = [np.asarray(s, dtype=float) for s in scores]
    if not strata:
        raise ValueError("no tasks to aggregate")
    tails = {s.shape[1:] for s in strata}
    if len(tails) != 1:
        raise ValueError(f"every task must have the same points per run, got shapes {[s.shape for s in strata]}")
    return strata


def stratified_bootstrap_ci(
    scores,
    aggregate: Aggregate = iqm,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Interval:
    """Point estimate and stratified-bootstrap percentile interval of ``aggregate`` over runs.

    Args:
        scores: Either a sequence with one array per task (env), each of shape ``(runs,)`` or
            ``(runs, points)`` (tasks may have different numbers of runs), or one array of shape
            ``(runs, tasks)`` / ``(runs, tasks, points)`` (rliable's layout). ``points`` are
            aggregated independently (a learning curve: one interval per x).
        aggregate: ``f(array, axis=0)`` reducing pooled runs, e.g. :func:`iqm` or :func:`mean`.
        reps: Bootstrap replicates.
        confidence: Interval size, e.g. 0.95.
        seed: Seed of the resampling (None: fresh entropy).

    Returns:
        An :class:`Interval`; with a single run in total the interval is the point itself.

    Raises:
        ValueError: No runs, a task with no runs, non-finite scores, ``reps < 1`` or a
            ``confidence`` outside (0, 1).
    """
    strata = _checked_strata(scores, reps, confidence)
    pooled = np.concatenate(strata, axis=0)
    point = aggregate(pooled, axis=0)
    rng = np.random.default_rng(seed)
    # Resample run indices within each task, independently: shape (reps, runs_t) per task.
    resampled = [s[rng.integers(0, s.shape[0], size=(reps, s.shape[0]))] for s in strata]
    replicates = aggregate(np.concatenate(resampled, axis=1), axis=1)  # (reps, *points)
    return _percentile_interval(point, replicates, confidence)


def _checked_strata(scores, reps: int, confidence: float) -> list[np.ndarray]:
    """:func:`_as_strata` of ``scores``, with every argument of an interval checked."""
    strata = _as_strata(scores)
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    for t, s in enumerate(strata):
        if s.shape[0] == 0:
            raise ValueError(f"task {t} has no runs")
        if not np.all(np.isfinite(s)):
            raise ValueError(f"task {t} has non-finite scores")
    return strata


def _percentile_interval(point, replicates: np.ndarray, confidence: float) -> Interval:
    """The percentile interval of bootstrap ``replicates`` (reps on axis 0) around ``point``."""
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)], axis=0)
    if np.ndim(point) == 0:
        return Interval(float(point), float(low), float(high))
    return Interval(np.asarray(point), np.asarray(low), np.asarray(high))


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + ½ P(X = Y) over all pairs of runs: x (..., n), y (..., m) -> (...)."""
    diff = x[..., :, None] - y[..., None, :]
    return ((diff > 0).mean(axis=(-2, -1))) + 0.5 * (diff == 0).mean(axis=(-2, -1))


def probability_of_improvement(
    scores_x,
    scores_y,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Interval:
    """P(X > Y): how likely a run of X beats a run of Y on a task, averaged over tasks, with its interval.

    Args:
        scores_x, scores_y: Final scores of X and of Y, each as :func:`stratified_bootstrap_ci`
            takes them (one array of runs per task, or a (runs, tasks) array; no points axis).
            Both must have the same tasks; their run counts may differ.
        reps: Bootstrap replicates.
        confidence: Interval size, e.g. 0.95.
        seed: Seed of the resampling (None: fresh entropy).

    Returns:
        An :class:`Interval` in [0, 1]; 0.5 means neither is ahead. P(X > Y) + P(Y > X) = 1.

    Raises:
        ValueError: As :func:`stratified_bootstrap_ci`, or the tasks of X and Y differ in number,
            or scores have a points axis.
    """
    xs = _checked_strata(scores_x, reps, confidence)
    ys = _checked_strata(scores_y, reps, confidence)
    if len(xs) != len(ys):
        raise ValueError(f"X has {len(xs)} tasks and Y has {len(ys)}: compare them on the same tasks")
    if any(s.ndim != 1 for s in xs + ys):
        raise ValueError("probability_of_improvement takes one score per run (no points axis)")
    point = float(np.mean([_improvement(x, y) for x, y in zip(xs, ys, strict=True)]))
    rng = np.random.default_rng(seed)
    replicates = np.zeros(reps)
    for x, y in zip(xs, ys, strict=True):  # each task: the runs of X and of Y resampled independently
        bx = x[rng.integers(0, x.shape[0], size=(reps, x.shape[0]))]
        by = y[rng.integers(0, y.shape[0], size=(reps, y.shape[0]))]
        replicates += _improvement(bx, by) / len(xs)
    return _percentile_interval(point, replicates, confidence)


def step_hold(xs: Sequence[float], ys: Sequence[float], grid: Sequence[float]) -> np.ndarray:
    """Values of one run on ``grid``: at each grid x, the last y measured at or before x.

    A run evaluated at x_i is known at x_i and assumed unchanged until its next measurement; before
    its first measurement and after its last one it is unknown (NaN), never extrapolated.

    Args:
        xs: Increasing x values of the run's measurements.
        ys: Measurements, one per x.
        grid: Where the values are wanted.

    Returns:
        Array of ``len(grid)`` floats, NaN where the run has no value.
    """
    xs = np.asarray(xs, dtype=float)
    ys = np.asarray(ys, dtype=float)
    grid = np.asarray(grid, dtype=float)
    if xs.shape != ys.shape:
        raise ValueError(f"xs and ys differ in length: {xs.shape} vs {ys.shape}")
    out = np.full(grid.shape, np.nan)
    if xs.size == 0:
        return out
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    idx = np.searchsorted(xs, grid, side="right") - 1
    inside = (idx >= 0) & (grid <= xs[-1])
    out[inside] = ys[idx[inside]]
    return out


def aligned_curves(
    runs: Sequence[tuple[Sequence[float], Sequence[float]]], grid: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Runs ``[(xs, ys), ...]`` on a common grid where every run has a value.

    Args:
        runs: One (xs, ys) pair per run.
        grid: Candidate x values; default the union of every run's xs.

    Returns:
        ``(grid, values)``: the grid points covered by all runs (from the latest first measurement
        to the earliest last one) and a ``(runs, len(grid))`` array.
    """
    if not runs:
        raise ValueError("no runs")
    if grid is None:
        grid = np.unique(np.concatenate([np.asarray(x, dtype=float) for x, _ in runs]))
    values = np.stack([step_hold(x, y, grid) for x, y in runs])
    covered = np.all(np.isfinite(values), axis=0)
    return np.asarray(grid, dtype=float)[covered], values[:, covered]
