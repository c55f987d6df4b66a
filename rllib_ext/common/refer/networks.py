"""The common network of paper 003 App. A, with the App. B state standardization.

"an MLP with two hidden layers of 128 units each ... Softsign activation functions. The weights
of the hidden layers are initialized according to U[−6/√(f_i+f_o), 6/√(f_i+f_o)] ... (Glorot &
Bengio, 2010). The weights of the linear output layer are initialized from U[−0.1/√f_i,
0.1/√f_i], such that the MLP has near-zero outputs at the beginning of training."

The hidden-layer bound printed in the paper (6/√(f_i+f_o)) is 2.4× Glorot's √6/√(f_i+f_o), the
scheme the paper cites; we use Glorot's (``torch.nn.init.xavier_uniform_``). Biases start at 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["Standardizer", "paper_mlp", "softplus_inverse"]


def paper_mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """Linear/Softsign layers of sizes ``hidden`` and a linear output layer (App. A init)."""
    layers = []
    fan_in = in_dim
    for width in hidden:
        lin = nn.Linear(fan_in, width)
        nn.init.xavier_uniform_(lin.weight)  # Glorot & Bengio (2010), App. A
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.Softsign()]
        fan_in = width
    out = nn.Linear(fan_in, out_dim)
    bound = 0.1 / np.sqrt(fan_in)  # U[−0.1/√f_i, 0.1/√f_i], App. A
    nn.init.uniform_(out.weight, -bound, bound)
    nn.init.zeros_(out.bias)
    layers.append(out)
    return nn.Sequential(*layers)


class Standardizer(nn.Module):
    """ŝ = (s − μ_s)/(σ_s + ε) with μ_s, σ_s from the replay memory (App. B, Eq. 14-15).

    The statistics are buffers, so they travel with the module's weights to the env runners
    and into checkpoints. They start as (0, 1): identity up to ε.
    """

    def __init__(self, dim: int, eps: float = 1e-7):
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def set(self, mean, std) -> None:
        """Sets μ_s and σ_s."""
        self.mean.copy_(torch.as_tensor(np.asarray(mean), dtype=self.mean.dtype))
        self.std.copy_(torch.as_tensor(np.asarray(std), dtype=self.std.dtype))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.mean) / (self.std + self.eps)


def softplus_inverse(y: float) -> float:
    """x with softplus(x) = y."""
    return float(np.log(np.expm1(y)))
