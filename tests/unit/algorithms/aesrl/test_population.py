"""AES-RL's mean and variance rules (paper 001 §3.2–3.4) and the asynchronous population, against hand values."""

import numpy as np
import pytest

from rllib_ext.algorithms.aesrl.population import (
    AsyncPopulation,
    adaptive_n,
    adaptive_scale,
    p_rl,
    update_ratio,
    welford_variance,
)
from rllib_ext.common.erl.population import rank_weights


def test_p_rl_values():
    assert p_rl(0, 0) == 0.5
    assert p_rl(5, 5, k_rl=50, p_desired=0.5) == 0.5
    # ratio 0.52: -50*0.02 + 0.5 = -0.5 -> clipped to 0
    assert p_rl(13, 12, k_rl=50, p_desired=0.5) == 0.0
    # ratio 0.49: -50*(-0.01)+0.5 = 1.0
    assert p_rl(49, 51, k_rl=50, p_desired=0.5) == pytest.approx(1.0)
    # ratio 0.499 -> 0.55
    assert p_rl(499, 501, k_rl=50, p_desired=0.5) == pytest.approx(0.55)
    # Swimmer's p_desired 0.1 with ratio 0.1 -> 0.5
    assert p_rl(1, 9, k_rl=50, p_desired=0.1) == pytest.approx(0.5)


def test_p_rl_controller_drives_share_to_p_desired():
    """Scripted sequence: draw RL with probability p_rl; the RL share converges to p_desired."""
    rng = np.random.default_rng(0)
    for p_desired in (0.5, 0.1):
        n_rl = n_es = 0
        for _ in range(2000):
            if rng.random() < p_rl(n_rl, n_es, 50.0, p_desired):
                n_rl += 1
            else:
                n_es += 1
        assert abs(n_rl / (n_rl + n_es) - p_desired) < 0.01


def test_one_plus_one():
    assert update_ratio("one_plus_one", 10.0, 5.0) == 1.0
    assert update_ratio("one_plus_one", 5.0, 5.0) == 0.0
    assert update_ratio("one_plus_one", 4.0, 5.0) == 0.0


def test_fixed_linear_clipping_and_p_sg():
    kw = dict(r=100.0, p_positive=1.0, p_negative=0.0)
    assert update_ratio("fixed_linear", 150.0, 100.0, **kw) == pytest.approx(0.5)
    assert update_ratio("fixed_linear", 400.0, 100.0, **kw) == 1.0  # clip at 1
    assert update_ratio("fixed_linear", 50.0, 100.0, **kw) == 0.0  # p_negative = 0
    assert update_ratio("fixed_linear", 50.0, 100.0, r=100.0, p_positive=1.0, p_negative=0.5) == pytest.approx(-0.25)
    assert update_ratio("fixed_linear", -900.0, 100.0, r=100.0, p_negative=0.5) == pytest.approx(-0.5)  # clip at -1


def test_fixed_sigmoid():
    assert update_ratio("fixed_sigmoid", 200.0, 100.0, r=100.0) == pytest.approx(1 / (1 + np.exp(-1)))
    assert update_ratio("fixed_sigmoid", 50.0, 100.0, r=100.0, p_negative=0.0) == 0.0
    assert update_ratio("fixed_sigmoid", 50.0, 100.0, r=100.0, p_negative=1.0) == pytest.approx(1 / (1 + np.exp(0.5)))


def test_baseline_absolute():
    # f_b = -2000 (Table 5): p = (f_z - f_b)/((f_mu - f_b) + (f_z - f_b))
    assert update_ratio("baseline_absolute", 1000.0, 0.0, f_b=-2000.0) == pytest.approx(3000 / 5000)
    assert update_ratio("baseline_absolute", -2500.0, 0.0, f_b=-2000.0) == 0.0  # below the baseline
    assert update_ratio("baseline_absolute", 0.0, 0.0, f_b=-2000.0) == pytest.approx(0.5)


def test_baseline_absolute_is_zero_when_mu_is_far_below_the_baseline():
    """f(z) ≥ f_b but (f(μ) − f_b) + (f(z) − f_b) ≤ 0: the reference gives 0 (review B4), not 1."""
    # f_b = 0, f(μ) = -500, f(z) = 100: a = 100, b = -500, a + b < 0.
    assert update_ratio("baseline_absolute", 100.0, -500.0, f_b=0.0) == 0.0
    assert update_ratio("baseline_absolute", 500.0, -500.0, f_b=0.0) == 0.0  # a + b = 0


