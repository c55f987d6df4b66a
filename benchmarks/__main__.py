"""`make bench` / `python -m benchmarks [NAME ...]`: runs the benchmark scripts one after another.

Each ``benchmarks/<name>.py`` is a standalone script that measures side by side in one run and
prints ratios. Learning comparisons go through the race harness instead (``rllib race``, here
``python -m benchmarks.harness.race``, writes rows under ``benchmarks/results/``, ``make
bench-report`` draws the figures and the summary in ``benchmarks/RESULTS.md``). Run them one at a
time on a quiet machine: they compete for the same cores.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    here = os.path.dirname(os.path.abspath(__file__))
    scripts = {
        os.path.splitext(os.path.basename(p))[0]: p
        for p in sorted(glob.glob(os.path.join(here, "*.py")))
        if not os.path.basename(p).startswith("_")
    }
    if not scripts:
        print("benchmarks: no benchmark scripts yet", file=sys.stderr)
        return 1
    unknown = [a for a in argv if a not in scripts]
    if unknown:
        print(f"benchmarks: unknown {unknown}; available: {', '.join(scripts)}", file=sys.stderr)
        return 2
    status = 0
    for name in argv or list(scripts):
        print(f"=== benchmarks/{name}.py", flush=True)
        # As a module from the repository root: the scripts import ``benchmarks._args`` and ``rllib_ext``.
        status = max(status, subprocess.call([sys.executable, "-m", f"benchmarks.{name}"], cwd=os.path.dirname(here)))
    return status


if __name__ == "__main__":
    sys.exit(main())
