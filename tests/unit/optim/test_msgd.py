"""MSGD (paper 000 Eq. 19): every step has norm 0.23·η·√d."""

from __future__ import annotations

import math

import torch

from rllib_ext.optim import MSGD, make_optimizer
from tests.unit.optim.helpers import flat_params, make_params, num_scalars, set_random_grads


def test_msgd_every_step_has_norm_0_23_eta_sqrt_d():
    params = make_params(3)
    # Two param groups with the same lr: d and ‖g‖ are taken over both groups jointly.
    opt = make_optimizer("msgd", [{"params": params[:2]}, {"params": params[2:]}], lr=0.02)
    assert isinstance(opt, MSGD)
    gen = torch.Generator().manual_seed(4)
    d = num_scalars(params)
    for scale in (1e-6, 1.0, 1e6, 3.0):  # the gradient's magnitude does not matter
        set_random_grads(params, gen)
        for p in params:
            p.grad.mul_(scale)
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        before = flat_params(params)
        opt.step()
        step = flat_params(params) - before
        assert math.isclose(float(step.norm()), 0.23 * 0.02 * math.sqrt(d), rel_tol=1e-9)
        assert torch.allclose(step / step.norm(), -grad / grad.norm(), atol=1e-12)  # along −g


def test_msgd_follows_lr_overwritten_by_a_schedule():
    params = make_params(4)
    opt = MSGD(params, lr=0.01)
    opt.param_groups[0]["lr"] = 0.1  # what RLlib's TorchLearner does with an lr schedule
    set_random_grads(params, torch.Generator().manual_seed(5))
    before = flat_params(params)
    opt.step()
    assert math.isclose(
        float((flat_params(params) - before).norm()), 0.23 * 0.1 * math.sqrt(num_scalars(params)), rel_tol=1e-9
    )
