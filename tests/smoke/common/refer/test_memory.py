"""The replay memory as a Ray actor."""

from __future__ import annotations

import numpy as np

from rllib_ext.common.refer.memory import ReplayMemory
from tests.replay_data import replay_episode


def test_replay_memory_as_ray_actor(ray_session):
    import ray

    Remote = ray.remote(num_cpus=0)(ReplayMemory)
    actor = Remote.remote(capacity=50, gamma=0.9, seed=0)
    rng = np.random.default_rng(7)
    for T in (10, 20):
        ray.get(actor.add_episode.remote(**replay_episode(T, rng)))
    assert ray.get(actor.__len__.remote()) == 30
    batch = ray.get(actor.sample.remote(16))
    ray.get(actor.write_back.remote(batch["idx"], rho=np.full(16, 10.0), values=np.zeros(16)))
    assert 0 < ray.get(actor.far_fraction.remote(2.0)) <= 16 / 30
    ray.kill(actor)
