"""Perturbation samplers: shapes, regeneration by index, antithetic pairs, moments, gradient recovery."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.samplers import SAMPLERS, OrthogonalSampler, get_sampler, make_sampler
from rllib_ext.common.blackbox.shaping import shape_returns

NAMES = list(SAMPLERS)


# Every sampler in every antithetic mode it supports.
CONFIGS = [
    ("gaussian", False),
    ("gaussian", True),
    ("antithetic", True),
    ("orthogonal", False),
    ("orthogonal", True),
    ("gcmc", True),
    ("qmc", False),
    ("qmc", True),
]


CONFIG_IDS = [f"{n}-{'pairs' if a else 'single'}" for n, a in CONFIGS]


def _sampler(name, antithetic, dim):
    return make_sampler(name, dim, antithetic=antithetic)


@pytest.mark.parametrize("name,antithetic", CONFIGS, ids=CONFIG_IDS)
def test_shapes_dtype_and_reproducibility(name, antithetic):
    dim = 9
    s = _sampler(name, antithetic, dim)
    for n in (2, 8, 22):  # 22 rows: more directions than d, so the orthogonal sampler uses blocks
        eps = s.sample(seed=123, n=n)
        assert eps.shape == (n, dim) and eps.dtype == np.float32
        assert np.isfinite(eps).all()
        assert np.array_equal(eps, s.sample(123, n))  # same seed, same batch
        assert np.array_equal(eps, _sampler(name, antithetic, dim).sample(123, n))  # fresh instance (a worker)
        assert not np.allclose(eps, s.sample(124, n))  # another seed, another batch


@pytest.mark.parametrize("name,antithetic", CONFIGS, ids=CONFIG_IDS)
def test_one_row_regenerated_by_index_equals_the_batch_row(name, antithetic):
    dim, n, seed = 9, 22, 77
    batch = _sampler(name, antithetic, dim).sample(seed, n)
    worker = _sampler(name, antithetic, dim)  # no cache shared with the driver's sampler
    for i in reversed(range(n)):
        eps_i = worker.perturbation(seed, n, i)
        assert eps_i.dtype == np.float32 and eps_i.shape == (dim,)
        assert np.array_equal(eps_i, batch[i]), i


@pytest.mark.parametrize("name,antithetic", [c for c in CONFIGS if c[1] and c[0] != "gcmc"])
def test_antithetic_pairs_sum_to_zero(name, antithetic):
    eps = _sampler(name, antithetic, 11).sample(5, 16)
    assert np.array_equal(eps[0::2] + eps[1::2], np.zeros((8, 11), np.float32))


def test_gcmc_pairs_are_opposite_with_coupled_lengths():
    """Rowland et al. 2018 / paper 002 §4: F_R(‖ε‖) + F_R(‖ε′‖) = 1, F_R the chi(d) CDF."""
    for dim in (1, 3, 40, 500):
        eps = make_sampler("gcmc", dim).sample(9, 40)
        first, second = eps[0::2].astype(np.float64), eps[1::2].astype(np.float64)
        r1, r2 = np.linalg.norm(first, axis=1), np.linalg.norm(second, axis=1)
        cosine = np.sum(first * second, axis=1) / (r1 * r2)
        np.testing.assert_allclose(cosine, -1.0, atol=1e-6)
        np.testing.assert_allclose(stats.chi.cdf(r1, dim) + stats.chi.cdf(r2, dim), 1.0, atol=1e-5)
        assert not np.allclose(r1, r2)  # lengths are coupled, not equal


def test_orthogonal_directions_within_a_block():
    dim = 12
    s = make_sampler("orthogonal", dim)
    eps = s.sample(3, 30).astype(np.float64)  # blocks of 12, 12 and 6 directions
    for start, stop in ((0, 12), (12, 24), (24, 30)):
        block = eps[start:stop]
        norms = np.linalg.norm(block, axis=1)
        cosines = block @ block.T / np.outer(norms, norms)
        np.testing.assert_allclose(cosines, np.eye(stop - start), atol=1e-5)
    # Blocks are independent draws: across blocks directions are generally not orthogonal.
    assert abs(eps[0] @ eps[12]) / (np.linalg.norm(eps[0]) * np.linalg.norm(eps[12])) > 1e-3
    # With antithetic pairs the orthogonality holds between the pairs' first members.
    pairs = make_sampler("orthogonal", dim, antithetic=True).sample(3, 2 * dim)[0::2].astype(np.float64)
    gram = pairs @ pairs.T
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-4)


@pytest.mark.parametrize("name,antithetic", CONFIGS, ids=CONFIG_IDS)
def test_marginal_moments_are_standard_normal(name, antithetic):
    """Over many batch seeds every row is N(0, I_d): mean 0, covariance I, ‖ε‖² with mean d and
    variance 2d (the last catches a wrong length law, e.g. orthogonal rows of fixed length)."""
    dim, n, seeds = 5, 10, 300
    s = _sampler(name, antithetic, dim)
    eps = np.concatenate([s.sample(seed, n) for seed in range(seeds)]).astype(np.float64)  # [3000, 5]
    m = len(eps)
    assert np.abs(eps.mean(axis=0)).max() < 5 / np.sqrt(m)
    np.testing.assert_allclose(np.cov(eps.T, bias=True), np.eye(dim), atol=0.12)
    sq = np.sum(eps**2, axis=1)
    assert abs(sq.mean() - dim) < 0.35
    assert abs(sq.var() / (2 * dim) - 1) < 0.15
    # each row position is N(0, I) on its own too (e.g. the second member of a GCMC pair)
    per_row = np.concatenate([s.sample(seed, n)[n - 1 : n] for seed in range(seeds)]).astype(np.float64)
    assert stats.kstest(per_row[:, 0], "norm").pvalue > 1e-3


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name,antithetic", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("objective", ["linear", "quadratic"])
def test_estimator_recovers_the_gradient_direction(name, antithetic, objective):
    dim, n, sigma = 10, 300, 0.05
    rng = np.random.default_rng(0)
    theta = rng.standard_normal(dim)
    if objective == "linear":
        a = rng.standard_normal(dim)
        J, true_grad = (lambda x: x @ a + 3.0), a
    else:
        center = rng.standard_normal(dim)
        J, true_grad = (lambda x: -np.sum((x - center) ** 2)), -2 * (theta - center)
    eps = _sampler(name, antithetic, dim).sample(seed=42, n=n)
    returns = np.array([J(theta + sigma * e) for e in eps.astype(np.float64)])  # R(θ + σε_i), Eq. (7)
    # Shaped returns (what ES uses) remove the baseline J(θ); raw returns need exact ±ε pairs for
    # the J(θ)·ε_i terms to cancel (GCMC's pairs have unequal lengths, so they do not).
    shapings = ["standardize", "centered_rank"] + (["none"] if antithetic and name != "gcmc" else [])
    for shaping in shapings:
        g = es_gradient(shape_returns(returns, shaping), eps, sigma)
        assert g.shape == (dim,) and g.dtype == np.float32
        assert _cosine(g, true_grad) > 0.9, shaping


def test_registry_and_bad_arguments():
    assert get_sampler("GCMC") is SAMPLERS["gcmc"]
    assert get_sampler("orthogonal") is OrthogonalSampler
    assert set(NAMES) == {"gaussian", "antithetic", "orthogonal", "gcmc", "qmc"}
    with pytest.raises(ValueError, match="'sobol'.*'gaussian', 'antithetic', 'orthogonal', 'gcmc', 'qmc'"):
        make_sampler("sobol", 4)
    with pytest.raises(ValueError, match="requires antithetic=True"):
        make_sampler("gcmc", 4, antithetic=False)
    with pytest.raises(ValueError, match="even n"):
        make_sampler("antithetic", 4).sample(0, 3)
    with pytest.raises(ValueError, match="dim"):
        make_sampler("gaussian", 0)
    with pytest.raises(ValueError, match="seed"):
        make_sampler("gaussian", 3).sample(-1, 2)
    with pytest.raises(ValueError, match="index"):
        make_sampler("gaussian", 3).perturbation(0, 4, 4)
    assert make_sampler("antithetic", 3).num_directions(8) == 4
    assert make_sampler("qmc", 3).num_directions(8) == 8


def test_qmc_batch_is_more_even_than_iid_gaussian():
    """The Halton points of one batch are spread more evenly than i.i.d. uniforms (lower
    discrepancy), which is the point of QMC; the random shift keeps that property."""
    dim, n = 4, 64
    s = make_sampler("qmc", dim)
    qmc_disc, iid_disc = [], []
    for seed in range(20):
        u = stats.norm.cdf(s.sample(seed, n).astype(np.float64))
        qmc_disc.append(stats.qmc.discrepancy(u, method="WD"))
        iid_disc.append(stats.qmc.discrepancy(np.random.default_rng(seed).random((n, dim)), method="WD"))
    assert np.mean(qmc_disc) < 0.5 * np.mean(iid_disc)
