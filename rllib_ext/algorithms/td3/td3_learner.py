"""The Learner side of TD3_EXT: replay, the update schedule, metrics and checkpoint state.

:meth:`TD3Learner.td3_train` receives the env runners' episode chunks, stores their
transitions in a :class:`~rllib_ext.common.offpolicy.transitions.TransitionBuffer` (capacity
``replay_capacity``), and takes ``updates_per_env_step`` TD3 iterations per env step stored
once ``initial_steps`` env steps have been seen (TD3's "for t ≥ start_timesteps: train"),
never before the buffer holds one minibatch. All minibatches due in one call are drawn from
the buffer at once. The iteration itself (:meth:`_td3_update`) is the torch learner's
(``torch/td3_torch_learner.py``, through :class:`~rllib_ext.common.offpolicy.td3.TD3Updater`).

Checkpoints (:meth:`get_state`, key ``"td3"``): the env-step and update counters, the update
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
from ray.rllib.utils.typing import StateDict

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


class TD3Learner(Learner):
    """Owns the replay buffer and the update schedule (module docstring); the torch learner
    implements :meth:`_td3_update` (one TD3 iteration on one minibatch)."""

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

    def td3_train(self, episodes: list) -> dict[str, Any]:
        """Stores the chunks' transitions and takes the TD3 iterations they make due.

        Args:
            episodes: Episode chunks (``SingleAgentEpisode``) from the env runners.

        Returns:
            ``results`` (this Learner's reduced metrics) and ``num_updates`` (of this call).
        """
        c = self.config
        t = transitions_from_episodes(episodes)
        n = len(t["rewards"]) if t else 0
        if n:
            self.replay.add(**t)
        before, self._env_steps = self._env_steps, self._env_steps + n
        if len(self.replay) >= c.train_batch_size_per_learner:  # TD3: train once t >= start_timesteps
            self._credit += max(0, self._env_steps - max(before, c.initial_steps)) * c.updates_per_env_step
        due = int(self._credit)
        if due > 0:
            self._credit -= due
            batches = self.replay.sample(c.train_batch_size_per_learner, num_batches=due)
            stats = [self._td3_update({k: v[i] for k, v in batches.items()}) for i in range(due)]
            self._num_updates += due
            self._weights_seq_no += 1  # the env runners' actor is out of date
            keys = {k for s in stats for k in s}  # actor_loss: only on the delayed iterations
            means = {k: float(np.mean([s[k] for s in stats if k in s])) for k in keys}
            # "item": the Algorithm's logger keeps the latest call's value (window=1 means do not
            # merge that way across several training_step calls per iteration).
            self.metrics.log_dict(means, key=DEFAULT_MODULE_ID, reduce="item")
        m = self.metrics
        m.log_value((ALL_MODULES, REPLAY_SIZE_KEY), len(self.replay), reduce="item")
        m.log_value((ALL_MODULES, NUM_UPDATES_KEY), self._num_updates, reduce="item")
        m.log_value((ALL_MODULES, ENV_STEPS_STORED_KEY), self._env_steps, reduce="item")
        return {"results": m.reduce(), "num_updates": due}

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

    def _extra_state(self) -> dict[str, Any]:
        """Algorithm-specific state beyond the counters kept here (the updater's)."""
        return {}

    def _set_extra_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`_extra_state`'s output."""

    @override(Learner)
    def get_state(self, components=None, *, not_components=None, **kwargs) -> StateDict:
        """RLlib's learner state plus ``"td3"``: counters, credit, updater state, optional replay."""
        state = super().get_state(components, not_components=not_components, **kwargs)
        if self._check_component(STATE_KEY, components, not_components):
            state[STATE_KEY] = {
                "env_steps": self._env_steps,
                "num_updates": self._num_updates,
                "credit": self._credit,
                **self._extra_state(),
            }
            if self.config.checkpoint_replay:
                state[STATE_KEY]["replay"] = self.replay.get_state()
        return state

    @override(Learner)
    def set_state(self, state: StateDict) -> None:
        """Restores :meth:`get_state`'s output (without ``replay`` the buffer starts empty)."""
        super().set_state(state)
        s = state.get(STATE_KEY)
        if s is not None:
            self._env_steps = int(s["env_steps"])
            self._num_updates = int(s["num_updates"])
            self._credit = float(s["credit"])
            self._set_extra_state(s)
            if "replay" in s:
                self.replay.set_state(s["replay"])
