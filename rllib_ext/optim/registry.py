"""Optimizers by name: ``"adam" | "sgd" | "msgd" | "dsgd"`` with paper 000's defaults (Table 3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from rllib_ext.optim.dsgd import DSGD
from rllib_ext.optim.msgd import MSGD
from rllib_ext.optim.sgd import SGD

# name -> (class, paper 000 Table 3 defaults). Adam is torch's own (β1 0.9, β2 0.999, ε 1e-8,
# η 0.01 in Table 3). The defaults of SGD, MSGD and DSGD are those of their constructors.
OPTIMIZERS: dict[str, tuple[type[torch.optim.Optimizer], dict[str, Any]]] = {
    "adam": (torch.optim.Adam, {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8}),
    "sgd": (SGD, {}),
    "msgd": (MSGD, {}),
    "dsgd": (DSGD, {}),
}


def _entry(name: str) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """``OPTIMIZERS[name]``, case-insensitively, or one clear error (the message of
    :func:`rllib_ext.common.names.lookup`; written here so that ``optim/`` imports nothing else of rllib_ext)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {name!r}; valid names are {', '.join(map(repr, OPTIMIZERS))}.")
    return OPTIMIZERS[key]


def get_optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """Returns the optimizer class registered under ``name`` (case-insensitive).

    Raises:
        ValueError: ``name`` is not one of :data:`OPTIMIZERS`.
    """
    return _entry(name)[0]


def make_optimizer(
    name: str, params: Iterable[torch.Tensor] | Iterable[dict[str, Any]], **overrides: Any
) -> torch.optim.Optimizer:
    """Builds the optimizer ``name`` over ``params`` with the paper's defaults and ``overrides``.

    Example: ``make_optimizer("dsgd", module.parameters(), lr=0.02)``.

    Args:
        name: One of ``"adam"``, ``"sgd"``, ``"msgd"``, ``"dsgd"`` (case-insensitive).
        params: Parameters or parameter groups.
        **overrides: Constructor arguments replacing the defaults (e.g. ``lr``, ``eps1``, ``M``).

    Raises:
        ValueError: Unknown ``name``.
        TypeError: An override the optimizer does not take.
    """
    cls, defaults = _entry(name)
    return cls(params, **{**defaults, **overrides})
