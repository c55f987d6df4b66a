"""DDPG_EXT learns Pendulum-v1 in 12,000 env steps (N_start 1,000): the short learning test of ``make test``.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["DDPG_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 -556.4, -401.5, -701.4, -677.4, -353.8
(worst w = -701.4); untrained -1197.7, -1234.9, -1306.0, -1276.0, -1225.8
(best b = -1197.7); THRESHOLD = b + 0.5 (w - b) = -949.6
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms DDPG_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = -949.6


def test_learns(ray_session):
    check_learns("DDPG_EXT", THRESHOLD)
