"""ReF-ER rules (paper 003 §3) against closed forms: ρ, D_KL, Rule 1, Eq. (10)-(13)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rllib_ext.common.refer import rules
from rllib_ext.common.refer.rules import ReFER


def _gaussians(B=64, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    pm, mm = torch.randn(B, d, generator=g), torch.randn(B, d, generator=g)
    ps, ms = 0.2 + torch.rand(B, d, generator=g), 0.2 + torch.rand(B, d, generator=g)
    a = mm + ms * torch.randn(B, d, generator=g)
    return a, pm, ps, mm, ms


def test_rho_matches_torch_distributions():
    a, pm, ps, mm, ms = _gaussians()
    expected = torch.distributions.Normal(pm, ps).log_prob(a).sum(-1) - torch.distributions.Normal(mm, ms).log_prob(
        a
    ).sum(-1)
    torch.testing.assert_close(rules.diag_gaussian_log_rho(a, pm, ps, mm, ms), expected, rtol=1e-5, atol=1e-5)


def test_kl_matches_torch_distributions():
    _, pm, ps, mm, ms = _gaussians(seed=1)
    mu, pi = torch.distributions.Normal(mm, ms), torch.distributions.Normal(pm, ps)
    expected = torch.distributions.kl_divergence(mu, pi).sum(-1)  # D_KL(μ ‖ π)
    torch.testing.assert_close(rules.diag_gaussian_kl(mm, ms, pm, ps), expected, rtol=1e-5, atol=1e-5)
    assert torch.all(rules.diag_gaussian_kl(mm, ms, mm, ms).abs() < 1e-6)


def test_near_policy_mask_is_open_interval():
    rho = np.array([0.2, 0.25, 0.3, 1.0, 3.9, 4.0, 5.0])
    np.testing.assert_array_equal(rules.near_policy_mask(rho, 4.0), [False, False, True, True, True, False, False])


def test_rule1_zeroes_exactly_the_far_samples_non_penalty_gradient():
    B = 6
    w = torch.zeros(B, requires_grad=True)  # one parameter per sample: its gradient is that sample's
    k = torch.zeros(B, requires_grad=True)  # the penalty's parameter
    loss_i = (w - torch.arange(B, dtype=torch.float32)) ** 2
    kl_i = (k - 1.0) ** 2
    rho = torch.tensor([0.1, 0.5, 1.0, 1.5, 3.0, 9.0])
    near = rules.near_policy_mask(rho, 2.0)
    beta = 0.3
    rules.refer_loss(loss_i, kl_i, near, beta, rule1=True, rule2=True).backward()
    g_loss = 2 * (w.detach() - torch.arange(B)) * beta / B
    expected = torch.where(near, g_loss, torch.zeros(B))
    torch.testing.assert_close(w.grad, expected)
    assert torch.all(w.grad[~near] == 0) and torch.all(w.grad[near] != 0)
    torch.testing.assert_close(k.grad, 2 * (k.detach() - 1.0) * (1 - beta) / B)  # penalty for all (Eq. 10)


@pytest.mark.parametrize(
    "mode,far_grad_zero,has_penalty",
    [("refer", True, True), ("refer1", True, False), ("refer2", False, True), ("er", False, False)],
)
def test_modes_select_rules(mode, far_grad_zero, has_penalty):
    refer = ReFER(mode=mode)
    w = torch.ones(2, requires_grad=True)
    k = torch.zeros(2, requires_grad=True)
    near = torch.tensor([True, False])
    rules.refer_loss(w**2, (k - 1) ** 2, near, 0.5, rule1=refer.rule1, rule2=refer.rule2).backward()
    assert (w.grad[1] == 0) == far_grad_zero
    assert (k.grad is not None and bool(torch.any(k.grad != 0))) == has_penalty


def test_beta_follows_eq12_on_a_scripted_far_fraction_sequence():
    D, eta = 0.1, 0.05
    far = [0.2, 0.2, 0.05, 0.3, 0.1, 0.0]
    beta, expected = 1.0, []
    for f in far:
        beta = (1 - eta) * beta if f > D else (1 - eta) * beta + eta  # Eq. (12)
        expected.append(beta)
    refer = ReFER(mode="refer", D=D, eta=eta, A=0.0, beta_rate=None)  # step: the learning rate
    got = [refer.update_beta(f) for f in far]
    np.testing.assert_allclose(got, expected)
    # Fixed points: β = 0 for n_far/N > D, β = 1 otherwise.
    assert rules.beta_update(0.0, 0.5, D, eta) == 0.0
    assert rules.beta_update(1.0, 0.05, D, eta) == 1.0
    refer.beta = 1.0
    for _ in range(2000):
        refer.update_beta(0.5)
    assert refer.beta < 1e-40
    for _ in range(2000):
        refer.update_beta(0.0)
    assert abs(refer.beta - 1.0) < 1e-12
    # Without Rule 2 β stays 1.
    r1 = ReFER(mode="refer1")
    assert r1.update_beta(0.9) == 1.0


def test_beta_rate_smarties_option():
    refer = ReFER(mode="refer", beta_rate=0.1 * 256 / 2**18)
    refer.update_beta(1.0)
    assert refer.beta == pytest.approx(1 - 0.1 * 256 / 2**18)


@pytest.mark.parametrize("eta", [1e-3, 1e-5])
def test_beta_step_is_fixed_by_default_whatever_the_learning_rate(eta):
    """Default: smarties' fixed 1e-4 (paper-era Learner_offPolicy.cpp), not η(t)."""
    refer = ReFER(mode="refer", eta=eta, A=1e-3, t=1000)
    refer.update_beta(1.0)
    assert refer.beta == pytest.approx(1 - 1e-4, abs=1e-15)
    refer.beta = 0.5
    refer.update_beta(0.0)
    assert refer.beta == pytest.approx(0.5 + 0.5e-4, abs=1e-15)


def test_cmax_and_eta_follow_eq13():
    C, A, eta = 4.0, 5e-7, 1e-4
    refer = ReFER(C=C, A=A, eta=eta)
    for t in (0, 1, 1000, 2_000_000, 10**9):
        refer.t = t
        assert refer.c_max == pytest.approx(1 + C / (1 + A * t))
        assert refer.lr == pytest.approx(eta / (1 + A * t))
    refer.t = 0
    assert refer.c_max == 5.0 and refer.lr == eta
    refer.t = 2_000_000  # A·t = 1: halfway
    assert refer.c_max == pytest.approx(3.0) and refer.lr == pytest.approx(eta / 2)
    for mode in ("refer1", "refer2"):
        assert ReFER(mode=mode, C=C, A=A, eta=eta, t=2_000_000).lr == pytest.approx(eta / 2)
    # The ER and PER baselines keep η (paper 003 §5.1); c_max still follows Eq. (13).
    for mode in ("er", "per"):
        baseline = ReFER(mode=mode, C=C, A=A, eta=eta, t=2_000_000)
        assert baseline.lr == eta and baseline.c_max == pytest.approx(3.0)


def test_state_round_trip_and_bad_mode():
    refer = ReFER(beta=0.25, t=17)
    other = ReFER()
    other.set_state(refer.get_state())
    assert other.beta == 0.25 and other.t == 17
    with pytest.raises(ValueError, match="replay mode"):
        ReFER(mode="bogus")


def test_refer2_clips_rho_at_1e3():
    assert ReFER(mode="refer2").rho_clip == 1e3  # paper 003 §5.3
    assert all(ReFER(mode=m).rho_clip is None for m in ("refer", "refer1", "er", "per"))
