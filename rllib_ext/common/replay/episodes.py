"""Whole episodes from RLlib episode chunks, for :class:`~rllib_ext.common.replay.ReplayMemory`.

RLlib's ``SingleAgentEnvRunner.sample()`` returns episode *chunks*: an episode that is still
running at the end of a call continues (same ``id_``) in the next call's output, its first
observation repeating the previous chunk's last one. The paper's memory stores whole episodes
(targets are computed per episode, eviction is by episode), so chunks are held here until
their episode is done.
"""

from __future__ import annotations

from typing import Dict, Iterable, List

import numpy as np
from ray.rllib.core.columns import Columns

__all__ = ["EpisodeAssembler"]


class EpisodeAssembler:
    """Collects chunks per episode id and returns each episode once it is done.

    Each returned episode is a dict with ``obs`` [T+1, d_S], ``actions`` [T, d_A], ``rewards``
    [T], ``mu`` [T, d_μ] (the behaviour's ``action_dist_inputs``) and ``terminated`` (bool),
    the arguments of :meth:`ReplayMemory.add_episode`.
    """

    def __init__(self):
        self._pending: Dict[str, Dict[str, list]] = {}

    @property
    def num_pending_steps(self) -> int:
        """Steps of episodes not done yet."""
        return sum(sum(len(a) for a in p["actions"]) for p in self._pending.values())

    def add(self, chunks: Iterable) -> List[Dict[str, np.ndarray]]:
        """Adds chunks (``SingleAgentEpisode``); returns the episodes they complete."""
        done = []
        for chunk in chunks:
            if len(chunk) == 0:
                if chunk.is_done and chunk.id_ in self._pending:
                    done.append(self._finish(chunk.id_, chunk.is_terminated))
                continue
            obs = np.asarray(chunk.get_observations(), dtype=np.float32)
            p = self._pending.setdefault(chunk.id_, {"obs": [], "actions": [], "rewards": [], "mu": []})
            p["obs"].append(obs[:-1])
            p["last_obs"] = obs[-1]
            p["actions"].append(np.asarray(chunk.get_actions(), dtype=np.float32))
            p["rewards"].append(np.asarray(chunk.get_rewards(), dtype=np.float64))
            p["mu"].append(np.asarray(chunk.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS), dtype=np.float32))
            if chunk.is_done:
                done.append(self._finish(chunk.id_, chunk.is_terminated))
        return done

    def _finish(self, episode_id: str, terminated: bool) -> Dict[str, np.ndarray]:
        p = self._pending.pop(episode_id)
        return {
            "obs": np.concatenate(p["obs"] + [p["last_obs"][None]]),
            "actions": np.concatenate(p["actions"]),
            "rewards": np.concatenate(p["rewards"]),
            "mu": np.concatenate(p["mu"]),
            "terminated": bool(terminated),
        }
