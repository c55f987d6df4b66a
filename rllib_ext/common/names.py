"""Name lookup shared by the small registries (samplers, return shaping, optimizers)."""

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
