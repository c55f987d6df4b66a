"""Old module paths of moved modules still import (checkpoints pickle classes by module path)."""

import importlib
import pickle

import pytest

import rllib_ext  # noqa: F401  (installs the alias hook)
from rllib_ext._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_new_module(old):
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    assert new.__spec__.name == MOVED[old]


def test_a_class_pickled_under_an_old_path_loads():
    # Protocol 0's GLOBAL opcode: what a checkpoint written before the move holds.
    assert pickle.loads(b"crllib_ext.common.transitions\nTransitionBuffer\n.").__module__ == (
        "rllib_ext.common.offpolicy.transitions"
    )