def reference_p(rule, f_z, f_mu, f_b):
    """The reference's baseline rules with p_negative = 0, re-derived from aes-rl core/population.py
    (AesrlPopulation.tell): p = clip(1 − m/(x + m), 0, 1) if x ≥ 0 else 0, where x = f(z) − base,
    m = f(μ) − base, base = f_b (absolute; the config's mean_param) or f(μ) − f_b (relative)."""
    base = f_b if rule == "baseline_absolute" else f_mu - f_b
    x, m = f_z - base, f_mu - base
    if x < 0:
        return 0.0
    if x + m == 0:
        return 0.0  # 0/0 or ±k/0 in the reference: measure zero, we give 0 (see update_ratio)
    return min(max(1.0 - m / (x + m), 0.0), 1.0)


@pytest.mark.parametrize(
    "rule, f_b",
    [
        ("baseline_absolute", -2000.0),
        ("baseline_absolute", 0.0),
        ("baseline_absolute", 300.0),
        ("baseline_relative", 2000.0),
        ("baseline_relative", 48.0),
    ],
)
def test_baseline_rules_match_the_reference_on_a_grid(rule, f_b):
    grid = np.linspace(-5000.0, 5000.0, 41)
    for f_mu in grid:
        for f_z in grid:
            expected = reference_p(rule, f_z, f_mu, f_b)
            assert update_ratio(rule, f_z, f_mu, f_b=f_b) == pytest.approx(expected), (f_z, f_mu)


def test_baseline_relative_and_cutoffs():
    # f_mu 1000, f_b 2000 -> f_rb = -1000.
    f = lambda fz, **kw: update_ratio("baseline_relative", fz, 1000.0, f_b=2000.0, **kw)  # noqa: E731
    assert f(1000.0) == pytest.approx(2000 / 4000)  # z as good as mu -> 0.5
    assert f(3000.0) == pytest.approx(4000 / 6000)
    assert f(-500.0) == pytest.approx(500 / 2500)  # worse than mu but above f_rb: still moves
    assert f(-1500.0) == 0.0  # below f_rb with p_negative = 0
    assert f(-3500.0, p_negative=1.0) == 0.0  # below f_rb - f_b: the cut-off


def test_baseline_relative_negative_branch_value():
    # f_z in [f_rb - f_b, f_rb): p = p_negative * (f_z - f_rb)/(f_b + f_z - f_rb)
    p = update_ratio("baseline_relative", -1500.0, 1000.0, f_b=2000.0, p_negative=1.0)
    assert p == pytest.approx(-500.0 / 1500.0)


def test_unknown_rule_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown"):
        update_ratio("bogus", 1.0, 0.0)
    with pytest.raises(ValueError, match="mean_rule"):
        AsyncPopulation(np.zeros(3), mean_rule="bogus")
    with pytest.raises(ValueError, match="elite"):
        AsyncPopulation(np.zeros(3), mean_rule="baseline_relative", variance_rule="elite")


def test_adaptive_n():
    assert adaptive_n(0.5) == 1.0
    assert adaptive_n(0.1) == pytest.approx(9.0)
    assert adaptive_n(0.9) == 1.0  # max(..., 1)


def test_welford_matches_hand_value():
    var, z = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    mu_old, mu_new = np.array([1.0, 0.0]), np.array([2.0, -0.5])
    out = welford_variance(var, z, mu_old, mu_new, n=4.0)
    assert out == pytest.approx([1.0 + (2.0 * 1.0 - 1.0) / 4, 2.0 + ((-1.0) * (-0.5) - 2.0) / 4])


def test_population_online_adaptive_step():
    pop = AsyncPopulation(np.zeros(2), sigma_init=0.5, fitness_baseline=100.0)
    pop.f_mu = 100.0
    z = np.array([1.0, -2.0], dtype=np.float32)
    # f_rb = 0; f_z = 300 -> p = 300/(100+300) = 0.75; n = max(0.25/0.75, 1) = 1
    p = pop.tell(z, 300.0)
    assert p == pytest.approx(0.75)
    assert pop.mu == pytest.approx(0.75 * z)
    assert pop.var == pytest.approx(z * (z - 0.75 * z))  # n = 1: var = (z - mu_old)(z - mu_new)


