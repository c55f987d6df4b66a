"""The ES gradient estimate (Eq. 9) and its antithetic form."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.blackbox.es_gradient import es_gradient, es_gradient_antithetic
from rllib_ext.common.blackbox.samplers import make_sampler


def test_es_gradient_is_eq_9_and_its_antithetic_form():
    eps = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], dtype=np.float32)
    F = np.array([2.0, -1.0, 4.0])
    # (1/(σN)) Σ F_i ε_i with σ = 0.5, N = 3: (2·[1,0] − [0,2] + 4·[1,1]) / 1.5
    np.testing.assert_allclose(es_gradient(F, eps, 0.5), np.array([6.0, 2.0]) / 1.5, rtol=1e-6)

    s = make_sampler("antithetic", 6)
    rows = s.sample(8, 10)
    f_all = np.random.default_rng(1).standard_normal(10)
    pairwise = es_gradient_antithetic(f_all[0::2], f_all[1::2], rows[0::2], 0.02)
    np.testing.assert_allclose(es_gradient(f_all, rows, 0.02), pairwise, rtol=1e-5)

    with pytest.raises(ValueError, match="returns \\[N\\] and eps \\[N, d\\]"):
        es_gradient(F[:2], eps, 0.5)
