"""IMPACT's losses and targets (paper 004) against closed forms: r1/r2/r3 ratios, the clipped surrogate,
V-trace GAE, the KL coefficient."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.impala.torch.vtrace_torch_v2 import vtrace_torch

from rllib_ext.algorithms.impact.losses import (
    TraceOperator,
    VGAETraces,
    adapt_kl_coeff,
    clipped_surrogate,
    masked_mean,
    masked_standardize,
    surrogate_log_ratio,
    value_targets_and_advantages,
    vtrace_gae_lambda,
)


def _probs(shape, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float64) * 0.98 + 0.01


@pytest.mark.parametrize("rho", [1.0, 2.0, 5.0])
def test_r3_equals_closed_form(rho):
    gen = torch.Generator().manual_seed(0)
    p_theta, p_target, p_worker = (_probs((64,), gen) for _ in range(3))
    beta = 1.0 / rho
    log_r3 = surrogate_log_ratio(
        "r3", logp_theta=p_theta.log(), logp_target=p_target.log(), logp_worker=p_worker.log(), rho=rho
    )
    expected = p_theta / torch.maximum(p_target, beta * p_worker)
    torch.testing.assert_close(log_r3.exp(), expected)
    # Appendix E form: min(πworker/πtarget, ρ) · πθ/πworker.
    torch.testing.assert_close(log_r3.exp(), torch.clamp(p_worker / p_target, max=rho) * p_theta / p_worker)


def test_r3_reduces_to_r1_when_target_dominates_and_r2_form_otherwise():
    gen = torch.Generator().manual_seed(1)
    rho = 2.0
    p_theta, p_worker = _probs((32,), gen), _probs((32,), gen)
    # πtarget >= β πworker everywhere: max(πtarget, β πworker) = πtarget, R3 = R1.
    p_target = p_worker / rho + 0.05
    args = dict(logp_theta=p_theta.log(), logp_target=p_target.log(), logp_worker=p_worker.log(), rho=rho)
    torch.testing.assert_close(surrogate_log_ratio("r3", **args), surrogate_log_ratio("r1", **args))
    # πtarget < β πworker everywhere: R3 = ρ·πθ/πworker = ρ·R2 (the worker-clipped branch).
    p_target = p_worker / rho * 0.5
    args["logp_target"] = p_target.log()
    torch.testing.assert_close(surrogate_log_ratio("r3", **args), surrogate_log_ratio("r2", **args) + math.log(rho))


def test_r3_reduces_to_r2_when_target_equals_worker_and_rho_is_one():
    """With πtarget = πworker and ρ = 1 (β = 1), max(πtarget, β πworker) = πworker: R3 = R2."""
    gen = torch.Generator().manual_seed(2)
    p_theta, p_worker = _probs((32,), gen), _probs((32,), gen)
    args = dict(logp_theta=p_theta.log(), logp_target=p_worker.log(), logp_worker=p_worker.log(), rho=1.0)
    torch.testing.assert_close(surrogate_log_ratio("r3", **args), surrogate_log_ratio("r2", **args))


def test_unknown_surrogate_ratio_raises():
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="surrogate_ratio"):
        surrogate_log_ratio("r4", logp_theta=x, logp_target=x, logp_worker=x, rho=2.0)


def test_clipped_surrogate_is_ppo_objective():
    ratio = torch.tensor([0.5, 1.0, 1.5, 0.5, 1.5])
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0])
    out = clipped_surrogate(ratio, adv, 0.2)
    torch.testing.assert_close(out, torch.tensor([0.5, 1.0, 1.2, -0.8, -1.5]))


def _episode_tensors(T=7, B=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randn((T, B), generator=gen, dtype=torch.float64)
    values = torch.randn((T, B), generator=gen, dtype=torch.float64)
    bootstrap = torch.randn((B,), generator=gen, dtype=torch.float64)
    discounts = torch.full((T, B), 0.97, dtype=torch.float64)
    if T > 3 and B > 1:
        discounts[3, 1] = 0.0  # a terminal step inside one column
    behaviour = torch.log(_probs((T, B), gen))
    target = torch.log(_probs((T, B), gen))
    return dict(rewards=rewards, values=values, bootstrap_values=bootstrap, discounts=discounts), behaviour, target


def _gae_reference(rewards, values, bootstrap, discounts, lam):
    T = rewards.shape[0]
    adv = np.zeros(rewards.shape)
    next_adv = np.zeros(rewards.shape[1])
    next_v = bootstrap.numpy()
    for t in reversed(range(T)):
        delta = rewards[t].numpy() + discounts[t].numpy() * next_v - values[t].numpy()
        next_adv = delta + discounts[t].numpy() * lam * next_adv
        adv[t] = next_adv
        next_v = values[t].numpy()
    return adv


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_vtrace_gae_equals_gae_when_behaviour_is_target(lam):
    data, behaviour, _ = _episode_tensors()
    adv = vtrace_gae_lambda(target_logp=behaviour, behaviour_logp=behaviour, lam=lam, **data)
    expected = _gae_reference(data["rewards"], data["values"], data["bootstrap_values"], data["discounts"], lam)
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-10, atol=1e-10)


def _rllib_vtrace(target, behaviour, data, rho_bar):
    """RLlib's V-trace (c̄ fixed at 1): (v_s, pg advantages with ρ̄_pg = ρ̄)."""
    return vtrace_torch(
        target_action_log_probs=target,
        behaviour_action_log_probs=behaviour,
        clip_rho_threshold=rho_bar,
        clip_pg_rho_threshold=rho_bar,
        **data,
    )


