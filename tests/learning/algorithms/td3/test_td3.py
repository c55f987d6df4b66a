"""TD3_EXT learns Pendulum-v1 in 8,000 env steps (1,000 of them random): the short learning test of ``make test``.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["TD3_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 -129.2, -171.2, -266.8, -192.5, -165.7
(worst w = -266.8); untrained -1234.8, -1369.3, -1687.6, -1169.8, -1236.5
(best b = -1169.8); THRESHOLD = b + 0.5 (w - b) = -718.3
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms TD3_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = -718.3


def test_learns(ray_session):
    check_learns("TD3_EXT", THRESHOLD)
