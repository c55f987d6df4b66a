"""The transition buffer as a Ray actor, written and read from other processes."""

from __future__ import annotations

import numpy as np

from rllib_ext.common.offpolicy.transitions import ReplayActor
from tests.replay_data import transition_rows


def test_replay_actor_across_processes(ray_session):
    ray = ray_session
    replay = ReplayActor.remote(100, 2, 1, seed=0)

    @ray.remote(num_cpus=0)
    def writer(actor, rows):  # self-contained: the test module is not importable in workers
        import ray

        return ray.get(actor.add.remote(*rows))

    @ray.remote(num_cpus=0)
    def reader(actor):
        import ray

        return ray.get(actor.sample.remote(4, 3))

    assert ray.get(writer.remote(replay, transition_rows(0, 10))) == 10
    assert ray.get(writer.remote(replay, transition_rows(100, 10))) == 20
    s = ray.get(reader.remote(replay))
    assert s["obs"].shape == (3, 4, 2)
    assert set(np.unique(s["rewards"])) <= set(range(10)) | set(range(100, 110))
    assert ray.get(replay.size.remote()) == 20 and ray.get(replay.get_state.remote())["num_added"] == 20
    ray.kill(replay)