def test_vtrace_gae_at_lambda_one_equals_vtrace_advantages():
    data, behaviour, target = _episode_tensors(seed=3)
    adv = vtrace_gae_lambda(target_logp=target, behaviour_logp=behaviour, lam=1.0, rho_bar=1.0, c_bar=1.0, **data)
    vs, pg_adv = _rllib_vtrace(target, behaviour, data, rho_bar=1.0)
    # Σ γ^{i-t} Π c_j δ_i = v_s − V(s_t) ...
    torch.testing.assert_close(adv, vs - data["values"])
    # ... = ρ_t (r_t + γ v_{t+1} − V(s_t)), V-trace's policy-gradient advantage (ρ̄ = c̄ = 1).
    torch.testing.assert_close(adv, pg_adv)


@pytest.mark.parametrize("rho_bar", [1.0, 2.0])
@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_vtrace_value_target_is_rllibs_vs_and_v_gae_target_is_v_plus_advantage(lam, rho_bar):
    """Algorithm 1 line 8's critic target, off-policy: "vtrace" is RLlib's V-trace v_s whatever λ
    (c̄ = 1, as RLlib fixes it); "v_gae" (the default) is V + A^{V-GAE} with the advantage's λ."""
    data, behaviour, target = _episode_tensors(seed=5)
    trace = dict(target_logp=target, behaviour_logp=behaviour, rho_bar=rho_bar, c_bar=1.0, **data)
    vs, _ = _rllib_vtrace(target, behaviour, data, rho_bar=rho_bar)
    targets, adv = value_targets_and_advantages(value_target="vtrace", lam=lam, **trace)
    torch.testing.assert_close(targets, vs)
    torch.testing.assert_close(adv, vtrace_gae_lambda(lam=lam, **trace))
    targets, adv2 = value_targets_and_advantages(value_target="v_gae", lam=lam, **trace)
    torch.testing.assert_close(adv2, adv)
    torch.testing.assert_close(targets, data["values"] + adv)


def test_vtrace_gae_truncates_traces_off_policy():
    """Off-policy, λ < 1: A_t = δ_t + λ γ_t c_t A_{t+1} with c, ρ truncated at 1."""
    data, behaviour, target = _episode_tensors(T=3, B=1, seed=4)
    lam = 0.9
    adv = vtrace_gae_lambda(target_logp=target, behaviour_logp=behaviour, lam=lam, **data)
    ratio = torch.exp(target - behaviour)[:, 0]
    r, v, d = data["rewards"][:, 0], data["values"][:, 0], data["discounts"][:, 0]
    v_next = torch.cat([v[1:], data["bootstrap_values"]])
    delta = torch.clamp(ratio, max=1.0) * (r + d * v_next - v)
    a2 = delta[2]
    a1 = delta[1] + lam * d[1] * min(ratio[1].item(), 1.0) * a2
    a0 = delta[0] + lam * d[0] * min(ratio[0].item(), 1.0) * a1
    torch.testing.assert_close(adv[:, 0], torch.stack([a0, a1, a2]))


def _recursion(target, behaviour, discounts, rewards, values, bootstrap_values, lam, rho_bar, c_bar):
    """§3.1's A^{V-GAE} as the plain backward recursion A_t = δ_t + λ γ_t c_t A_{t+1}."""
    ratio = torch.exp(target - behaviour)
    v_next = torch.cat([values[1:], bootstrap_values[None]])
    delta = torch.clamp(ratio, max=rho_bar) * (rewards + discounts * v_next - values)
    kappa = lam * discounts * torch.clamp(ratio, max=c_bar)
    adv, acc = torch.zeros_like(delta), torch.zeros_like(bootstrap_values)
    for t in reversed(range(len(delta))):
        acc = delta[t] + kappa[t] * acc
        adv[t] = acc
    return adv


