"""SGD (paper 000 Eq. 2) and the ES ascent convention."""

from __future__ import annotations

import torch

from rllib_ext.optim import SGD, make_optimizer
from tests.unit.optim.helpers import make_params, set_random_grads


def test_sgd_is_eq_2():
    params = make_params(1)
    gen = torch.Generator().manual_seed(3)
    opt = make_optimizer("sgd", params, lr=0.05)
    assert isinstance(opt, SGD)
    for _ in range(3):
        set_random_grads(params, gen)
        expected = [p.detach() - 0.05 * p.grad for p in params]  # Eq. (2), minimizing sign
        opt.step()
        for p, e in zip(params, expected, strict=False):
            assert torch.allclose(p.detach(), e, rtol=0, atol=1e-15)


def test_es_ascent_convention():
    """An ascent estimate ĝ becomes param.grad = -ĝ: the step goes along +ĝ."""
    (p,) = make_params(2, shapes=((4,),))
    g_hat = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    before = p.detach().clone()
    p.grad = -g_hat
    SGD([p], lr=0.1).step()
    assert torch.allclose(p.detach() - before, 0.1 * g_hat)
