"""The episode assembler joins fragments into whole episodes."""

from __future__ import annotations

import numpy as np


def test_episode_assembler_joins_chunks_into_whole_episodes():
    from ray.rllib.core.columns import Columns
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from rllib_ext.common.refer.episodes import EpisodeAssembler

    def chunk(ep_id, t0, n, done):
        e = SingleAgentEpisode(id_=ep_id, observations=[np.array([t0], np.float32)])
        for t in range(t0, t0 + n):
            e.add_env_step(
                np.array([t + 1], np.float32),
                np.array([0.1 * t], np.float32),
                float(t),
                extra_model_outputs={Columns.ACTION_DIST_INPUTS: np.array([t, -1.0], np.float32)},
                terminated=done and t == t0 + n - 1,
            )
        return e

    asm = EpisodeAssembler()
    assert asm.add([chunk("a", 0, 3, False), chunk("b", 0, 2, True)])[0]["actions"].shape == (2, 1)
    assert asm.num_pending_steps == 3
    (ep,) = asm.add([chunk("a", 3, 2, True)])
    np.testing.assert_array_equal(ep["obs"][:, 0], np.arange(6))  # s_0..s_5, no repeated state
    np.testing.assert_array_equal(ep["rewards"], np.arange(5))
    np.testing.assert_array_equal(ep["mu"][:, 0], np.arange(5))
    assert ep["terminated"] and asm.num_pending_steps == 0

    # An episode whose runner died (no chunk for max_idle_calls calls) is dropped and counted;
    # one that keeps getting chunks stays, however many calls it spans.
    asm = EpisodeAssembler(max_idle_calls=3)
    asm.add([chunk("orphan", 0, 4, False), chunk("long", 0, 1, False)])
    for t in range(1, 3):
        assert asm.add([chunk("long", t, 1, False)]) == [] and asm.num_dropped_episodes == 0
    asm.add([chunk("long", 3, 1, False)])  # third call without "orphan"
    assert (asm.num_dropped_episodes, asm.num_dropped_steps, asm.num_pending_steps) == (1, 4, 4)
    (ep,) = asm.add([chunk("long", 4, 1, True)])
    assert len(ep["actions"]) == 5 and asm.num_dropped_episodes == 1
