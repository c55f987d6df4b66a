"""Parameters and gradients for the optimizer tests."""

from __future__ import annotations

import torch


def make_params(seed: int = 0, shapes=((7, 5), (5,), (3, 4, 2))) -> list[torch.nn.Parameter]:
    """float64 parameters of the given shapes, drawn from a seeded generator."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=gen, dtype=torch.float64)) for s in shapes]


def set_random_grads(params, gen: torch.Generator) -> None:
    """Sets every ``p.grad`` to a standard normal draw from ``gen``."""
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)


def flat_params(params) -> torch.Tensor:
    """A copy of all parameters as one flat vector (the paper's θ)."""
    return torch.cat([p.detach().reshape(-1) for p in params]).clone()


def num_scalars(params) -> int:
    """d: the number of scalars in all parameters."""
    return sum(p.numel() for p in params)
