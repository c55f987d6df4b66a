"""ARS_EXT learns the continuous variable-length task (10-step episodes) in 6,000 env steps: the
short learning test of ``make test``; zero-initialised linear policy, so "untrained" is 5.0 exactly.

The run, its seed (0) and the evaluation are ``tests/learning/short_runs.py``'s ``SHORT_RUNS["ARS_EXT"]``.
THRESHOLD is that module's rule (halfway between the best untrained evaluation return and the worst
calibrated seed) over the rows in benchmarks/results/measurements/learning_calibration/ (seeds 0-4,
this test's seed among them; ``tests/learning/test_short_runs.py`` checks the two agree):
final returns of seeds 0-4 8.6, 8.9, 8.1, 7.7, 7.8
(worst w = 7.7); untrained 5.0, 5.0, 5.0, 5.0, 5.0
(best b = 5.0); THRESHOLD = b + 0.5 (w - b) = 6.3
(2026-11-28, commit 224a838, 2-core VM shared with other sessions). Reproduce:
``.venv/bin/python -m benchmarks.learning_calibration --algorithms ARS_EXT``, then ``--thresholds``.
"""

from __future__ import annotations

from tests.learning.short_runs import check_learns

THRESHOLD = 6.3


def test_learns(ray_session):
    check_learns("ARS_EXT", THRESHOLD)
