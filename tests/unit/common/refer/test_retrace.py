"""Retrace targets (paper 003 Eq. 8): a hand-made episode, the vectorized form against the loop."""

from __future__ import annotations

import numpy as np

from rllib_ext.common.refer.retrace import retrace_tbc, retrace_tbc_loop


def test_eq8_on_a_hand_made_episode():
    # T = 3, γ = 0.5, V = (1, 2, 3), ρ = (0.5, 2, 1), r = (1, 0, 2), V(s_3) = 4 (truncated).
    r, v, rho, gamma, v3 = [1.0, 0.0, 2.0], [1.0, 2.0, 3.0], [0.5, 2.0, 1.0], 0.5, 4.0
    # Eq. (8) by hand, backwards: ρ̄ = (0.5, 1, 1)
    v2 = 3 + 1 * (2 + 0.5 * 4 - 3)  # = 4
    v1 = 2 + 1 * (0 + 0.5 * v2 - 2)  # = 2
    v0 = 1 + 0.5 * (1 + 0.5 * v1 - 1)  # = 1.5
    expected = [v0, v1, v2]
    np.testing.assert_allclose(retrace_tbc_loop(r, v, rho, gamma, v3), expected)
    last = np.array([False, False, True])
    np.testing.assert_allclose(retrace_tbc(r, v, rho, gamma, last, np.array([0, 0, v3])), expected)


def test_vectorized_eq8_equals_loop_on_many_episodes():
    rng = np.random.default_rng(0)
    lens = [1, 7, 33, 200, 5]
    r, v, rho, last, bound, expected = [], [], [], [], [], []
    for T in lens:
        ri, vi, pi, b = rng.standard_normal(T), rng.standard_normal(T), rng.exponential(1.0, T), rng.standard_normal()
        r.append(ri)
        v.append(vi)
        rho.append(pi)
        li = np.zeros(T, bool)
        li[-1] = True
        last.append(li)
        bi = np.zeros(T)
        bi[-1] = b
        bound.append(bi)
        expected.append(retrace_tbc_loop(ri, vi, pi, 0.99, b))
    got = retrace_tbc(*(np.concatenate(x) for x in (r, v, rho)), 0.99, np.concatenate(last), np.concatenate(bound))
    np.testing.assert_allclose(got, np.concatenate(expected), rtol=1e-10, atol=1e-10)


def test_blockwise_scan_equals_doubling_and_loop():
    """The blockwise solver (issue 19) gives the doubling scan's and the loop's x up to float64
    rounding: segments shorter and longer than a block, cuts (c = 0) anywhere, a ragged end."""
    from rllib_ext.common.refer.retrace import affine_reverse_scan, affine_reverse_scan_doubling

    rng = np.random.default_rng(3)
    for n, block in [(1, 16), (40, 16), (1000, 16), (2347, 16), (5003, 8), (777, 64)]:
        a = rng.standard_normal(n)
        c = 0.99 * np.minimum(1.0, rng.lognormal(0.0, 0.3, n))
        c[rng.random(n) < 0.02] = 0.0  # segment ends
        c[rng.random(n) < 0.01] = 1e-300  # ρ̄ vanishing
        c[-1] = 0.0
        expected = np.zeros(n)
        nxt = 0.0
        for t in range(n - 1, -1, -1):
            nxt = expected[t] = a[t] + c[t] * nxt
        np.testing.assert_allclose(affine_reverse_scan(a, c, block), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(affine_reverse_scan_doubling(a, c), expected, rtol=1e-12, atol=1e-12)


def test_compiled_segment_loop_equals_the_reference_loop_exactly():
    """Issue 42: numba's Eq. (8) loop over contiguous row ranges gives retrace_tbc_loop's floats bit for bit."""
    from rllib_ext.common.refer.retrace import retrace_segments_kernel

    kernel = retrace_segments_kernel()
    assert kernel is not None, "numba is a dependency"
    rng = np.random.default_rng(3)
    lens = rng.integers(1, 400, size=40)
    n = int(lens.sum()) + 7
    rewards, values = rng.normal(size=n), rng.normal(size=n)
    rho = np.exp(rng.normal(0, 1, size=n))  # both sides of 1: ρ̄ = min(1, ρ)
    starts = np.r_[3, 3 + np.cumsum(lens)[:-1]].astype(np.int64)  # rows 0-2 and the tail stay untouched
    boundary = rng.normal(size=len(lens))
    out = np.full(n, 123.0)
    kernel(out, rewards, values, rho, starts, lens.astype(np.int64), boundary, 0.99, 0.7)
    for s, L, b in zip(starts, lens, boundary, strict=True):
        ref = retrace_tbc_loop(rewards[s : s + L] * 0.7, values[s : s + L], rho[s : s + L], 0.99, b)
        assert np.array_equal(out[s : s + L], ref)
    assert (out[:3] == 123.0).all() and (out[starts[-1] + lens[-1] :] == 123.0).all()


def test_memory_targets_compiled_equal_numpy_path():
    """The memory's write-back with the numba loop and with numpy's vectorized scan: equal to 1e-12."""
    from rllib_ext.common.refer.memory import ReplayMemory

    mems = [ReplayMemory(capacity=3000, gamma=0.99, seed=1, compiled_targets=flag) for flag in (True, False)]
    rng = np.random.default_rng(0)
    for T in (300, 700, 1, 450, 900):
        ep = {
            "obs": rng.normal(size=(T + 1, 3)),
            "actions": rng.normal(size=(T, 1)),
            "rewards": rng.normal(size=T),
            "mu": rng.normal(size=(T, 2)),
            "terminated": bool(T % 2),
            "values": rng.normal(size=T),
            "rho": np.exp(rng.normal(size=T)),
            "v_boot": 0.3,
        }
        for m in mems:
            m.add_episode(**ep)
    for _ in range(5):
        idx = mems[0].sample(64)["idx"]
        rho, v = np.exp(rng.normal(size=64)), rng.normal(size=64)
        for m in mems:
            m.write_back(idx, rho=rho, values=v)
    mems[0].update_reward_scale()
    mems[1].update_reward_scale()
    np.testing.assert_allclose(mems[0].column("v_tbc"), mems[1].column("v_tbc"), rtol=1e-12, atol=1e-12)


def test_without_numba_the_kernel_is_none_with_one_log_line(monkeypatch, caplog):
    import sys

    from rllib_ext.common.refer import retrace

    monkeypatch.setattr(retrace, "_KERNEL", [])
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    with caplog.at_level("WARNING", logger=retrace.__name__):
        assert retrace.retrace_segments_kernel() is None
        assert retrace.retrace_segments_kernel() is None
    assert len([r for r in caplog.records if "numba" in r.getMessage()]) == 1
