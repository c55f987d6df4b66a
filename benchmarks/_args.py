"""Argument helpers shared by the benchmark scripts (not a benchmark itself: the leading
underscore keeps it out of ``python -m benchmarks``)."""

from __future__ import annotations

import argparse
from typing import Any

from rllib_ext.compare.race import RaceError, parse_key_json


def parse_set(parser: argparse.ArgumentParser, items: list[str], flag: str = "--set") -> dict[str, Any]:
    """``KEY=JSON`` items as a dict (:func:`rllib_ext.compare.race.parse_key_json`); a malformed item
    is a usage error naming it."""
    out = {}
    for item in items:
        try:
            key, value = parse_key_json(item, flag)
        except RaceError as e:
            parser.error(str(e))
        out[key] = value
    return out
