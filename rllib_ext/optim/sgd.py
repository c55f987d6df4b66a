"""Plain SGD, Eq. (2) of paper 000 (``000_918eb0e7bb8ca864``, §2.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

DEFAULT_LR = 0.01  # η_0, paper 000 Table 3


class SGD(torch.optim.SGD):
    """Stochastic gradient descent exactly as Eq. (2) of paper 000: θ_{u+1} = θ_u − η·grad.

    A thin subclass of :class:`torch.optim.SGD` that fixes momentum, dampening, Nesterov and
    weight decay to zero, so the update is Eq. (2) and nothing else; it exists to carry the
    paper's name and default η into the optimizer registry.

    Sign convention (shared by every optimizer of :mod:`rllib_ext.optim`): like all torch
    optimizers it *minimizes*, i.e. it steps along ``-param.grad``. Paper 000 writes Eq. (2) as
    ascent, θ_{u+1} = θ_u + η ∇J(θ_u); an ES-style algorithm that holds an ascent estimate ĝ of
    ∇J sets ``param.grad = -ĝ`` before ``step()``. A gradient-based learner that minimizes a loss
    uses it unchanged.

    Args:
        params: Parameters or parameter groups, as for any torch optimizer.
        lr: η, the learning rate (paper 000 Table 3: 0.01).
    """

    def __init__(self, params: Iterable[torch.Tensor] | Iterable[dict[str, Any]], lr: float = DEFAULT_LR):
        super().__init__(params, lr=lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)
