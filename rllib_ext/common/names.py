"""Name lookups: the small registries (samplers, return shaping, activations), and the registered
name of each algorithm class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(table: Mapping[str, T], name: str, kind: str) -> T:
    """Returns ``table[name]``, case-insensitively, or raises one clear error.

    Args:
        table: The registry, keyed by lower-case names.
        name: The name asked for.
        kind: What is looked up, for the message (e.g. ``"optimizer"``).

    Raises:
        ValueError: Naming ``name`` and every valid name.
    """
    key = name.lower() if isinstance(name, str) else name
    if key not in table:
        raise ValueError(f"Unknown {kind} {name!r}; valid names are {', '.join(map(repr, table))}.")
    return table[key]


# "module:Class" of each registered Algorithm -> its registered name ("IMPACT_EXT"). Filled by
# rllib_ext.registry when it is imported (from its one list), so that code here in common/ can
# name an algorithm without importing the registry or any algorithm module.
ALGORITHM_NAMES: dict[str, str] = {}


def registered_name(cls: type) -> str | None:
    """The registered name of the Algorithm class ``cls`` itself (not of a parent), or None."""
    return ALGORITHM_NAMES.get(f"{cls.__module__}:{cls.__qualname__}")
