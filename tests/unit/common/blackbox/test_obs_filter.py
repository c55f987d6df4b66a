"""The observation filter: runner deltas merge into the driver's statistics; frozen standardization."""

from __future__ import annotations

import numpy as np

from rllib_ext.common.blackbox.obs_filter import ObservationFilter, running_stat_from_batch


def test_merged_runner_deltas_equal_statistics_of_all_observations():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=(int(rng.integers(1, 50)), 4)) for _ in range(7)]
    driver = ObservationFilter((4,), clip=5.0)
    runners = [ObservationFilter((4,), clip=5.0) for _ in range(3)]
    for i, chunk in enumerate(chunks):
        runner = runners[i % 3]
        for obs in chunk:
            runner(obs)
        driver.merge(runner.pop_delta())
    every = np.concatenate(chunks)
    assert driver.stats.n == len(every)
    np.testing.assert_allclose(driver.stats.mean, every.mean(0), rtol=1e-6)  # float32 observations
    np.testing.assert_allclose(driver.stats.var, every.var(0, ddof=1), rtol=1e-5)
    assert runners[0].pop_delta() is None  # deltas are handed over once


def test_filter_standardizes_with_frozen_stats_and_clips():
    f = ObservationFilter((2,), clip=5.0)
    f.merge(running_stat_from_batch(np.array([[0.0, 10.0], [2.0, 10.0], [4.0, 10.0]])))
    out = f(np.array([2.0, 10.0], np.float32))
    np.testing.assert_allclose(out, [0.0, 0.0], atol=1e-6)  # mean 2, std 2; zero std is floored
    assert f(np.array([1000.0, 10.0]))[0] == 5.0
    assert f(np.array([-1000.0, 10.0]))[0] == -5.0
    g = ObservationFilter((2,), clip=5.0)
    g.set_state(f.get_state())
    np.testing.assert_array_equal(g(np.array([3.0, 10.0]), record=False), f(np.array([3.0, 10.0]), record=False))


def test_disabled_filter_is_identity():
    f = ObservationFilter((3,), enabled=False)
    x = np.array([1.0, -7.0, 100.0], np.float32)
    np.testing.assert_array_equal(f(x), x)
    assert f.pop_delta() is None
