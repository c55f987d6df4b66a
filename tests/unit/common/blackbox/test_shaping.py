"""Return shaping: centered ranks (Salimans et al. 2017), batch standardization, none."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.blackbox.shaping import SHAPINGS, centered_rank, get_shaping, none, shape_returns, standardize


def test_centered_rank_maps_ranks_onto_minus_half_to_half():
    np.testing.assert_allclose(centered_rank(np.array([3.0, -7.0, 100.0, 0.5])), [1 / 6, -0.5, 0.5, -1 / 6], atol=1e-7)
    out = centered_rank(np.random.default_rng(0).standard_normal(101))
    assert out.dtype == np.float32
    assert out.min() == -0.5 and out.max() == 0.5
    np.testing.assert_allclose(np.sort(out), np.linspace(-0.5, 0.5, 101), atol=1e-7)  # evenly spaced
    assert abs(float(out.sum())) < 1e-5


def test_centered_rank_ties_share_their_average_rank():
    # ranks 0.5, 0.5, 2, 3 of n − 1 = 3
    np.testing.assert_allclose(centered_rank([1.0, 1.0, 2.0, 3.0]), [-1 / 3, -1 / 3, 1 / 6, 1 / 2], atol=1e-7)
    np.testing.assert_array_equal(centered_rank([4.0, 4.0, 4.0]), np.zeros(3, np.float32))


def test_centered_rank_ranks_all_elements_jointly_and_keeps_the_shape():
    returns = np.array([[10.0, -10.0], [0.0, 5.0]])  # e.g. N = 2 antithetic pairs (F⁺, F⁻)
    out = centered_rank(returns)
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.5, -0.5], [-1 / 6, 1 / 6]], atol=1e-7)
    assert centered_rank([42.0]).tolist() == [0.0]


def test_centered_rank_is_invariant_to_monotone_transforms():
    x = np.random.default_rng(1).standard_normal(30)
    np.testing.assert_array_equal(centered_rank(x), centered_rank(np.exp(3 * x) + 7))


def test_standardize_gives_zero_mean_unit_std():
    x = np.random.default_rng(2).normal(50.0, 7.0, size=(40, 2))
    out = standardize(x)
    assert out.shape == (40, 2) and out.dtype == np.float32
    assert abs(float(out.mean())) < 1e-6
    assert float(out.std()) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(out, (x - x.mean()) / x.std(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("value", [0.0, 3.0, -1e6])
def test_standardize_is_safe_for_a_constant_batch(value):
    out = standardize(np.full(8, value))
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, np.zeros(8, np.float32))


def test_none_is_a_float32_copy():
    x = np.array([1.5, -2.0, 3.0])
    out = none(x)
    assert out.dtype == np.float32 and out is not x
    np.testing.assert_array_equal(out, x.astype(np.float32))
    out[0] = 99.0
    assert x[0] == 1.5


def test_registry():
    assert set(SHAPINGS) == {"centered_rank", "standardize", "none"}
    assert get_shaping("centered_rank") is centered_rank
    np.testing.assert_allclose(shape_returns([1.0, 2.0, 3.0], "standardize"), standardize([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"'rank'.*'centered_rank', 'standardize', 'none'"):
        get_shaping("rank")
