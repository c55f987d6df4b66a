"""The common network of paper 003 App. A, with the App. B state standardization.

"an MLP with two hidden layers of 128 units each ... Softsign activation functions. The weights
of the hidden layers are initialized according to U[−6/√(f_i+f_o), 6/√(f_i+f_o)] ... (Glorot &
Bengio, 2010). The weights of the linear output layer are initialized from U[−0.1/√f_i,
0.1/√f_i], such that the MLP has near-zero outputs at the beginning of training."

The hidden-layer bound printed in the paper (6/√(f_i+f_o)) is 2.4× Glorot's √6/√(f_i+f_o), the
scheme the paper cites; we use Glorot's (``torch.nn.init.xavier_uniform_``). Biases start at 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rllib_ext.common.mlp import mlp

__all__ = ["Standardizer", "network_settings", "paper_mlp", "softplus_inverse"]

#: App. A's network: two hidden layers of 128 units, Softsign.
DEFAULT_HIDDEN = (128, 128)
DEFAULT_ACTIVATION = "Softsign"


def network_settings(model_config: Mapping[str, Any] | None) -> tuple[list[int], type[nn.Module]]:
    """(hidden sizes, activation class) from ``model_config``; App. A's (128, 128) Softsign by default.

    ``fcnet_hiddens`` and ``fcnet_activation`` (RLlib's keys; any ``torch.nn`` class name, or
    RLlib's lower-case names such as ``"relu"``/``"tanh"``) shape the MLP, so that a race can give
    paper 003's learners and RLlib's algorithms the same network. The learners have no separate
    heads: a non-empty ``head_fcnet_hiddens`` is rejected rather than ignored.

    Raises:
        ValueError: Naming the setting that cannot be honoured.
    """
    from ray.rllib.models.utils import get_activation_fn

    cfg = model_config or {}
    hidden = cfg.get("fcnet_hiddens", DEFAULT_HIDDEN)
    if not isinstance(hidden, (list, tuple)) or not all(isinstance(w, int) and w >= 1 for w in hidden):
        raise ValueError(f"model_config['fcnet_hiddens'] must be a list of positive ints, got {hidden!r}")
    if cfg.get("head_fcnet_hiddens"):
        raise ValueError(
            "model_config['head_fcnet_hiddens'] must be empty for paper 003's learners (one MLP, no separate "
            f"heads; put every layer in fcnet_hiddens), got {cfg['head_fcnet_hiddens']!r}"
        )
    name = cfg.get("fcnet_activation", DEFAULT_ACTIVATION)
    try:
        activation = get_activation_fn(name, framework="torch") if isinstance(name, str) else None
    except ValueError:
        activation = None
    if activation is None or not (isinstance(activation, type) and issubclass(activation, nn.Module)):
        raise ValueError(
            f"model_config['fcnet_activation'] must name a torch.nn activation (e.g. 'Softsign', 'tanh', "
            f"'relu'), got {name!r}"
        )
    return list(hidden), activation


def paper_mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, activation: type[nn.Module] = nn.Softsign
) -> nn.Sequential:
    """Linear/``activation`` (App. A: Softsign) layers of sizes ``hidden`` and a linear output layer (App. A init)."""
    return mlp(in_dim, hidden, out_dim, activation, init=_paper_init)


def _paper_init(layer: nn.Linear, output: bool) -> None:
    """App. A: Glorot-uniform hidden weights; output weights U[−0.1/√f_i, 0.1/√f_i]; zero biases."""
    if output:
        bound = 0.1 / np.sqrt(layer.in_features)  # U[−0.1/√f_i, 0.1/√f_i], App. A
        nn.init.uniform_(layer.weight, -bound, bound)
    else:
        nn.init.xavier_uniform_(layer.weight)  # Glorot & Bengio (2010), App. A
    nn.init.zeros_(layer.bias)


class Standardizer(nn.Module):
    """ŝ = (s − μ_s)/(σ_s + ε) with μ_s, σ_s from the replay memory (App. B, Eq. 14-15).

    The statistics are buffers, so they travel with the module's weights to the env runners
    and into checkpoints. They start as (0, 1): identity up to ε.
    """

    # Registered buffers (nn.Module types attributes it does not know as Tensor | Module).
    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, dim: int, eps: float = 1e-7):
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def set(self, mean: npt.ArrayLike, std: npt.ArrayLike) -> None:
        """Sets μ_s and σ_s."""
        self.mean.copy_(torch.as_tensor(np.asarray(mean), dtype=self.mean.dtype))
        self.std.copy_(torch.as_tensor(np.asarray(std), dtype=self.std.dtype))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.mean) / (self.std + self.eps)


def softplus_inverse(y: float) -> float:
    """x with softplus(x) = y."""
    return float(np.log(np.expm1(y)))
