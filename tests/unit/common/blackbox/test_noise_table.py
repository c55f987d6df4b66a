"""rllib_ext.common.blackbox.noise_table: the shared noise table (issue 41 §3), and where it is used."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.noise_table import NoiseTable, make_noise


def test_the_table_is_reproducible_from_its_seed_and_standard_normal():
    a, b = make_noise(200_000, seed=3), make_noise(200_000, seed=3)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a, make_noise(200_000, seed=4))
    assert abs(a.mean()) < 0.01 and abs(a.std() - 1.0) < 0.01
    assert make_noise(100, seed=3, dtype="float16").dtype == np.float16


def test_offsets_are_a_reproducible_function_of_seed_and_row_within_the_table():
    table = NoiseTable(make_noise(10_000, seed=0), dim=100, antithetic=False)
    offsets = table.offsets(seed=17, indices=range(50))
    assert np.array_equal(offsets, table.offsets(17, range(50)))
    assert offsets.min() >= 0 and offsets.max() <= 10_000 - 100
    assert len(set(offsets.tolist())) > 45  # rows of a batch read different slices
    assert not np.array_equal(offsets, table.offsets(18, range(50)))


def test_antithetic_rows_share_their_directions_slice_and_negate_it():
    noise = make_noise(5_000, seed=1)
    table = NoiseTable(noise, dim=64, antithetic=True)
    offsets = table.offsets(seed=5, indices=range(8))
    assert np.array_equal(offsets[0::2], offsets[1::2])
    rows = table.rows(offsets, range(8))
    assert np.array_equal(rows[1::2], -rows[0::2])
    for i in range(8):
        assert np.array_equal(table.row(int(offsets[i]), i), rows[i])
    assert np.array_equal(rows[0], noise[offsets[0] : offsets[0] + 64])


def test_the_weighted_sum_is_the_es_estimate_over_the_slices():
    table = NoiseTable(make_noise(20_000, seed=2), dim=300, antithetic=True)
    offsets, returns = table.offsets(9, range(10)), np.linspace(-1, 1, 10)
    eps = table.rows(offsets, range(10))
    np.testing.assert_allclose(
        table.weighted_sum(returns, offsets, range(10)), returns @ eps.astype(np.float64), rtol=1e-6
    )
    np.testing.assert_allclose(es_gradient(returns, eps, 0.1), returns @ eps / (0.1 * 10), rtol=1e-5)


def test_a_table_smaller_than_theta_is_refused():
    with pytest.raises(ValueError, match="raise noise_table_size"):
        NoiseTable(make_noise(10, seed=0), dim=11, antithetic=False)


@pytest.mark.parametrize(
    "sampler, setting, uses",
    [
        ("antithetic", "auto", True),
        ("gaussian", "auto", True),
        ("orthogonal", "auto", False),
        ("gcmc", "auto", False),
        ("antithetic", False, False),
        ("gaussian", True, True),
    ],
)
def test_auto_takes_the_table_only_for_iid_gaussian_samplers(sampler, setting, uses):
    from rllib_ext import ESConfig

    config = ESConfig().training(sampler=sampler, noise_table=setting)
    assert config.uses_noise_table is uses


@pytest.mark.parametrize("sampler", ["orthogonal", "gcmc", "qmc"])
def test_noise_table_true_with_a_coupled_sampler_is_one_clear_validate_error(sampler):
    from rllib_ext import ESConfig

    config = ESConfig().environment("CartPole-v1").training(sampler=sampler, noise_table=True)
    with pytest.raises(ValueError, match="noise_table=True: the shared noise table stands for i.i.d. Gaussian"):
        config.validate()


def test_the_driver_reads_each_row_by_its_jobs_path_old_seeded_jobs_included():
    """A checkpoint written before the table holds jobs without an offset: regenerated, exactly."""
    from rllib_ext.common.blackbox.algorithm import BlackBoxAlgorithm
    from rllib_ext.common.blackbox.protocol import EpisodeResult, PerturbationJob
    from rllib_ext.common.blackbox.samplers import make_sampler

    algo = object.__new__(BlackBoxAlgorithm)
    algo.theta = np.zeros(50, dtype=np.float32)
    algo.sampler = make_sampler("antithetic", 50)
    algo.noise = NoiseTable(make_noise(4_000, seed=0), 50, antithetic=True)
    offsets = algo.noise.offsets(7, range(4))

    def result(index, offset):
        job = PerturbationJob(id=index, seed=7, n=4, index=index, noise_offset=offset)
        return EpisodeResult(job=job, ret=0.0, returns=(0.0,))

    seeded = [result(i, None) for i in range(4)]
    assert np.array_equal(algo.perturbations(seeded), algo.sampler.sample(7, 4))
    table = [result(i, int(offsets[i])) for i in range(4)]
    assert np.array_equal(algo.perturbations(table), algo.noise.rows(offsets, range(4)))
    mixed = algo.perturbations([seeded[1], table[2]])
    assert np.array_equal(mixed[0], algo.sampler.perturbation(7, 4, 1))
    assert np.array_equal(mixed[1], algo.noise.row(int(offsets[2]), 2))
