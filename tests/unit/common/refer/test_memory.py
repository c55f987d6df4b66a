"""ReF-ER's replay memory: targets, write-back, FIFO eviction by episodes, App. B statistics, PER."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.refer.memory import ReplayMemory, per_beta_schedule
from rllib_ext.common.refer.retrace import retrace_tbc_loop
from tests.replay_data import replay_episode


def test_memory_targets_and_write_back_correct_prior_steps():
    rng = np.random.default_rng(1)
    m = ReplayMemory(capacity=1000, gamma=0.9, seed=0)
    ep = replay_episode(6, rng)
    values = rng.standard_normal(6)
    m.add_episode(**ep, values=values, v_boot=2.0)
    np.testing.assert_allclose(m.column("v_tbc"), retrace_tbc_loop(ep["rewards"], values, np.ones(6), 0.9, 2.0))
    # Write back step 3: steps 0..3 are corrected from the stored V̂^tbc_4; steps 4, 5 keep theirs.
    before = m.column("v_tbc")
    new_rho, new_v = 0.3, 5.0
    m.write_back(np.array([3]), rho=np.array([new_rho]), values=np.array([new_v]))
    rho = np.ones(6)
    rho[3] = new_rho
    v = values.copy()
    v[3] = new_v
    exp_prior = retrace_tbc_loop(ep["rewards"][:4], v[:4], rho[:4], 0.9, before[4])
    after = m.column("v_tbc")
    np.testing.assert_allclose(after[:4], exp_prior)
    np.testing.assert_allclose(after[4:], before[4:])
    # q_ret = r̂_{t+1} + γ V̂^tbc_{t+1}; the last step bootstraps with V(s_T).
    b = m.gather(np.array([2, 5]))
    np.testing.assert_allclose(b["q_ret"], [ep["rewards"][2] + 0.9 * after[3], ep["rewards"][5] + 0.9 * 2.0], rtol=1e-6)
    np.testing.assert_allclose(b["next_obs"][1], ep["obs"][6], rtol=1e-6)
    assert list(b["truncated_last"]) == [False, True]


def test_terminal_episode_bootstraps_with_zero():
    rng = np.random.default_rng(2)
    m = ReplayMemory(capacity=100, gamma=0.5)
    ep = replay_episode(3, rng, terminated=True)
    m.add_episode(**ep, v_boot=123.0)
    np.testing.assert_allclose(m.column("v_tbc"), retrace_tbc_loop(ep["rewards"], np.zeros(3), np.ones(3), 0.5, 0.0))
    assert m.gather(np.array([2]))["terminated"][0]


def test_fifo_eviction_by_whole_episodes():
    rng = np.random.default_rng(3)
    m = ReplayMemory(capacity=10)
    m.add_episode(**replay_episode(4, rng))  # 4
    m.add_episode(**replay_episode(5, rng))  # 9
    assert (len(m), m.num_episodes) == (9, 2)
    m.add_episode(**replay_episode(3, rng))  # 12 > 10: the 4-step episode goes -> 8
    assert (len(m), m.num_episodes, m.num_evicted_episodes) == (8, 2, 1)
    assert [b[1] for b in m.episode_bounds()] == [5, 3]
    m.add_episode(**replay_episode(30, rng))  # longer than N: all older go, the newest stays
    assert (len(m), m.num_episodes) == (30, 1)
    # Storage compacts and keeps indices valid over many additions.
    for _ in range(50):
        m.add_episode(**replay_episode(int(rng.integers(1, 6)), rng))
    assert len(m) <= 10 + 5
    batch = m.sample(32)
    assert np.all((batch["idx"] >= m.head) & (batch["idx"] < m.tail))


def test_far_fraction_counts_stored_rho():
    rng = np.random.default_rng(4)
    m = ReplayMemory(capacity=100)
    m.add_episode(**replay_episode(10, rng))
    assert m.far_fraction(2.0) == 0.0
    m.write_back(np.arange(3), rho=np.array([0.1, 5.0, 1.2]), values=np.zeros(3))
    assert m.far_fraction(2.0) == pytest.approx(0.2)


def test_app_b_statistics():
    rng = np.random.default_rng(5)
    m = ReplayMemory(capacity=100)
    eps = [replay_episode(8, rng) for _ in range(3)]
    for ep in eps:
        m.add_episode(**ep)
    obs = np.concatenate([ep["obs"][:-1] for ep in eps])
    mean, std = m.state_stats()
    np.testing.assert_allclose(mean, obs.mean(0), rtol=1e-5)  # Eq. (14)
    np.testing.assert_allclose(std, obs.std(0), rtol=1e-5)  # Eq. (15)
    r = np.concatenate([ep["rewards"] for ep in eps])
    scale = m.update_reward_scale()
    assert scale == pytest.approx(1 / (np.sqrt(np.mean(r**2)) + 1e-7))  # Eq. (16)
    np.testing.assert_allclose(m.gather(np.arange(8))["rewards"], eps[0]["rewards"] * scale, rtol=1e-5)


def test_rank_based_per_prefers_large_errors():
    rng = np.random.default_rng(6)
    m = ReplayMemory(capacity=1000, mode="per", seed=0, per_resort_interval=1)
    m.add_episode(**replay_episode(100, rng))
    td = np.zeros(100)
    td[7] = 10.0
    m.write_back(np.arange(100), values=np.zeros(100), td_error=td)
    batch = m.sample(2000)
    share = np.mean(batch["idx"] == 7)
    expected = 1.0 / np.sum((1.0 / np.arange(1, 101)) ** 0.7)  # rank 1
    assert share == pytest.approx(expected, abs=0.03)
    w = batch["weights"]
    assert w.max() <= 1.0 + 1e-6 and w[batch["idx"] == 7].max() < w.max()


def test_new_steps_get_the_maximal_per_priority_when_stored_errors_are_negative():
    """Schaul et al. (2016, Alg. 1): a new transition gets the maximal priority, max |TD error|."""
    rng = np.random.default_rng(7)
    m = ReplayMemory(capacity=1000, mode="per", seed=0, per_resort_interval=1)
    m.add_episode(**replay_episode(50, rng))
    td = -5.0 - rng.random(50)  # all large and negative
    m.write_back(np.arange(50), values=np.zeros(50), td_error=td)
    m.add_episode(**replay_episode(10, rng))
    np.testing.assert_allclose(m.column("td")[50:], np.abs(td).max())  # not max(signed td, 1) = 1
    share = np.mean(m.sample(20000)["idx"] >= 50)
    p = (1.0 / np.arange(1, 61)) ** 0.7  # rank-based P(i) ∝ rank^-α, α 0.7
    assert share == pytest.approx(p[:10].sum() / p.sum(), abs=0.02)  # the 10 new steps rank 1-10
    assert share > 2 * 10 / 60  # far above uniform


def test_per_beta_anneals_linearly_to_one():
    assert per_beta_schedule(0.5, 0, 1000) == 0.5
    assert per_beta_schedule(0.5, 500, 1000) == pytest.approx(0.75)
    assert per_beta_schedule(0.5, 1000, 1000) == 1.0
    assert per_beta_schedule(0.5, 10**7, 1000) == 1.0
    # β = 1: the importance weights undo the prioritized sampling exactly, w ∝ 1/P(i).
    rng = np.random.default_rng(8)
    m = ReplayMemory(capacity=1000, mode="per", seed=0, per_resort_interval=1)
    m.add_episode(**replay_episode(20, rng))
    m.write_back(np.arange(20), values=np.zeros(20), td_error=np.arange(20.0))
    m.per_beta = per_beta_schedule(0.5, 1000, 1000)
    b = m.sample(64)
    rank = 20 - b["idx"]  # td = idx: the largest index ranks first
    np.testing.assert_allclose(b["weights"], (rank / 20.0) ** 0.7, rtol=1e-5)  # (N·P)^-1 / max


def test_incremental_far_count_equals_a_full_recount():
    """n_far is kept as steps enter, leave and get new ρ (issue 19): it equals a full recount with
    the reference c_max, and c_max moving by more than far_recount_tol triggers a recount."""
    rng = np.random.default_rng(4)
    m = ReplayMemory(capacity=300, gamma=0.9, seed=0, far_recount_tol=1e-3)
    c_max = 2.0
    m.add_episode(**replay_episode(50, rng), rho=rng.lognormal(0.0, 1.0, 50))
    assert m.far_fraction(c_max) == m.far_count_full(c_max) / len(m) > 0
    for step in range(60):
        if step % 7 == 0:  # new episodes; the oldest are evicted beyond 300 steps
            T = int(rng.integers(20, 80))
            m.add_episode(**replay_episode(T, rng), rho=rng.lognormal(0.0, 1.0, T))
        idx = rng.integers(m.head, m.tail, size=32)  # with repeats, as sampled
        idx = np.r_[idx, idx[:4]]
        m.write_back(idx, rho=rng.lognormal(0.0, 1.0, len(idx)), update_targets=False)
        c_max -= 4e-4  # annealing: a recount every third step
        ref = m._far_c
        frac = m.far_fraction(c_max)
        if abs(c_max - ref) > 1e-3:
            assert m._far_c == c_max
        assert abs(m._far_c - c_max) <= 1e-3
        assert m._far_count == m.far_count_full(m._far_c) and frac == m._far_count / len(m), step
    assert m.num_evicted_episodes > 0


def test_write_back_window_stays_within_its_bound_of_the_full_recompute():
    """Eq. (8)'s correction below an episode's earliest sampled step m stops at the first s with
    Π_{i=s}^{m−1} γρ̄_i ≤ ε: each write-back leaves the steps below s off from the full recompute
    (ε = 0, the paper's Algorithm 3) by at most ε·|Δ_m|, Δ_m the correction at m; deviations add up
    at most. The window is the largest such s (a prefix of ≤ 256 steps is recomputed whole), and
    steps below it are left as they were."""
    rng = np.random.default_rng(6)
    eps = 1e-4
    full = ReplayMemory(capacity=5000, gamma=0.99, seed=0, retrace_tolerance=0.0)
    windowed = ReplayMemory(capacity=5000, gamma=0.99, seed=0, retrace_tolerance=eps)
    for T in (400, 250, 600):
        ep = replay_episode(T, rng)
        kw = dict(values=rng.standard_normal(T), rho=rng.lognormal(-0.1, 0.3, T), v_boot=0.5)
        full.add_episode(**ep, **kw)
        windowed.add_episode(**ep, **kw)
    bound, untouched = 0.0, 0
    for _ in range(30):
        idx = rng.integers(full.head, full.tail, size=3)
        rho, values = rng.lognormal(-0.1, 0.3, 3), rng.standard_normal(3)
        before_full, before_win = full.column("v_tbc"), windowed.column("v_tbc")
        p = idx - full.head
        starts = full._cols["ep_start"][p]
        m = np.array([idx[starts == s].min() for s in starts])
        first = starts
        s = windowed._window_starts(first, m)
        rho_all = windowed.column("rho")
        for si, mi, fi in zip(s, m, first, strict=True):
            c = 0.99 * np.minimum(1.0, rho_all[si - full.head : mi - full.head])
            if mi - fi <= 256:  # short prefixes are recomputed whole, without a search
                assert si == fi
                continue
            assert si == fi or np.prod(c) <= eps
            assert np.prod(c[1:]) > eps or si == mi  # the largest such s
        full.write_back(idx, rho=rho, values=values)
        windowed.write_back(idx, rho=rho, values=values)
        after_full, after_win = full.column("v_tbc"), windowed.column("v_tbc")
        delta_m = np.abs(after_full[m - full.head] - before_full[m - full.head]).max()
        bound += eps * delta_m
        below = np.concatenate([np.arange(f, si) for f, si in zip(first, s, strict=True)]) - full.head
        below = np.setdiff1d(below, np.concatenate([np.arange(si, mi + 1) for si, mi in zip(s, m, strict=True)]))
        untouched += len(below)
        np.testing.assert_array_equal(after_win[below], before_win[below])
        assert np.abs(after_win - after_full).max() <= bound + 1e-12
    assert untouched > 0 and bound > 0


def _exercise(m: ReplayMemory, rng) -> dict:
    """Samples, a write-back with new ρ, V and TD errors, the far count and a new episode: what a
    learner step does to the RM; returns what came out."""
    batch = m.sample(16)
    n = len(batch["idx"])
    m.write_back(
        batch["idx"], rho=rng.uniform(0.1, 3.0, n), values=rng.standard_normal(n), td_error=rng.standard_normal(n)
    )
    out = {"batch": batch, "far": m.far_fraction(1.8)}
    m.add_episode(**replay_episode(int(rng.integers(5, 30)), rng))
    return out


@pytest.mark.parametrize("mode", ["refer", "per"])
def test_a_restored_memory_samples_and_updates_as_the_original(mode):
    """checkpoint_replay: get_state/set_state carry the steps, the episodes (evictions included),
    the sampler's RNG, PER's ranks and the far-policy count, so that the restored memory and the
    original go on identically (a race paused and resumed across sessions)."""
    rng = np.random.default_rng(11)
    a = ReplayMemory(capacity=200, gamma=0.9, mode=mode, seed=3, per_resort_interval=5)
    for _ in range(12):  # more than N: whole episodes are evicted
        a.add_episode(**replay_episode(int(rng.integers(5, 40)), rng))
    for _ in range(3):
        _exercise(a, np.random.default_rng(0))
    assert a.num_evicted_episodes > 0 and a.head > 0
    state = a.get_state()
    b = ReplayMemory(capacity=200, gamma=0.9, mode=mode, seed=99, per_resort_interval=5)
    b.set_state(state)
    assert len(b) == len(a) and b.episode_bounds() == a.episode_bounds()
    for name in ("obs", "rho", "v", "v_tbc", "td", "serial"):
        np.testing.assert_array_equal(b.column(name), a.column(name))
    for step in range(4):
        out_a, out_b = _exercise(a, np.random.default_rng(step)), _exercise(b, np.random.default_rng(step))
        for key, value in out_a["batch"].items():
            np.testing.assert_array_equal(out_b["batch"][key], value, err_msg=key)
        assert out_b["far"] == out_a["far"]
    np.testing.assert_array_equal(b.column("v_tbc"), a.column("v_tbc"))
    # The state is a copy: the original went on, a memory restored from it starts where it was taken.
    c = ReplayMemory(capacity=200, gamma=0.9, mode=mode)
    c.set_state(state)
    assert c.tail == state["tail"] < a.tail


def test_state_stats_floor_sigma_of_a_dimension_constant_during_warm_up():
    """Issue 42: a dimension constant over the first N_start steps (σ_s = 0) is not scaled by 1/ε ≈ 1e7
    later: σ_s is floored at STD_FLOOR times the data's scale; varying dimensions keep their σ_s."""
    from rllib_ext.common.refer.memory import STD_FLOOR, ReplayMemory

    rng = np.random.default_rng(0)
    m = ReplayMemory(capacity=1000)
    obs = np.c_[rng.normal(0, 2.0, 101), np.zeros(101), np.full(101, 5.0)]  # varying, constant 0, constant 5
    m.add_episode(obs, np.zeros((100, 1)), np.zeros(100), np.zeros((100, 2)), True)
    mean, std = m.state_stats()
    raw = obs[:100].astype(np.float32).astype(np.float64).std(0)  # stored as float32
    assert std[0] == raw[0]
    typical = raw.mean()
    assert std[1] == pytest.approx(STD_FLOOR * typical)  # RMS 0: the mean σ_s over dimensions
    assert std[2] == pytest.approx(STD_FLOOR * 5.0)  # its own scale, RMS 5
    assert 1.0 / (std[1] + 1e-7) < 1e3  # a later unit move is scaled by < 1e3, not ~1e7
