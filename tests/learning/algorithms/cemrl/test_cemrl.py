"""CEMRL_EXT learns Pendulum-v1 in 10,000 env steps (5 generations of 10): the short learning test of ``make test``.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["CEMRL_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 -126.0, -345.4, -121.5, -165.2, -110.0
(worst w = -345.4); untrained -1142.6, -1509.1, -1576.9, -1164.8, -1135.0
(best b = -1135.0); THRESHOLD = b + 0.5 (w - b) = -740.2
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms CEMRL_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = -740.2


def test_learns(ray_session):
    check_learns("CEMRL_EXT", THRESHOLD)
