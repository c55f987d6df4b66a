"""``python -m benchmarks.harness.race``: ``rllib race`` writing into ``benchmarks/results/``.

The race itself is :mod:`rllib_ext.compare.race` (``rllib race --help``). This name stays because
the committed rows record it as their reproduction command: run from the repository root, it
writes to ``benchmarks/results/<benchmark>/<race>.jsonl`` (where ``make bench-report`` reads) and
records ``python -m benchmarks.harness.race ...`` in each row.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rllib_ext.cli import race_main

RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def main(argv: Sequence[str] | None = None) -> int:
    """``rllib race ARGS`` under this module's name; returns the exit status."""
    return race_main(list(sys.argv[1:] if argv is None else argv), "python -m benchmarks.harness.race", RESULTS_DIR)


if __name__ == "__main__":
    sys.exit(main())
