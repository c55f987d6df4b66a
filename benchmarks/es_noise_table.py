"""The driver's ES update per row: ε regenerated from seeded generators vs slices of the shared noise table.

For d parameters and a batch of ``--rows`` antithetic rows (ES_EXT's default sampler), times per row:

- ``seeded batch``: ``sampler.sample(seed, n)`` then ``es_gradient`` (ES_EXT/ARS/CVES before the
  table, and with ``noise_table=False``);
- ``seeded per row``: ``sampler.perturbation`` for each row, stacked, then ``es_gradient`` (DFD_EXT
  before the table: its rows come from several batches);
- ``table gather``: the rows' slices gathered in one indexed copy, then ``es_gradient``
  (``BlackBoxAlgorithm.perturbations``: what ES_EXT, ARS, CVES and DFD_EXT do now);
- ``table weighted sum``: ``NoiseTable.weighted_sum`` (one product over the slices, no ε kept).

Each is timed ``--repeats`` times over ``--updates`` updates (each with a new batch seed), wall
(``perf_counter``) and CPU (``process_time``) per row. One JSON row per (d, path, repeat) in
``--out`` (default ``benchmarks/results/measurements/es_noise_table/<date>.jsonl``).

    python -m benchmarks.es_noise_table                # d = 4614 (Hopper [64, 64]) and 100 000
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.noise_table import NoiseTable, make_noise
from rllib_ext.common.blackbox.samplers import PerturbationSampler, make_sampler
from rllib_ext.compare.rows import Machine, append_measurement, git_commit


def _paths(
    sampler: PerturbationSampler, table: NoiseTable, returns: np.ndarray, n: int
) -> dict[str, Callable[[int], np.ndarray]]:
    """The four ways of taking one update's estimate, by batch seed."""

    def seeded_batch(seed: int) -> np.ndarray:
        return es_gradient(returns, sampler.sample(seed, n), 0.02)

    def seeded_rows(seed: int) -> np.ndarray:
        return es_gradient(returns, np.stack([sampler.perturbation(seed, n, i) for i in range(n)]), 0.02)

    def gather(seed: int) -> np.ndarray:
        offsets = table.offsets(seed, range(n))
        return es_gradient(returns, table.rows(offsets, range(n)), 0.02)

    def weighted(seed: int) -> np.ndarray:
        offsets = table.offsets(seed, range(n))
        return table.weighted_sum(returns, offsets, range(n)) / (0.02 * n)

    return {
        "seeded batch": seeded_batch,
        "seeded per row": seeded_rows,
        "table gather": gather,
        "table weighted sum": weighted,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dims", type=int, nargs="+", default=[4614, 100_000])
    p.add_argument("--rows", type=int, default=40, help="rows per update (episodes_per_batch)")
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--table-size", type=int, default=2**24)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    date = datetime.date.today().isoformat()
    out = args.out or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "measurements", "es_noise_table", f"{date}.jsonl"
    )
    machine, code = Machine.this(), git_commit()
    noise = make_noise(args.table_size, seed=0)
    n = args.rows
    returns = np.linspace(-0.5, 0.5, n)
    for dim in args.dims:
        sampler = make_sampler("antithetic", dim)
        table = NoiseTable(noise, dim, antithetic=True)

        paths = _paths(sampler, table, returns, n)
        gather, weighted = paths["table gather"], paths["table weighted sum"]
        np.testing.assert_allclose(gather(1), weighted(1), rtol=1e-3, atol=1e-4)  # the same estimate
        for path, fn in paths.items():
            fn(0)  # warm-up
            walls, cpus = [], []
            for repeat in range(args.repeats):
                w0, c0 = time.perf_counter(), time.process_time()
                for u in range(args.updates):
                    fn(1000 * repeat + u + 1)
                walls.append(1e3 * (time.perf_counter() - w0) / (args.updates * n))
                cpus.append(1e3 * (time.process_time() - c0) / (args.updates * n))
                append_measurement(
                    out,
                    {
                        "benchmark": "es_noise_table",
                        "code": code,
                        "dim": dim,
                        "path": path,
                        "rows": n,
                        "updates": args.updates,
                        "table_size": args.table_size,
                        "repeat": repeat,
                        "wall_ms_per_row": walls[-1],
                        "cpu_ms_per_row": cpus[-1],
                        "machine": {"cores": machine.cores, "description": machine.description},
                        "date": date,
                    },
                )
            print(
                f"d={dim:6d} {path:18s}: wall {statistics.median(walls):8.4f} ms/row, "
                f"CPU {statistics.median(cpus):8.4f} ms/row",
                flush=True,
            )


if __name__ == "__main__":
    main()
