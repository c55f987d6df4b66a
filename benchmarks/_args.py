"""Argument helpers shared by the benchmark scripts (not a benchmark itself: the leading
underscore keeps it out of ``python -m benchmarks``)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def parse_set(parser: argparse.ArgumentParser, items: list[str], flag: str = "--set") -> dict[str, Any]:
    """``KEY=JSON`` items as a dict; a malformed item is a usage error naming it."""
    bad = [i for i in items if "=" not in i]
    if bad:
        parser.error(f"{flag} takes KEY=JSON, got {bad}")
    out = {}
    for key, value in (item.split("=", 1) for item in items):
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError as e:
            parser.error(f"{flag} {key}={value}: the value is not JSON ({e.msg})")
    return out