@pytest.mark.parametrize("T", [7, 64, 65, 150, 5000])  # one block; one full block; blocks of 32, padded; 3 levels
@pytest.mark.parametrize("lam,rho_bar,c_bar", [(0.95, 1.0, 1.0), (0.5, 2.0, 0.5), (1.0, 1.0, 1.5)])
def test_trace_operator_equals_the_recursion(T, lam, rho_bar, c_bar):
    """The per-batch linear operator (built once, applied per draw) is the recursion, off-policy,
    with terminals inside and at the edges of its blocks, for two different sets of values."""
    data, behaviour, target = _episode_tensors(T=T, B=3, seed=T)
    for t in {0, 31, 32, T // 2, T - 1} & set(range(T)):
        data["discounts"][t, t % 3] = 0.0
    traces = VGAETraces(
        target_logp=target,
        behaviour_logp=behaviour,
        discounts=data["discounts"],
        rewards=data["rewards"],
        lam=lam,
        rho_bar=rho_bar,
        c_bar=c_bar,
    )
    for shift in (0.0, 1.7):  # the critic moves between draws; the operator does not
        values, boot = data["values"] + shift, data["bootstrap_values"] - shift
        targets, adv = traces(values, boot)
        expected = _recursion(target, behaviour, data["discounts"], data["rewards"], values, boot, lam, rho_bar, c_bar)
        torch.testing.assert_close(adv, expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(targets, values + expected, rtol=1e-10, atol=1e-10)


def test_trace_operator_blocks():
    """Rows up to 64 steps are one dense block; longer ones are cut into blocks of 32."""
    assert TraceOperator(torch.ones(64, 2)).num_blocks == 1
    op = TraceOperator(torch.ones(150, 2))
    assert (op.W, op.num_blocks, op.pad) == (32, 5, 10)
    # κ = 1: A_t = Σ_{i≥t} x_i, the reversed cumulative sum.
    x = torch.arange(150.0).reshape(75, 2).repeat(2, 1)
    torch.testing.assert_close(op(x), x.flip(0).cumsum(0).flip(0))


def test_valid_mask_zeroes_the_td_error_of_masked_steps():
    """A masked (phantom) step passes nothing back: same as giving it reward V(s) and discount 0."""
    data, behaviour, target = _episode_tensors(T=6, B=2, seed=9)
    valid = torch.ones_like(data["rewards"])
    valid[2, 0] = valid[5, 1] = 0.0
    common = dict(target_logp=target, behaviour_logp=behaviour, lam=0.9, rho_bar=2.0, c_bar=1.0)
    discounts = data["discounts"] * valid
    masked = VGAETraces(discounts=discounts, rewards=data["rewards"] * valid, valid=valid, **common)
    phantom_rewards = data["rewards"] * valid + (1 - valid) * data["values"]
    trick = VGAETraces(discounts=discounts, rewards=phantom_rewards, **common)
    args = (data["values"], data["bootstrap_values"])
    torch.testing.assert_close(masked(*args), trick(*args))


def test_kl_coeff_moves_toward_target():
    assert adapt_kl_coeff(1.0, kl=0.05, kl_target=0.01) == pytest.approx(1.5)  # KL too large: up
    assert adapt_kl_coeff(1.0, kl=0.001, kl_target=0.01) == pytest.approx(0.5)  # too small: down
    assert adapt_kl_coeff(1.0, kl=0.01, kl_target=0.01) == pytest.approx(1.0)  # in band: same


def test_masked_standardize_uses_only_valid_steps():
    x = torch.tensor([[1.0, 3.0], [5.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # 100 is padding
    out = masked_standardize(x, mask, mask.sum())
    mean, std = 3.0, math.sqrt(8.0 / 3.0)  # of 1, 3, 5 (population std)
    torch.testing.assert_close(out, (x - mean) / (std + 1e-8))
    valid = out[mask.bool()]
    assert abs(float(valid.mean())) < 1e-6 and abs(float(valid.pow(2).mean()) - 1.0) < 1e-6


def test_masked_mean_of_a_fully_masked_batch_is_zero_not_nan():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    mask = torch.zeros_like(x)
    assert float(masked_mean(x, mask, mask.sum())) == 0.0
    out = masked_standardize(x, mask, mask.sum())
    assert torch.isfinite(out).all()


def test_masked_mean_ignores_non_finite_values_on_masked_steps():
    """0·inf = NaN: a masked inf or NaN must not reach the mean (a phantom step's ratio can overflow)."""
    x = torch.tensor([[1.0, float("inf")], [3.0, float("nan")]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert float(masked_mean(x, mask, mask.sum())) == pytest.approx(2.0)
    std = masked_standardize(x, mask, mask.sum())[mask.bool()]
    torch.testing.assert_close(std, torch.tensor([-1.0, 1.0]))
