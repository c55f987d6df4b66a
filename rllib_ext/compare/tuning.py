"""Equal tuning effort for a race (``rllib race --tune``): grids, tuning seeds, the best point.

A tuned race runs in two stages (:func:`rllib_ext.compare.race.run`):

1. **Tuning.** Each entry's grid (``--tune LABEL:KEY=[v1,v2,...]``, repeatable; the points are the
   Cartesian product of its keys' values, in the order given) is run on the tuning seeds
   (``--tune-seeds``; default :data:`DEFAULT_TUNING_SEEDS` seeds from :data:`TUNING_SEED_BASE`,
   always disjoint from the evaluation seeds). Every tuning run is a row marked
   ``stage="tuning"`` with its point; the report never pools it with the evaluation rows.
2. **Evaluation.** Each entry's best point (:func:`choose_best`: the highest IQM over the tuning
   seeds of the final evaluation return at the budget; ties go to the higher worst-seed return, then
   to the first point in grid order) runs on the evaluation seeds; its rows carry the grid, the
   tuning seeds, each point's score and the chosen point.

The grids must be of equal size across the entries (an entry without ``--tune`` is a grid of 1),
unless ``--allow-unequal-tuning``; the rows then name the entries not equally tuned. Nothing here
imports Ray; bad input raises :class:`TuningError` (``rllib race`` shows it as a usage error).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rllib_ext import stats

#: Tuning seeds when ``--tune-seeds`` is not given: this many, the first free ones from the base.
DEFAULT_TUNING_SEEDS = 2
TUNING_SEED_BASE = 1000
#: The row's ``tuning["rule"]``: a grid per entry, a paper's matched mapping, or none (own defaults).
GRID, MATCHED, NONE = "grid", "matched", "none"
#: How the best point is chosen (recorded in the rows, quoted by the report).
CHOICE_RULE = (
    "highest IQM over the tuning seeds of the final evaluation return; ties: higher worst-seed return, "
    "then the first point in grid order"
)


class TuningError(ValueError):
    """Bad tuning input, found before any run; its message names the option and entry."""


def parse_grids(items: Sequence[str], labels: Sequence[str]) -> dict[str, dict[str, list[Any]]]:
    """``LABEL:KEY=[v1,v2,...]`` items (values as JSON) as ``{label: {key: values}}``, in the order given.

    Raises:
        TuningError: A malformed item, a label that is not an entry's, a key given twice for one
            entry, or values that are not a non-empty JSON list without repeats.
    """
    grids: dict[str, dict[str, list[Any]]] = {}
    for item in items:
        label, sep, rest = item.partition(":")
        key, eq, text = rest.partition("=")
        if not sep or not eq or not key:
            raise TuningError(f"--tune takes LABEL:KEY=[v1,v2,...], got {item!r}")
        if label not in labels:
            raise TuningError(f"--tune {item}: {label!r} is not an entry of --algos ({', '.join(labels)})")
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise TuningError(f"--tune {label}:{key}: the values are not JSON ({e.msg})") from None
        if not isinstance(values, list) or not values:
            raise TuningError(f"--tune {label}:{key}: give a non-empty JSON list of values, got {text}")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise TuningError(f"--tune {label}:{key}: a value repeats in {text}")
        grid = grids.setdefault(label, {})
        if key in grid:
            raise TuningError(f"--tune {label}:{key} is given twice: list every value in one --tune")
        grid[key] = values
    return grids


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The grid's points, the Cartesian product of its keys' values (first key slowest); ``[{}]`` for no grid."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def tuning_seeds(eval_seeds: Sequence[int], given: Sequence[int] | None = None) -> list[int]:
    """The tuning seeds: ``given`` (checked), or :data:`DEFAULT_TUNING_SEEDS` free seeds from
    :data:`TUNING_SEED_BASE`; never one of the evaluation seeds.

    Raises:
        TuningError: A given seed that repeats or is an evaluation seed.
    """
    if given is None:
        seeds: list[int] = []
        seed = TUNING_SEED_BASE
        while len(seeds) < DEFAULT_TUNING_SEEDS:
            if seed not in eval_seeds:
                seeds.append(seed)
            seed += 1
        return seeds
    seeds = list(given)
    if not seeds or len(set(seeds)) != len(seeds):
        raise TuningError("--tune-seeds must be one or more seeds without repeats")
    shared = sorted(set(seeds) & set(eval_seeds))
    if shared:
        raise TuningError(f"--tune-seeds must be disjoint from --seeds: both have {shared}")
    return seeds


def grid_sizes(grids: Mapping[str, Mapping[str, Sequence[Any]]], labels: Sequence[str]) -> dict[str, int]:
    """Each entry's number of grid points (1 for an entry without ``--tune``)."""
    return {label: len(grid_points(grids.get(label, {}))) for label in labels}


def not_equally_tuned(sizes: Mapping[str, int]) -> list[str]:
    """The entries whose grid is smaller than the largest (none when every grid has one size)."""
    largest = max(sizes.values(), default=1)
    return [label for label, k in sizes.items() if k < largest]


def check_equal_size(sizes: Mapping[str, int], allow_unequal: bool) -> list[str]:
    """The entries not equally tuned (:func:`not_equally_tuned`); an error unless ``allow_unequal``.

    Raises:
        TuningError: Grids of unequal size without ``--allow-unequal-tuning``.
    """
    unequal = not_equally_tuned(sizes)
    if unequal and not allow_unequal:
        shown = ", ".join(f"{label}: {k}" for label, k in sizes.items())
        raise TuningError(
            f"--tune grids differ in size ({shown}; an entry without --tune is a grid of 1): give every entry a "
            "grid of the same size, or --allow-unequal-tuning (the report then names the entries not equally tuned)"
        )
    return unequal


def score(finals: Sequence[float]) -> tuple[float, float]:
    """A point's score from its final evaluation returns over the tuning seeds: (IQM, worst seed)."""
    return float(stats.iqm(list(finals))), float(min(finals))


def choose_best(finals_by_point: Sequence[Sequence[float]]) -> int:
    """The index of the best point (:data:`CHOICE_RULE`), given each point's final returns over the tuning seeds.

    Raises:
        TuningError: No point, or a point without returns.
    """
    if not finals_by_point or any(len(f) == 0 for f in finals_by_point):
        raise TuningError("every grid point needs a final return on each tuning seed")
    scores = [score(f) for f in finals_by_point]
    # max() keeps the first of equal keys: grid order breaks the last tie.
    return max(range(len(scores)), key=lambda i: scores[i])
