"""TD3_EXT's RLModule: the App. A actor of paper 001, and on the Learner the twin critics and targets.

* ``actor``: :func:`~rllib_ext.common.offpolicy.td3.make_actor` — an
  :class:`~rllib_ext.common.policies.MLPPolicy` (400 → tanh → 300 → tanh → tanh output mapped
  onto ``[low, high]``). Actions are in the env's units (``normalize_actions`` is off).
* Learner side only (:class:`InferenceOnlyAPI`: env runners get and build just the actor):
  ``critic`` (:class:`~rllib_ext.common.offpolicy.td3.TwinCritic`), ``actor_target``, ``critic_target``
  (copies at construction, as in TD3's Algorithm 1). The Learner trains them through
  :class:`~rllib_ext.common.offpolicy.td3.TD3Updater`.

Forward passes:
* inference (``explore=False``, evaluation): a = π(s);
* exploration: a = clip(π(s) + action_noise·half·N(0, I), low, high) (TD3's exploration,
  paper 001 Algorithm 2's a_noise = 0.1, with half the action half-range).

The ``initial_steps`` of uniform random actions are not drawn here: the module only sees its
own env runner's (approximate) step count, while the driver knows the exact lifetime count of
all runners, so :meth:`TD3.training_step <rllib_ext.algorithms.td3.td3.TD3.training_step>`
samples with RLlib's ``random_actions=True`` until it is reached.

model_config keys: ``fcnet_hiddens``, the hidden sizes of the actor and of each critic
([400, 300], App. A), and ``action_noise`` (0.1; set from
:class:`~rllib_ext.algorithms.td3.td3.TD3Config`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override

from rllib_ext.common.offpolicy.td3 import PAPER_HIDDENS, TwinCritic, make_actor

#: Module attributes that only the Learner holds.
LEARNER_ONLY = ("critic", "actor_target", "critic_target")


class TD3TorchRLModule(TorchRLModule, InferenceOnlyAPI):
    """Deterministic actor with Gaussian exploration; critics and targets on the Learner."""

    @override(TorchRLModule)
    def setup(self):
        """The actor, and unless ``inference_only`` the twin critics and both targets."""
        cfg = self.model_config or {}
        self.hiddens = tuple(int(h) for h in cfg.get("fcnet_hiddens", PAPER_HIDDENS))
        self.action_noise = float(cfg.get("action_noise", 0.1))
        self.obs_dim = int(np.prod(self.observation_space.shape))
        self.act_dim = int(np.prod(self.action_space.shape))
        self.actor = make_actor(self.obs_dim, self.action_space, self.hiddens)
        if not self.inference_only:
            self.critic = TwinCritic(self.obs_dim, self.act_dim, self.hiddens)
            self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
            self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)

    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        """The critics and the targets (the env runners need only the actor)."""
        return list(LEARNER_ONLY)

    def _obs(self, batch: dict[str, Any]) -> torch.Tensor:
        obs = batch[Columns.OBS]
        return obs.reshape(obs.shape[0], -1).float()

    @override(TorchRLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """a = π(s) in env units."""
        return {Columns.ACTIONS: self.actor.deterministic_action(self._obs(batch))}

    @override(TorchRLModule)
    def _forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """a = clip(π(s) + σ·half·ε, low, high), ε ~ N(0, I), σ = ``action_noise``."""
        with torch.no_grad():
            action = self.actor.deterministic_action(self._obs(batch))
            half, center = self.actor._half, self.actor._center
            action = action + self.action_noise * half * torch.randn_like(action)
            return {Columns.ACTIONS: torch.maximum(torch.minimum(action, center + half), center - half)}
