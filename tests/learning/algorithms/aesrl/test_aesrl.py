"""AESRL_EXT learns Pendulum-v1 in 15,000 env steps: the short learning test of ``make test``.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["AESRL_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 -149.0, -977.5, -651.6, -231.0, -116.8
(worst w = -977.5); untrained -1142.6, -1509.1, -1576.9, -1164.8, -1135.0
(best b = -1135.0); THRESHOLD = b + 0.5 (w - b) = -1056.3
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms AESRL_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = -1056.3


def test_learns(ray_session):
    check_learns("AESRL_EXT", THRESHOLD)
