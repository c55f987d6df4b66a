"""The replay-learner base TD3_EXT's and the ReF-ER family's Learners share, and its update report.

A :class:`ReplayLearner` owns a replay store and the schedule of updates on it. The driver
(:class:`~rllib_ext.common.offpolicy.algorithm.OffPolicyAlgorithm`) hands it the env runners'
episode chunks through :meth:`ReplayLearner.train_on_episodes`, which runs one template:

1. :meth:`~ReplayLearner._store`: the chunks enter the replay; returns how many updates they
   make due (TD3: ``updates_per_env_step`` per env step after ``initial_steps``; ReF-ER: one per
   F env steps once the memory holds N_start);
2. :meth:`~ReplayLearner._take_updates`: takes those updates (the family's loss and bookkeeping: TD3's
   delayed actor and target steps, ReF-ER's Eq. (8) write-back, β and c_max updates);
3. :meth:`~ReplayLearner._log_replay_metrics`: the family's metrics, under the keys it always had;

and answers with an :class:`UpdateReport`. Checkpoints: :meth:`get_state` adds the family's
counters under :attr:`~ReplayLearner.STATE_KEY` (hook :meth:`~ReplayLearner._counter_state`) and,
with ``checkpoint_replay``, the replay's contents under
:attr:`~ReplayLearner.REPLAY_STATE_KEY`; :meth:`set_state` restores both (without the
contents the replay starts empty).
"""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.typing import StateDict

from rllib_ext._compat import wants_component


@dataclass(frozen=True)
class UpdateReport:
    """What one :meth:`ReplayLearner.train_on_episodes` call tells the driver.

    Attributes:
        results: The Learner's reduced metrics (``MetricsLogger.reduce()``), aggregated by the
            driver under ``learners``.
        num_updates: Updates (TD3 iterations, ReF-ER gradient steps) this call took.
        weights_changed: Whether the env runners need new weights (an update, or a change of
            module state such as ReF-ER's state statistics).
    """

    results: dict[str, Any]
    num_updates: int
    weights_changed: bool


class ReplayLearner(Learner):
    """A Learner that owns a replay and updates on it as env steps arrive (module docstring).

    Subclasses set :attr:`replay` in ``build`` (anything with ``len``, ``get_state`` and
    ``set_state``) and implement :meth:`_store`, :meth:`_take_updates`, :meth:`_log_replay_metrics`,
    :meth:`_counter_state` and :meth:`_set_counter_state`.
    """

    #: The key of this family's state in the Learner's checkpoint state.
    STATE_KEY: ClassVar[str]
    #: The key of the replay's contents inside :attr:`STATE_KEY` (with ``checkpoint_replay``).
    REPLAY_STATE_KEY: ClassVar[str]

    replay: Any

    def train_on_episodes(self, episodes: list[Any]) -> UpdateReport:
        """Stores the chunks and takes the updates they make due.

        Args:
            episodes: Episode chunks (``SingleAgentEpisode``) from the env runners.

        Returns:
            This Learner's reduced metrics, the number of updates taken and whether the env
            runners need new weights.
        """
        self._weights_changed = False
        due = self._store(episodes)
        if due > 0:
            self._take_updates(due)
        self._log_replay_metrics()
        return UpdateReport(
            results=self.metrics.reduce(), num_updates=due, weights_changed=self._weights_changed or due > 0
        )

    @abc.abstractmethod
    def _store(self, episodes: list[Any]) -> int:
        """Adds the chunks' env steps to the replay; returns the number of updates now due (>= 0).

        An implementation sets ``self._weights_changed = True`` when it changes what the env
        runners act with without an update.
        """

    @abc.abstractmethod
    def _take_updates(self, num_updates: int) -> None:
        """Takes ``num_updates`` (> 0) updates on minibatches from the replay."""

    @abc.abstractmethod
    def _log_replay_metrics(self) -> None:
        """Logs the family's metrics for this call (before the Learner's metrics are reduced)."""

    @abc.abstractmethod
    def _counter_state(self) -> dict[str, Any]:
        """The family's checkpointed state other than the replay's contents."""

    @abc.abstractmethod
    def _set_counter_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`_counter_state`'s output."""

    @override(Learner)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> StateDict:
        """RLlib's learner state plus :attr:`STATE_KEY`: counters, and the replay with ``checkpoint_replay``."""
        state = super().get_state(components, not_components=not_components, **kwargs)
        if wants_component(self, self.STATE_KEY, components, not_components):
            state[self.STATE_KEY] = self._counter_state()
            if self.config.checkpoint_replay:  # type: ignore[attr-defined]  # the families' Configs have it
                state[self.STATE_KEY][self.REPLAY_STATE_KEY] = self.replay.get_state()
        return state

    @override(Learner)
    def set_state(self, state: StateDict) -> None:
        """Restores :meth:`get_state`'s output (without the replay's contents the replay starts empty)."""
        super().set_state(state)
        s = state.get(self.STATE_KEY)
        if s is not None:
            self._set_counter_state(s)
            if self.REPLAY_STATE_KEY in s:
                self.replay.set_state(s[self.REPLAY_STATE_KEY])
