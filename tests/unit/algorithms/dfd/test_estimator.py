"""DFD's delayed-FD estimator (paper 000 Eq. 16–18, 23) and batch assembly (App. A.2)."""

from __future__ import annotations

import numpy as np

from rllib_ext.algorithms.dfd.estimator import (
    ParameterHistory,
    ReturnBuffer,
    dfd_gradient,
)
from rllib_ext.common.blackbox.protocol import EpisodeResult, PerturbationJob, result_from_state
from rllib_ext.common.blackbox.shaping import standardize


def history_of(thetas):
    h = ParameterHistory(u_max=len(thetas))
    for u, t in enumerate(thetas):
        h.add(u, t)
    return h


def test_without_delays_g_dfd_is_the_forward_difference_estimator_eq10():
    rng = np.random.default_rng(0)
    d, n, sigma = 6, 8, 0.1
    theta = rng.normal(size=d)
    sigma_eps = sigma * rng.normal(size=(n, d))
    rewards = rng.normal(size=n) * 3 + 7
    g, info = dfd_gradient(rewards, sigma_eps, np.zeros(n, int), history_of([theta]), 0, np.zeros(n, int))
    r = standardize(rewards)
    expected = sum((r[i] - r.mean()) * sigma_eps[i] / (sigma_eps[i] @ sigma_eps[i]) for i in range(n)) / n
    np.testing.assert_allclose(g, expected, rtol=1e-5)
    assert info["current_fraction"] == 1.0
    np.testing.assert_allclose(info["lambda_norm_mean"], np.linalg.norm(sigma_eps, axis=1).mean())


def test_lambda_includes_the_parameter_change_for_delayed_returns_eq17():
    """λ_i = σε_i when n_i = 0, and σε_i + θ_{u−n} − θ_u otherwise (checked through g)."""
    d = 3
    thetas = [np.zeros(d), np.array([1.0, 0.0, 0.0]), np.array([1.0, 2.0, 0.0])]
    sigma_eps = np.array([[0.0, 0.0, 0.5], [0.0, 0.0, 0.5]])
    rewards = np.array([1.0, -1.0])  # standardized: [1, -1]
    # Return 0 is current (u=2), return 1 comes from θ_0 (n=2): λ_1 = σε + θ_0 − θ_2 = [-1, -2, 0.5].
    g, info = dfd_gradient(rewards, sigma_eps, np.array([0, 2]), history_of(thetas), 2, np.array([2, 0]))
    lam0, lam1 = sigma_eps[0], sigma_eps[1] + thetas[0] - thetas[2]
    r_theta_u = 1.0  # Eq. 23: mean standardized reward of the current-policy returns
    expected = ((1.0 - r_theta_u) * lam0 / (lam0 @ lam0) + (-1.0 - r_theta_u) * lam1 / (lam1 @ lam1)) / 2
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    assert info["r_theta_u"] == 1.0 and info["current_fraction"] == 0.5


def test_a_batch_without_current_returns_centres_on_the_batch_mean():
    thetas = [np.zeros(2), np.ones(2)]
    g, info = dfd_gradient(
        np.array([3.0, 5.0]), np.eye(2) * 0.1, np.array([1, 1]), history_of(thetas), 1, np.array([0, 0])
    )
    assert info["r_theta_u"] == 0.0 and info["current_fraction"] == 0.0
    assert np.all(np.isfinite(g))


def test_g_dfd_points_uphill_on_a_linear_objective():
    rng = np.random.default_rng(1)
    d, n, sigma = 20, 400, 0.05
    w = rng.normal(size=d)
    theta = rng.normal(size=d)
    sigma_eps = sigma * rng.normal(size=(n, d))
    rewards = (theta + sigma_eps) @ w
    g, _ = dfd_gradient(rewards, sigma_eps, np.zeros(n, int), history_of([theta]), 0, np.zeros(n, int))
    assert g @ w / (np.linalg.norm(g) * np.linalg.norm(w)) > 0.9


def ret(u, i):
    return EpisodeResult(job=PerturbationJob(id=i, version=u, seed=1, n=8, index=i), ret=float(i), returns=(float(i),))


def test_extra_returns_are_carried_to_the_next_update_none_lost():
    buf = ReturnBuffer(n=4, u_max=3)
    buf.add([ret(0, i) for i in range(7)], u=0)
    first = buf.take_batch(0)
    assert [r.id for r in first] == [0, 1, 2, 3]
    assert not buf.ready()
    buf.add([ret(1, 7)], u=1)
    second = buf.take_batch(1)
    assert [r.id for r in second] == [4, 5, 6, 7]  # the carried three, oldest first
    assert buf.num_dropped_stale == 0


