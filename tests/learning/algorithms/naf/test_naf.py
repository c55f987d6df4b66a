"""NAF_EXT learns Pendulum-v1 in 12,000 env steps (N_start 1,000): the short learning test of ``make test``.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["NAF_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 -417.8, -385.2, -632.0, -639.7, -346.0
(worst w = -639.7); untrained -1143.5, -1131.4, -1317.9, -1357.7, -1228.7
(best b = -1131.4); THRESHOLD = b + 0.5 (w - b) = -885.6
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms NAF_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = -885.6


def test_learns(ray_session):
    check_learns("NAF_EXT", THRESHOLD)
