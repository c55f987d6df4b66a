"""V-RACER's loss on hand-made minibatches (learner built in-process, no Ray): the off-policy
policy gradient (Eq. 5) with the advantage held constant, the value loss against the stored
V̂^tbc (Eq. 9), and ReF-ER's Eq. (10).

The network's output layer has one row per output (V: row 0, m: rows 1..d_A); its bias gradient
is ∂loss/∂output summed over the batch, which gives closed forms.
"""

from __future__ import annotations

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_ext.algorithms.vracer.vracer import VRACERConfig
from rllib_ext.common.refer.rules import diag_gaussian_log_rho
from tests.builders import refer_loss_gradients, small_refer_learner
from tests.replay_data import loss_batch

D_A = 2


def _setup(B=8, **training):
    torch.manual_seed(0)
    learner = small_refer_learner(VRACERConfig, act_dim=D_A, **training)
    module = learner.module[DEFAULT_MODULE_ID]
    with torch.no_grad():
        for p in module.net[-1].parameters():  # a non-trivial V and m
            p.add_(0.3 * torch.randn_like(p))
        obs = torch.randn(B, 3)
        v, mean, std = module.value_and_policy(obs)
    return learner, module, loss_batch(obs, mean, std), (v, mean, std)


@pytest.mark.parametrize("beta", [1.0, 0.4])
def test_gradients_of_v_and_m_match_eq5_eq9_eq10(beta):
    """∂/∂V = β·mean[V − V̂^tbc] (Eq. 9; the advantage is constant in Eq. 5);
    ∂/∂m = β·mean[−(Q̂^ret − V)·ρ·(a − m)/σ²] + (1−β)·mean[(m − m_μ)/σ²] (Eq. 5, 10, 11)."""
    learner, module, batch, (v, mean, std) = _setup()
    mu_mean = batch["mu"][:, :D_A]
    rho = torch.exp(diag_gaussian_log_rho(batch["actions"], mean, std, mu_mean, std))
    advantage = batch["q_ret"] - v
    _, g = refer_loss_gradients(learner, batch, beta=beta)
    bias = g["net.4.bias"]
    torch.testing.assert_close(bias[0], beta * (v - batch["v_tbc"]).mean(), rtol=1e-4, atol=1e-6)
    dpg_dm = -(advantage * rho)[:, None] * (batch["actions"] - mean) / std**2  # ∂(−ρ·A)/∂m
    expected_m = beta * dpg_dm.mean(0) + (1 - beta) * ((mean - mu_mean) / std**2).mean(0)
    torch.testing.assert_close(bias[1:], expected_m, rtol=1e-4, atol=1e-6)


def test_advantage_is_held_constant():
    """Eq. (5) treats Q̂^ret − V as a constant: with V̂^tbc = V (no value error) V's output gets
    no gradient at all, whatever Q̂^ret, while m's does."""
    learner, _, batch, (v, _, _) = _setup()
    batch["v_tbc"] = v.clone()
    for shift in (0.0, 3.0):
        _, g = refer_loss_gradients(learner, dict(batch, q_ret=batch["q_ret"] + shift), beta=1.0)
        assert g["net.4.weight"][0].abs().max() < 1e-7 and g["net.4.bias"][0].abs() < 1e-7  # V's row
        assert g["net.4.bias"][1:].abs().min() > 1e-5  # m's rows


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_step_moves_log_pi_with_the_sign_of_the_advantage(sign):
    """One optimizer step on a sample with Q̂^ret − V > 0 makes its action more likely (and less
    likely for a negative advantage); V̂^tbc = V, so only the off-PG term (Eq. 5) has a gradient."""
    learner, module, batch, (v, _, _) = _setup(B=1, lr=1e-3)
    batch["v_tbc"] = v.clone()
    batch["q_ret"] = v + sign

    def log_pi():
        with torch.no_grad():
            _, mean, std = module.value_and_policy(batch["obs"])
            return torch.distributions.Normal(mean, std).log_prob(batch["actions"]).sum()

    before = log_pi()
    refer_loss_gradients(learner, batch, beta=1.0)  # leaves the gradients on the parameters
    learner._named_optimizers[f"{DEFAULT_MODULE_ID}_default_optimizer"].step()
    change = log_pi() - before
    assert sign * change > 1e-4


@pytest.mark.parametrize("beta", [1.0, 0.37])
def test_gradients_with_sigma_mu_unlike_sigma_pi_and_far_rows_match_the_closed_forms(beta):
    """Issue 42: σ_μ = 1.3 σ_π, rows 0 and 1 far-policy (Rule 1 zeroes their off-PG and value terms).
    With z = (a − m)/σ_π, log ρ = log π − log μ, ∂ log π/∂ log σ_i = z_i² − 1 and
    ∂D_KL(μ‖π)/∂ log σ_i = 1 − (σ_μ,i² + (m_μ,i − m_i)²)/σ_i² (Eq. 11):
    ∂L/∂V_k = β·near_k·(V_k − V̂^tbc_k)/B; ∂L/∂m = β·mean[near·(−Aρ(a − m)/σ²)] + (1−β)·mean[(m − m_μ)/σ²];
    ∂L/∂ log σ_i = β·mean[near·(−Aρ(z_i² − 1))] + (1−β)·mean[1 − (σ_μ,i² + (m_μ,i − m_i)²)/σ_i²],
    reaching σ's parameter w through σ = softplus(w) (∂ log σ/∂w = sigmoid(w)/σ)."""
    learner, module, base, (v, mean, std) = _setup()
    far = (0, 1)
    batch = loss_batch(base["obs"], mean, std, far=far)
    sigma_mu = 1.3 * std
    mu_mean = batch["mu"][:, :D_A]
    batch["mu"] = torch.cat([mu_mean, torch.log(sigma_mu)], -1)
    rho = torch.exp(diag_gaussian_log_rho(batch["actions"], mean, std, mu_mean, sigma_mu))
    near = ((rho > 1 / learner.refer.c_max) & (rho < learner.refer.c_max)).float()
    assert near[list(far)].sum() == 0 and near[2:].sum() == 6  # far and near rows both present
    A = batch["q_ret"] - v
    _, g = refer_loss_gradients(learner, batch, beta=beta)
    bias = g["net.4.bias"]
    torch.testing.assert_close(bias[0], beta * (near * (v - batch["v_tbc"])).mean(), rtol=1e-4, atol=1e-6)
    dm = beta * (near[:, None] * -(A * rho)[:, None] * (batch["actions"] - mean) / std**2).mean(0)
    dm += (1 - beta) * ((mean - mu_mean) / std**2).mean(0)
    torch.testing.assert_close(bias[1:], dm, rtol=1e-4, atol=1e-6)
    z2 = ((batch["actions"] - mean) / std) ** 2
    d_log_sigma = beta * (near[:, None] * -(A * rho)[:, None] * (z2 - 1)).mean(0)
    d_log_sigma += (1 - beta) * (1 - (sigma_mu**2 + (mu_mean - mean) ** 2) / std**2).mean(0)
    w = module.sigma_param.detach()
    expected = d_log_sigma * torch.sigmoid(w) / torch.nn.functional.softplus(w)
    torch.testing.assert_close(g["sigma_param"], expected, rtol=1e-4, atol=1e-6)
