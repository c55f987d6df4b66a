"""Optimizers by name: classes, defaults, overrides, a clear error for unknown names."""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch

import rllib_ext.optim
from rllib_ext.optim import DSGD, get_optimizer_class, make_optimizer
from tests.unit.optim.helpers import make_params


def test_registry_classes_defaults_and_overrides():
    params = make_params(14)
    assert get_optimizer_class("adam") is torch.optim.Adam
    assert get_optimizer_class("DSGD") is DSGD
    assert issubclass(get_optimizer_class("msgd"), torch.optim.Optimizer)
    adam = make_optimizer("adam", params)
    assert adam.defaults["lr"] == 0.01 and adam.defaults["betas"] == (0.9, 0.999) and adam.defaults["eps"] == 1e-8
    dsgd = make_optimizer("dsgd", params, lr=0.02, M=4)
    assert dsgd.param_groups[0]["lr"] == 0.02 and dsgd.M == 4 and dsgd.eps1 == 0.03080
    assert make_optimizer("msgd", params).param_groups[0]["lr"] == 0.01
    assert make_optimizer("sgd", params).param_groups[0]["lr"] == 0.01


def test_registry_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'rmsprop'.*'adam', 'sgd', 'msgd', 'dsgd'"):
        make_optimizer("rmsprop", make_params(15))
    with pytest.raises(ValueError, match="rho must be > 1"):
        make_optimizer("dsgd", make_params(15), rho=0.9)


def test_registry_unknown_name_message_matches_the_other_registries():
    with pytest.raises(ValueError) as info:
        get_optimizer_class("RMSprop")
    assert str(info.value) == "Unknown optimizer 'RMSprop'; valid names are 'adam', 'sgd', 'msgd', 'dsgd'."


def test_optim_imports_nothing_else_of_rllib_ext():
    """``common/`` uses ``optim/``, never the other way (docs/architecture.md, "Layers")."""
    outside = []
    for path in pathlib.Path(rllib_ext.optim.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            outside += [f"{path.name}: {n}" for n in names if n.startswith("rllib_ext") and "rllib_ext.optim" not in n]
    assert outside == []
