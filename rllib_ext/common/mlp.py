"""The one MLP builder: the black-box policies, TD3's twin critic and the ReF-ER networks use it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import nn


def mlp(
    in_dim: int,
    hiddens: Sequence[int],
    out_dim: int,
    activation: Callable[[], nn.Module],
    init: Callable[[nn.Linear, bool], None] | None = None,
) -> nn.Sequential:
    """Linear/``activation`` layers of sizes ``hiddens``, then a linear output layer of size ``out_dim``.

    Args:
        in_dim: Input size.
        hiddens: Hidden layer sizes (may be empty: one linear layer).
        out_dim: Output size.
        activation: Makes one activation module (e.g. ``nn.Tanh``), after each hidden layer.
        init: Called on each linear layer as it is made, with True for the output layer
            (ReF-ER's App. A initialization); None: torch's default initialization. Layers are
            made and initialized in order, so a seeded build draws the same weights as
            layer-by-layer code.

    Returns:
        The ``nn.Sequential`` (indices: linear, activation, ..., linear).
    """
    layers: list[nn.Module] = []
    last = int(in_dim)
    for width in hiddens:
        layers += [_linear(last, int(width), init, False), activation()]
        last = int(width)
    layers.append(_linear(last, int(out_dim), init, True))
    return nn.Sequential(*layers)


def _linear(fan_in: int, fan_out: int, init: Callable[[nn.Linear, bool], None] | None, output: bool) -> nn.Linear:
    layer = nn.Linear(fan_in, fan_out)
    if init is not None:
        init(layer, output)
    return layer