def test_returns_older_than_u_max_are_dropped_and_counted():
    buf = ReturnBuffer(n=2, u_max=3)
    assert buf.add([ret(0, 0), ret(1, 1), ret(4, 2)], u=4) == 1  # n = 4 > U_max
    assert buf.num_dropped_stale == 1
    # A carried return ages while it waits: at u = 5 the one from u = 1 is too old.
    buf.add([ret(5, 3)], u=5)
    batch = buf.take_batch(5)
    assert [r.id for r in batch] == [2, 3] and buf.num_dropped_stale == 2


def test_fd_ablation_drops_every_delayed_return():
    buf = ReturnBuffer(n=2, u_max=3, delayed_returns=False)
    assert buf.add([ret(2, 0), ret(3, 1), ret(3, 2)], u=3) == 1
    assert [r.id for r in buf.take_batch(3)] == [1, 2]


def test_every_return_is_counted_once_by_its_delay_where_it_leaves_the_buffer():
    """delay_counts[n] for n = 0 … U_max, the last bin for n > U_max (dropped); pending ones not yet."""
    buf = ReturnBuffer(n=2, u_max=2)
    buf.add([ret(0, 0), ret(1, 1), ret(1, 2), ret(1, 3)], u=1)  # none too old (n <= 1)
    assert buf.delay_counts.tolist() == [0, 0, 0, 0]  # all pending
    assert [r.id for r in buf.take_batch(1)] == [0, 1]  # delays 1, 0
    assert buf.delay_counts.tolist() == [1, 1, 0, 0]
    buf.add([ret(0, 4)], u=6)  # dropped on arrival: n = 6
    assert buf.delay_counts.tolist() == [1, 1, 0, 1] and buf.delay_max == 6
    buf.add([ret(3, 5), ret(4, 6)], u=4)  # the carried two (version 1) are now 3 > U_max behind
    assert [r.id for r in buf.take_batch(4)] == [5, 6]
    assert buf.delay_counts.tolist() == [2, 2, 0, 3]
    assert buf.delay_counts.sum() == 7 and buf.delay_counts[-1] == buf.num_dropped_stale
    restored = ReturnBuffer(n=2, u_max=2)
    restored.set_state(buf.get_state())
    assert restored.delay_counts.tolist() == [2, 2, 0, 3] and restored.delay_max == 6
    restored.set_state({"pending": [], "num_dropped_stale": 0})  # a checkpoint before the histogram
    assert restored.delay_counts.tolist() == [0, 0, 0, 0] and restored.delay_max == 0


def test_fd_ablation_counts_its_dropped_returns_by_their_own_delay():
    buf = ReturnBuffer(n=1, u_max=3, delayed_returns=False)
    buf.add([ret(2, 0), ret(3, 1)], u=3)
    buf.take_batch(3)
    assert buf.delay_counts.tolist() == [1, 1, 0, 0, 0]


def test_parameter_history_keeps_u_max_plus_one():
    h = ParameterHistory(u_max=2)
    for u in range(5):
        h.add(u, np.full(2, u))
    assert 1 not in h and all(u in h for u in (2, 3, 4))
    g = ParameterHistory(u_max=0)
    g.set_state(h.get_state())
    np.testing.assert_array_equal(g[3], [3, 3])


def test_pending_returns_survive_a_checkpoint_and_pre_protocol_checkpoints_still_load():
    buf = ReturnBuffer(n=2, u_max=3)
    buf.add([ret(1, 0), ret(2, 1), ret(2, 2)], u=2)
    restored = ReturnBuffer(n=2, u_max=3)
    restored.set_state(buf.get_state())
    assert restored.pending == buf.pending  # typed results, equal field by field
    # A checkpoint written before the typed protocol held plain dicts.
    old = {"id": 5, "seed": 9, "n": 40, "index": 3, "return": 2.5, "length": 17, "u": 4, "failed": False}
    restored.set_state({"pending": [old], "num_dropped_stale": 1})
    (r,) = restored.pending
    assert (r.id, r.version, r.job.seed, r.job.n, r.index, r.ret, r.length) == (5, 4, 9, 40, 3, 2.5, 17)
    assert result_from_state(old).returns == (2.5,)
