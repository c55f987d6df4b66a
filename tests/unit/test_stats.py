"""rllib_ext.stats: IQM and stratified bootstrap CIs (rliable's method) by closed forms and invariants."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext import stats


def test_iqm_of_known_arrays():
    # 8 values: the middle 4 are 3..6 -> 4.5; outliers do not move it.
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)
    assert stats.iqm([-1000, 2, 3, 4, 5, 6, 7, 1e9]) == pytest.approx(4.5)
    # 4 values: trim one from each end.
    assert stats.iqm([0, 10, 20, 1000]) == pytest.approx(15.0)
    # A constant array, and one value.
    assert stats.iqm([3.0] * 5) == pytest.approx(3.0)
    assert stats.iqm([7.0]) == pytest.approx(7.0)
    # rliable pools runs and tasks (axis=None).
    assert stats.iqm(np.array([[1, 5], [2, 6], [3, 7], [4, 8]])) == pytest.approx(4.5)


def test_iqm_along_an_axis_is_per_column():
    x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    np.testing.assert_allclose(stats.iqm(x, axis=0), [2.5, 25.0])


def test_ci_contains_point_and_is_deterministic_with_a_seed():
    rng = np.random.default_rng(1)
    scores = [rng.normal(100, 10, size=5), rng.normal(0, 1, size=5)]
    a = stats.stratified_bootstrap_ci(scores, reps=500, seed=3)
    b = stats.stratified_bootstrap_ci(scores, reps=500, seed=3)
    assert a == b
    assert a.low <= a.point <= a.high
    assert a.point == pytest.approx(stats.iqm(np.concatenate(scores)))
    c = stats.stratified_bootstrap_ci(scores, reps=500, seed=4)
    assert (c.low, c.high) != (a.low, a.high)


def test_ci_width_shrinks_with_more_runs():
    rng = np.random.default_rng(0)
    few = stats.stratified_bootstrap_ci([rng.normal(0, 1, size=5)], seed=0)
    many = stats.stratified_bootstrap_ci([rng.normal(0, 1, size=500)], seed=0)
    assert many.high - many.low < 0.3 * (few.high - few.low)


def test_constant_scores_and_a_single_run_give_a_zero_width_interval():
    ci = stats.stratified_bootstrap_ci([np.full(5, 2.0)], seed=0)
    assert (ci.point, ci.low, ci.high) == (2.0, 2.0, 2.0)
    one = stats.stratified_bootstrap_ci([[4.0]], aggregate=stats.mean)
    assert (one.point, one.low, one.high) == (4.0, 4.0, 4.0)


def test_stratification_never_mixes_tasks():
    # Task A's runs are all 0, task B's all 100; with 2 runs each, an unstratified bootstrap
    # could draw 4 zeros (mean 0). Stratified, every replicate keeps 2 runs of each task: mean 50.
    scores = [np.zeros(2), np.full(2, 100.0)]
    ci = stats.stratified_bootstrap_ci(scores, aggregate=stats.mean, reps=2000, seed=0)
    assert (ci.low, ci.point, ci.high) == (50.0, 50.0, 50.0)
    # rliable's (runs, tasks) layout gives the same strata.
    ci2 = stats.stratified_bootstrap_ci(np.array([[0.0, 100.0], [0.0, 100.0]]), aggregate=stats.mean, seed=0)
    assert (ci2.low, ci2.high) == (50.0, 50.0)


def test_tasks_with_different_run_counts_and_curves():
    # Per-point intervals of a curve: runs x points, two tasks with 3 and 4 runs.
    a = np.array([[0.0, 1.0, 2.0]] * 3)
    b = np.array([[0.0, 1.0, 2.0]] * 4) + np.arange(4)[:, None] * 0.1
    ci = stats.stratified_bootstrap_ci([a, b], aggregate=stats.mean, reps=200, seed=0)
    assert ci.point.shape == (3,)
    assert np.all(ci.low <= ci.point) and np.all(ci.point <= ci.high)
    np.testing.assert_allclose(ci.point, np.concatenate([a, b]).mean(axis=0))


def test_mean_ci_matches_the_normal_approximation_for_many_runs():
    # For a large sample, the percentile bootstrap of the mean approaches mean +- 1.96 sd/sqrt(n).
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, size=2000)
    ci = stats.stratified_bootstrap_ci([x], aggregate=stats.mean, reps=4000, seed=0)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert ci.high - ci.low == pytest.approx(2 * half, rel=0.1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scores": [[]]}, "no runs"),
        ({"scores": [[1.0, np.nan]]}, "non-finite"),
        ({"scores": [[1.0]], "reps": 0}, "reps"),
        ({"scores": [[1.0]], "confidence": 1.5}, "confidence"),
        ({"scores": []}, "no tasks"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stats.stratified_bootstrap_ci(**kwargs)


def test_step_hold_never_invents_values():
    out = stats.step_hold([10, 20, 30], [1.0, 2.0, 3.0], [0, 10, 15, 20, 29, 30, 31])
    np.testing.assert_array_equal(out[1:6], [1.0, 1.0, 2.0, 2.0, 3.0])
    assert np.isnan(out[0]) and np.isnan(out[6])


def test_aligned_curves_keeps_the_grid_every_run_covers():
    grid, values = stats.aligned_curves([([0, 10, 20], [0.0, 1.0, 2.0]), ([0, 5, 15], [0.0, 0.5, 1.5])])
    np.testing.assert_array_equal(grid, [0, 5, 10, 15])
    np.testing.assert_array_equal(values, [[0.0, 0.0, 1.0, 1.0], [0.0, 0.5, 0.5, 1.5]])


def test_probability_of_improvement_closed_forms():
    one = lambda *v: [np.array(v, dtype=float)]  # noqa: E731  (one task)
    assert stats.probability_of_improvement(one(5, 6, 7), one(1, 2)).point == 1.0
    assert stats.probability_of_improvement(one(1, 2), one(5, 6, 7)).point == 0.0
    assert stats.probability_of_improvement(one(1, 3), one(2)).point == 0.5  # one win, one loss
    assert stats.probability_of_improvement(one(1, 2), one(2)).point == 0.25  # a loss and a tie (half)
    same = stats.probability_of_improvement(one(3, 1, 2), one(2, 3, 1))
    assert same.point == 0.5 and same.low <= 0.5 <= same.high
    # Every resample of a clear winner still wins: a zero-width interval at 1.
    clear = stats.probability_of_improvement(one(5, 6, 7), one(1, 2))
    assert (clear.low, clear.high) == (1.0, 1.0)


def test_probability_of_improvement_is_the_mann_whitney_statistic_and_complements():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    x, y = np.round(rng.normal(1.0, 1.0, 7), 1), np.round(rng.normal(0.0, 1.0, 5), 1)  # rounded: ties
    u = mannwhitneyu(x, y, alternative="greater").statistic / (len(x) * len(y))  # rliable's form
    forward, backward = stats.probability_of_improvement([x], [y]), stats.probability_of_improvement([y], [x])
    assert forward.point == pytest.approx(u)
    assert forward.point + backward.point == pytest.approx(1.0)
    assert 0.0 <= forward.low <= forward.point <= forward.high <= 1.0
    assert forward == stats.probability_of_improvement([x], [y])  # seeded
    # Two tasks: the mean of the per-task probabilities; strata are never mixed.
    two = stats.probability_of_improvement([x, np.array([9.0, 9.5])], [y, np.array([0.0])])
    assert two.point == pytest.approx((u + 1.0) / 2)
    assert two.low >= forward.low / 2 + 0.5 - 1e-12  # task 2 is a win in every resample


@pytest.mark.parametrize(
    "x, y, message",
    [
        ([np.ones(3)], [np.ones(3), np.ones(2)], "same tasks"),
        ([np.ones((3, 2))], [np.ones((3, 2))], "no points axis"),
        ([np.array([1.0, np.nan])], [np.ones(2)], "non-finite"),
        ([np.array([])], [np.ones(2)], "no runs"),
    ],
)
def test_probability_of_improvement_bad_input_is_a_clear_error(x, y, message):
    with pytest.raises(ValueError, match=message):
        stats.probability_of_improvement(x, y)
