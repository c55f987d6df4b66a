"""The fixed-norm step's base (paper 000 §4.1): Adam's first step, zero gradients."""

from __future__ import annotations

import math

import pytest
import torch

from rllib_ext.optim import make_optimizer
from tests.unit.optim.helpers import flat_params, make_params, num_scalars, set_random_grads


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adam_first_update_has_norm_eta_sqrt_d(seed):
    """Paper 000 App. B: ‖θ_1 − θ_0‖ = η√d for any gradient.

    Why: with m_0 = v_0 = 0, after one step m_1 = (1−β1)g and v_1 = (1−β2)g²; Adam's bias
    corrections divide them by (1−β1) and (1−β2), so m̂ = g and v̂ = g², and the update is
    η·g/(|g| + ε) = ±η per element (ε = 1e-8 ≪ |g| here). d elements of size η: norm η√d.
    """
    params = make_params(seed)
    gen = torch.Generator().manual_seed(100 + seed)
    set_random_grads(params, gen)
    for p in params:  # keep |g| ≫ Adam's ε so the ±η elements are exact to ~1e-7 relative
        p.grad = torch.where(p.grad.abs() < 1e-2, torch.full_like(p.grad, 0.5), p.grad)
    opt = make_optimizer("adam", params)  # η = 0.01, β = (0.9, 0.999), ε = 1e-8 (Table 3)
    before = flat_params(params)
    opt.step()
    step = flat_params(params) - before
    eta, d = 0.01, num_scalars(params)
    assert torch.allclose(step.abs(), torch.full_like(step, eta), rtol=1e-6)  # every element ±η
    assert math.isclose(float(step.norm()), eta * math.sqrt(d), rel_tol=1e-6)
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    assert torch.equal(torch.sign(step), -torch.sign(grad))  # minimizing: against the gradient


@pytest.mark.parametrize("name", ["sgd", "msgd", "dsgd"])
def test_zero_gradient_gives_no_nan_and_no_step(name):
    params = make_params(12)
    opt = make_optimizer(name, params)
    before = flat_params(params)
    for p in params:
        p.grad = torch.zeros_like(p)
    if name == "dsgd":
        opt.report_reward(1.0)
    opt.step()
    after = flat_params(params)
    assert torch.isfinite(after).all()
    assert torch.equal(after, before)
