"""No silent hang (issue 39 §2): a result the credit check refuses is re-run, never waited for forever.

The repro: an env runner answers with a wrong θ digest. Before, ES, CV-ES and ARS dropped such a
result and then waited for its row forever (nothing in flight, nothing queued, every runner
healthy). Now the row is re-run like any failed job and the runner is taken out of service until
RLlib's probe restores it: with one such runner among two the batch finishes; when every runner
does it, the update fails with an error naming the credit check within a bounded time. And the
watchdog itself: a loop that waits while nothing is in flight or queued raises an error naming
what it awaited.
"""

from __future__ import annotations

import pytest

from tests.reliability.helpers import small_config

SYNCHRONOUS = ["ES_EXT", "CVES_EXT", "ARS_EXT"]


def _corrupt_digests(algo, runner_ids) -> None:
    """Makes the given env runners report a θ digest that is not the one they ran with."""

    def corrupt(runner):
        evaluate = runner.evaluate

        def wrong_digest(job, explore):
            result = evaluate(job, explore)
            result.theta_digest ^= 0x5A5A
            return result

        runner.evaluate = wrong_digest
        return True

    assert all(algo.env_runner_group.foreach_env_runner(corrupt, remote_worker_ids=runner_ids, local_env_runner=False))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", SYNCHRONOUS)
def test_a_runner_with_a_wrong_digest_does_not_hang_the_batch(ray_session, name):
    algo = small_config(name, num_env_runners=2).build_algo()
    try:
        _corrupt_digests(algo, [algo.env_runner_group.healthy_worker_ids()[0]])
        for _ in range(3):
            result = algo.train()
        blackbox = result["blackbox"]
        assert blackbox["credit_mismatches_lifetime"] > 0
        assert blackbox["update_index"] == 3
        runners = result["env_runners"]
        assert runners["env_steps_wasted_lifetime"] > 0  # the refused results' steps are counted, as wasted
    finally:
        algo.stop()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", SYNCHRONOUS)
def test_every_runner_with_a_wrong_digest_fails_loudly(ray_session, name):
    algo = small_config(name, num_env_runners=2).build_algo()
    try:
        algo.no_runner_timeout_s = 5.0  # every runner is taken out of service: fail fast
        _corrupt_digests(algo, algo.env_runner_group.healthy_worker_ids())
        with pytest.raises(RuntimeError, match=r"\d+ result\(s\) by the credit check|credit mismatch"):
            algo.train()
    finally:
        algo.stop()


@pytest.mark.timeout(120)
def test_a_wait_with_nothing_in_flight_is_an_error_naming_what_it_awaited(ray_session):
    algo = small_config("ES_EXT", num_env_runners=1).build_algo()
    try:
        algo.idle_timeout_s = 0.5
        algo.submit_perturbations = lambda seed, n, indices=None: []  # a bug: rows never sent
        with pytest.raises(RuntimeError, match=r"waited \d+ s for 4 of 4 perturbation returns.*none can arrive"):
            algo.train()
    finally:
        algo.stop()