def test_population_p_zero_leaves_mean_and_variance():
    pop = AsyncPopulation(np.ones(3), sigma_init=0.2, fitness_baseline=10.0)
    pop.f_mu = 100.0
    p = pop.tell(np.full(3, 5.0), 50.0)  # far below f_rb - f_b = 80
    assert p == 0.0
    assert pop.mu == pytest.approx(np.ones(3))
    assert pop.var == pytest.approx(np.full(3, 0.2))


def test_population_online_fixed_and_floor():
    pop = AsyncPopulation(
        np.zeros(2), sigma_init=1.0, mean_rule="one_plus_one", variance_rule="online_fixed", online_n=2.0, var_limit=0.3
    )
    pop.f_mu = 0.0
    z = np.array([0.5, 0.0], dtype=np.float32)
    assert pop.tell(z, 1.0) == 1.0
    # mu_new = z: (z - 0)(z - z) = 0 -> var = 1 + (0 - 1)/2 = 0.5; floored at 0.3 stays 0.5
    assert pop.var == pytest.approx([0.5, 0.5])
    pop.tell(z, 2.0)  # again: var = 0.5 + (0 - 0.5)/2 = 0.25 -> floor 0.3
    assert pop.var == pytest.approx([0.3, 0.3])


def test_success_rule_increases_then_decreases_sigma():
    pop = AsyncPopulation(
        np.zeros(1),
        sigma_init=1.0,
        mean_rule="one_plus_one",
        variance_rule="success_rule",
        success_window=5,
        success_factor=0.5,
        var_limit=1e-9,
    )
    pop.f_mu = 0.0
    for _ in range(4):
        pop.tell(np.zeros(1), 1.0)  # success (f_mu stays 0: the caller re-estimates it)
    assert pop.var == pytest.approx([1.0])  # window not full yet
    pop.tell(np.zeros(1), 1.0)
    assert pop.var == pytest.approx([4.0])  # rate 1 > 1/5: sigma / 0.5 -> var * 4
    for _ in range(5):
        pop.tell(np.zeros(1), -1.0)  # the next window: rate 0 -> sigma * 0.5 -> var / 4
    assert pop.var == pytest.approx([1.0])


def rank_population(**kwargs):
    return AsyncPopulation(
        np.zeros(3),
        sigma_init=1.0,
        mean_rule="rank",
        variance_rule="elite",
        rank_population=4,
        cem_damp_init=0.0,
        cem_damp_limit=0.0,
        **kwargs,
    )


def tell_four(pop):
    zs = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    fs = [3.0, 1.0, 4.0, 2.0]
    for z, f in zip(zs[:-1], fs[:-1], strict=False):
        assert pop.tell(z, f) == 0.0  # fewer than n stored: no update
    assert pop.mu == pytest.approx(np.zeros(3))
    assert pop.tell(zs[-1], fs[-1]) == pytest.approx(1 / 4)
    return zs


def test_rank_rule_is_sep_cem_over_last_n_divided_by_n():
    """App. E.1, Eq. (13); σ² in the reference's form (1/K_e)·Σλ_i(z_i − μ)² (aes-rl ACemrlPopulation.tell)."""
    pop = rank_population()
    zs = tell_four(pop)
    w = rank_weights(2)
    elite = w[0] * zs[2] + w[1] * zs[0]  # best: f=4 (index 2), then f=3 (index 0)
    assert pop.mu == pytest.approx(elite / 4, rel=1e-5)
    k_e = 2  # n // 2
    assert pop.var == pytest.approx((w[0] * zs[2] ** 2 + w[1] * zs[0] ** 2) / k_e, rel=1e-5)


def test_rank_rule_eq2_variance_option():
    pop = rank_population(cem_variance="eq2")
    zs = tell_four(pop)
    w = rank_weights(2)
    assert pop.var == pytest.approx(w[0] * zs[2] ** 2 + w[1] * zs[0] ** 2, rel=1e-5)
    with pytest.raises(ValueError, match="cem_variance"):
        rank_population(cem_variance="bogus")


