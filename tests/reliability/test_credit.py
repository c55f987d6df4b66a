"""Credit after a runner loss (issue 22, review B1): every return an update uses was measured at the θ
it is credited to, also when the calls of a killed env runner are re-sent to another runner.

The driver records θ of every version it publishes and every result an update uses; one of two
env runners is killed with calls in flight. Each used result carries the digest of the θ its
runner held (``EpisodeResult.theta_digest``); it must equal the digest of θ_{version}. Before the
typed protocol a re-sent call ran with the newest θ under its old version label.
"""

from __future__ import annotations

import time

import pytest
import ray

from rllib_ext.common.blackbox.protocol import theta_digest
from tests.reliability.helpers import VAR_ENV, small_config

SLOW_EPISODES = {"min_len": 5, "max_len": 10, "step_sleep_s": 0.004}  # 20–40 ms: calls are in flight when killed


def _record(algo, name):
    """Wraps the driver: θ of each published version, the results each update uses, the lost calls."""
    thetas, used, lost = {}, [], []
    publish = algo.pool.publish

    def recording_publish(version, payload):
        thetas[version] = payload.theta.copy()
        publish(version, payload)

    algo.pool.publish = recording_publish
    algo.publish()  # record the current version too

    lose = algo.pool._lose_runner

    def recording_lose(rid):
        calls = algo.pool._in_flight.get(rid, {})
        lost.extend((job.version, algo.pool.version) for sent in calls.values() for job in sent.call.jobs)
        lose(rid)

    algo.pool._lose_runner = recording_lose
    if name == "DFD_EXT":
        take = algo.returns.take_batch

        def recording_take(u):
            batch = take(u)
            used.extend(batch)
            return batch

        algo.returns.take_batch = recording_take
    else:
        estimate = algo.estimate_gradient

        def recording_estimate(seed, rows):
            used.extend(rows)
            return estimate(seed, rows)

        algo.estimate_gradient = recording_estimate
    return thetas, used, lost


@pytest.mark.parametrize("name", ["DFD_EXT", "ES_EXT"])
def test_requeued_jobs_are_credited_to_the_theta_they_ran_with(ray_session, name):
    config = small_config(name, env=VAR_ENV, env_config=SLOW_EPISODES, num_env_runners=2)
    config.training(episodes_per_batch=2, perturbations_per_call=1, jobs_in_flight_per_env_runner=2)
    algo = config.build_algo()
    try:
        thetas, used, lost = _record(algo, name)
        algo.train()
        group = algo.env_runner_group
        victim = group.healthy_worker_ids()[0]
        ray.kill(group._worker_manager._actors[victim], no_restart=False)
        deadline = time.time() + 90
        while not lost and time.time() < deadline:
            algo.train()
        for _ in range(3):  # the re-sent calls come back and are used
            algo.train()
        assert lost, "the killed runner's calls were never re-queued"
        if name == "DFD_EXT":  # the case the old bug needed: a call re-sent after θ moved on
            assert any(version < newest for version, newest in lost), lost
        assert algo.pool.num_credit_mismatches == 0
        assert used
        wrong = [(r.id, r.version) for r in used if r.theta_digest != theta_digest(thetas[r.version])]
        assert not wrong, f"results credited to a θ they were not measured at: {wrong}"
    finally:
        algo.stop()
