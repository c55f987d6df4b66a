"""The Learner side of TD3_EXT: replay, the update schedule, metrics and checkpoint state.

:meth:`TD3Learner.train_on_episodes` (:class:`~rllib_ext.common.offpolicy.learner.ReplayLearner`'s
template) receives the env runners' episode chunks, stores their
transitions in a :class:`~rllib_ext.common.offpolicy.transitions.TransitionBuffer` (capacity
``replay_capacity``), and takes ``updates_per_env_step`` TD3 iterations per env step stored
once ``initial_steps`` env steps have been seen (TD3's "for t ≥ start_timesteps: train"),
never before the buffer holds one minibatch. All minibatches due in one call are drawn from
the buffer at once. The iteration itself (:meth:`_td3_update`) is the torch learner's
(``torch/td3_torch_learner.py``, through :class:`~rllib_ext.common.offpolicy.td3.TD3Updater`).

Checkpoints (the base's ``get_state``, key ``"td3"``): the env-step and update counters, the update
credit, the updater's counters and noise generator, and with ``checkpoint_replay`` the
buffer's contents. The weights, targets and optimizer states are RLlib's own learner state
(module and optimizer components).
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import ALL_MODULES

from rllib_ext.common.offpolicy.learner import ReplayLearner
from rllib_ext.common.offpolicy.transitions import TransitionBuffer

STATE_KEY = "td3"

REPLAY_SIZE_KEY = "replay_size"
NUM_UPDATES_KEY = "num_updates_lifetime"
ENV_STEPS_STORED_KEY = "num_env_steps_stored_lifetime"


def transitions_from_episodes(episodes: list) -> dict[str, np.ndarray]:
    """(s, a, r, s', terminated) arrays from RLlib episode chunks (``SingleAgentEpisode``).

    A chunk holds len+1 observations (its first repeats the previous chunk's last); only the
    last step of a terminated episode is terminal (a truncated one bootstraps).
    """
    parts = []
    for ep in episodes:
        n = len(ep)
        if n == 0:
            continue
        obs = np.asarray(ep.get_observations(), dtype=np.float32).reshape(n + 1, -1)
        terminateds = np.zeros(n, np.float32)
        terminateds[-1] = float(ep.is_terminated)
        parts.append(
            (
                obs[:-1],
                np.asarray(ep.get_actions(), dtype=np.float32).reshape(n, -1),
                np.asarray(ep.get_rewards(), dtype=np.float32),
                obs[1:],
                terminateds,
            )
        )
    keys = ("obs", "actions", "rewards", "next_obs", "terminateds")
    if not parts:
        return {}
    return {k: np.concatenate([p[i] for p in parts]) for i, k in enumerate(keys)}


class TD3Learner(ReplayLearner):
    """Owns the replay buffer and the update schedule (module docstring); the torch learner
    implements :meth:`_td3_update` (one TD3 iteration on one minibatch)."""

    STATE_KEY = STATE_KEY
    REPLAY_STATE_KEY = "replay"

    @override(Learner)
    def build(self) -> None:
        """RLlib's build, then the replay buffer and counters."""
        super().build()
        module = self.module[DEFAULT_MODULE_ID].unwrapped()
        self.replay = TransitionBuffer(
            self.config.replay_capacity, module.obs_dim, module.act_dim, seed=self.config.seed
        )
        self._env_steps = 0  # env steps stored, lifetime
        self._num_updates = 0
        self._credit = 0.0  # TD3 iterations due but not yet taken

    @override(ReplayLearner)
    def _store(self, episodes: list) -> int:
        """Stores the chunks' transitions; TD3 iterations are due per env step after ``initial_steps``."""
        c = self.config
        t = transitions_from_episodes(episodes)
        n = len(t["rewards"]) if t else 0
        if n:
            self.replay.add(**t)
        before, self._env_steps = self._env_steps, self._env_steps + n
        if len(self.replay) >= c.train_batch_size_per_learner:  # TD3: train once t >= start_timesteps
            self._credit += max(0, self._env_steps - max(before, c.initial_steps)) * c.updates_per_env_step
        due = int(self._credit)
        self._credit -= due
        return due

    @override(ReplayLearner)
    def _take_updates(self, num_updates: int) -> None:
        """``num_updates`` TD3 iterations on minibatches drawn at once; their statistics' means logged."""
        batches = self.replay.sample(self.config.train_batch_size_per_learner, num_batches=num_updates)
        stats = [self._td3_update({k: v[i] for k, v in batches.items()}) for i in range(num_updates)]
        self._num_updates += num_updates
        self._weights_seq_no += 1  # the env runners' actor is out of date
        keys = {k for s in stats for k in s}  # actor_loss: only on the delayed iterations
        means = {k: float(np.mean([s[k] for s in stats if k in s])) for k in keys}
        # "item": the Algorithm's logger keeps the latest call's value (window=1 means do not
        # merge that way across several training_step calls per iteration).
        self.metrics.log_dict(means, key=DEFAULT_MODULE_ID, reduce="item")

    @override(ReplayLearner)
    def _log_replay_metrics(self) -> None:
        """Replay size, TD3 iterations and env steps stored (lifetime)."""
        m = self.metrics
        m.log_value((ALL_MODULES, REPLAY_SIZE_KEY), len(self.replay), reduce="item")
        m.log_value((ALL_MODULES, NUM_UPDATES_KEY), self._num_updates, reduce="item")
        m.log_value((ALL_MODULES, ENV_STEPS_STORED_KEY), self._env_steps, reduce="item")

    @abc.abstractmethod
    def _td3_update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """One TD3 iteration on one minibatch (``obs, actions, rewards, next_obs, terminateds``).

        Returns:
            Its statistics (``critic_loss``, ``q_mean``, ...; ``actor_loss`` when the actor
            was updated), logged as means over the call under the module id.
        """

    @property
    def num_updates(self) -> int:
        """TD3 iterations taken so far."""
        return self._num_updates

    @override(ReplayLearner)
    def _counter_state(self) -> dict[str, Any]:
        """Env-step and update counters and the update credit (the torch learner adds its updater's)."""
        return {"env_steps": self._env_steps, "num_updates": self._num_updates, "credit": self._credit}

    @override(ReplayLearner)
    def _set_counter_state(self, state: dict[str, Any]) -> None:
        self._env_steps = int(state["env_steps"])
        self._num_updates = int(state["num_updates"])
        self._credit = float(state["credit"])
