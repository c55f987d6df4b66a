"""Whole episodes from RLlib episode chunks, for :class:`~rllib_ext.common.refer.memory.ReplayMemory`.

RLlib's ``SingleAgentEnvRunner.sample()`` returns episode *chunks*: an episode that is still
running at the end of a call continues (same ``id_``) in the next call's output, its first
observation repeating the previous chunk's last one. The paper's memory stores whole episodes
(targets are computed per episode, eviction is by episode), so chunks are held here until
their episode is done.

An episode whose env runner died (or was restarted) never gets its final chunk. Such an
episode is dropped once ``max_idle_calls`` calls of :meth:`add` have brought none of its
chunks (with synchronous sampling every healthy runner's ongoing episodes continue in every
call), logged and counted in :attr:`num_dropped_episodes` / :attr:`num_dropped_steps`, so
that unfinished episodes do not accumulate over a long run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from ray.rllib.core.columns import Columns

if TYPE_CHECKING:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

__all__ = ["EpisodeAssembler"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Pending:
    """The chunks of one episode not done yet: their arrays, its newest observation, the call that brought it."""

    obs: list[np.ndarray] = dataclasses.field(default_factory=list)
    actions: list[np.ndarray] = dataclasses.field(default_factory=list)
    rewards: list[np.ndarray] = dataclasses.field(default_factory=list)
    mu: list[np.ndarray] = dataclasses.field(default_factory=list)
    last_obs: np.ndarray | None = None
    last_call: int = 0


class EpisodeAssembler:
    """Collects chunks per episode id and returns each episode once it is done.

    Each returned episode is a dict with ``obs`` [T+1, d_S], ``actions`` [T, d_A], ``rewards``
    [T], ``mu`` [T, d_μ] (the behaviour's ``action_dist_inputs``) and ``terminated`` (bool),
    the arguments of :meth:`ReplayMemory.add_episode`.
    """

    def __init__(self, max_idle_calls: int = 100):
        if max_idle_calls < 1:
            raise ValueError(f"max_idle_calls must be >= 1, got {max_idle_calls}")
        self.max_idle_calls = int(max_idle_calls)
        self._pending: dict[str, _Pending] = {}
        self._calls = 0
        self.num_dropped_episodes = 0
        self.num_dropped_steps = 0

    @property
    def num_pending_steps(self) -> int:
        """Steps of episodes not done yet."""
        return sum(sum(len(a) for a in p.actions) for p in self._pending.values())

    def add(self, chunks: Iterable[SingleAgentEpisode]) -> list[dict[str, np.ndarray | bool]]:
        """Adds chunks (``SingleAgentEpisode``); returns the episodes they complete."""
        self._calls += 1
        done = []
        for chunk in chunks:
            if len(chunk) == 0:
                if chunk.is_done and chunk.id_ in self._pending:
                    done.append(self._finish(chunk.id_, chunk.is_terminated))
                continue
            obs = np.asarray(chunk.get_observations(), dtype=np.float32)
            p = self._pending.setdefault(chunk.id_, _Pending())
            p.obs.append(obs[:-1])
            p.last_obs = obs[-1]
            p.actions.append(np.asarray(chunk.get_actions(), dtype=np.float32))
            p.rewards.append(np.asarray(chunk.get_rewards(), dtype=np.float64))
            p.mu.append(np.asarray(chunk.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS), dtype=np.float32))
            p.last_call = self._calls
            if chunk.is_done:
                done.append(self._finish(chunk.id_, chunk.is_terminated))
        self._drop_orphans()
        return done

    def _drop_orphans(self) -> None:
        """Drops (logged, counted) the episodes no chunk has continued for ``max_idle_calls`` calls."""
        for episode_id in [e for e, p in self._pending.items() if self._calls - p.last_call >= self.max_idle_calls]:
            steps = sum(len(a) for a in self._pending.pop(episode_id).actions)
            self.num_dropped_episodes += 1
            self.num_dropped_steps += steps
            logger.warning(
                "rllib_ext: episode %s (%d steps) got no chunk for %d sampling calls (its env runner "
                "was lost?); dropped unfinished (%d so far)",
                episode_id,
                steps,
                self.max_idle_calls,
                self.num_dropped_episodes,
            )

    def _finish(self, episode_id: str, terminated: bool) -> dict[str, np.ndarray | bool]:
        p = self._pending.pop(episode_id)
        if p.last_obs is None:
            raise AssertionError(f"episode {episode_id} finished without a chunk of steps")
        return {
            "obs": np.concatenate(p.obs + [p.last_obs[None]]),
            "actions": np.concatenate(p.actions),
            "rewards": np.concatenate(p.rewards),
            "mu": np.concatenate(p.mu),
            "terminated": bool(terminated),
        }