def test_rank_rule_damping_decays_by_the_references_tau_per_update():
    """ε ← τ^(1/n)·ε + (1 − τ^(1/n))·ε_limit per update once n are stored, τ = 0.90 (aes-rl's cemrl_tau)."""
    pop = AsyncPopulation(np.zeros(1), mean_rule="rank", variance_rule="elite", rank_population=4)
    for i in range(4):
        pop.tell(np.zeros(1), float(i))
    tau = 0.90 ** (1 / 4)
    assert pop.cem_damp == pytest.approx(tau * 1e-3 + (1 - tau) * 1e-5)
    assert pop.var == pytest.approx([pop.cem_damp])  # all individuals at μ: σ² = ε


def test_population_requires_f_mu_and_state_round_trip():
    pop = AsyncPopulation(np.zeros(2))
    with pytest.raises(ValueError, match="f\\(μ\\)"):
        pop.tell(np.ones(2), 1.0)
    pop.f_mu = 1.0
    pop.tell(np.ones(2), 5.0)
    other = AsyncPopulation(np.zeros(2))
    other.set_state(pop.get_state())
    assert other.mu == pytest.approx(pop.mu) and other.var == pytest.approx(pop.var) and other.f_mu == 1.0


def test_adaptive_scale_is_the_mean_absolute_fitness_difference():
    """Envs without Table 5: s = factor · mean |f(z) − f(μ)| over the window, the current individual included."""
    pop = AsyncPopulation(np.zeros(1), fixed_range="adaptive", fitness_baseline="adaptive", scale_window=3)
    pop.f_mu = 0.0
    # First individual: s = |d| = 10; relative rule p = (d + s)/(d + 2s) = 20/30.
    assert pop.tell(np.ones(1), 10.0) == pytest.approx(20.0 / 30.0) and pop.last_scale == pytest.approx(10.0)
    # Second: diffs |10|, |-4| -> s = 7; d = -4: p = 3/10.
    assert pop.tell(np.ones(1), -4.0) == pytest.approx(3.0 / 10.0) and pop.last_scale == pytest.approx(7.0)
    assert pop.tell(np.ones(1), 1.0) == pytest.approx((1.0 + 5.0) / (1.0 + 10.0))  # s = (10 + 4 + 1)/3 = 5
    pop.tell(np.ones(1), 30.0)  # the window (3) drops the first: s = (4 + 1 + 30)/3
    assert pop.last_scale == pytest.approx(35.0 / 3.0)
    assert adaptive_scale([2.0, 4.0], factor=0.5) == pytest.approx(1.5)
    assert adaptive_scale([0.0, 0.0]) > 0 and adaptive_scale([]) > 0  # floored: no division by zero


def test_adaptive_scale_is_scale_free_and_survives_a_checkpoint():
    """Multiplying every return by 1000 leaves every p unchanged (what Table 5's fixed scale cannot do)."""
    returns = np.random.default_rng(0).normal(-800.0, 150.0, size=(30, 2))
    ps = []
    for scale in (1.0, 1000.0):
        pop = AsyncPopulation(np.zeros(1), fixed_range="adaptive", fitness_baseline="adaptive")
        out = []
        for f_mu, f_z in returns * scale:
            pop.f_mu = f_mu
            out.append(pop.tell(np.ones(1), f_z))
        ps.append(out)
    assert ps[0] == pytest.approx(ps[1])
    other = AsyncPopulation(np.zeros(1), fixed_range="adaptive", fitness_baseline="adaptive")
    other.set_state(pop.get_state())
    other.f_mu = pop.f_mu = 0.0
    assert other.tell(np.ones(1), 5.0) == pytest.approx(pop.tell(np.ones(1), 5.0))  # the window came along
    with pytest.raises(ValueError, match="fitness_baseline"):
        AsyncPopulation(np.zeros(1), mean_rule="baseline_absolute", fitness_baseline="adaptive")


def test_fixed_rules_use_the_adaptive_range_too():
    pop = AsyncPopulation(np.zeros(1), mean_rule="fixed_linear", fixed_range="adaptive")
    pop.f_mu = 0.0
    assert pop.tell(np.ones(1), 10.0) == pytest.approx(1.0)  # d / s = 10 / 10
    assert pop.last_scale == pytest.approx(10.0)
    assert pop.tell(np.ones(1), 5.0) == pytest.approx(5.0 / 7.5)
