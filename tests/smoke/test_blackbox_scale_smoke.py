"""benchmarks/blackbox_scale.py's measurement on the session's Ray: the public metrics it reads exist.

The benchmark's own ``ray.cluster_utils.Cluster`` is not started here: a process holds one Ray
connection, and the session's Ray is shared by every smoke test (``ray_session``). The script's
``--dry-run`` covers the cluster path outside pytest.
"""

from __future__ import annotations

import math

from benchmarks import blackbox_scale


def test_measure_reads_the_public_metrics(ray_session):
    args = blackbox_scale.parse_args(["--seconds", "1", "--step-sleep-s", "0.001", "--min-len", "2", "--max-len", "6"])
    row = blackbox_scale.measure("DFD_EXT", 1, args, args.extra, blackbox_scale.mem_available_gb())
    assert row["results"] > 0 and row["updates"] > 0 and row["iterations"] >= 1
    for key in ("worker_utilization", "useful_utilization", "updates_per_s", "driver_cpu_per_result_ms", "r_sat"):
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
    assert 0 < row["worker_utilization"] <= 1.05
    assert row["runner_pss_mb"] > 0
