"""TD3_EXT's loss and update (Fujimoto et al. 2018, Algorithm 1), via :mod:`rllib_ext.common.offpolicy.td3`.

Per iteration on a minibatch of B transitions (:class:`~rllib_ext.common.offpolicy.td3.TD3Updater`):

* critics: y = r + γ(1 − d)·min_i Q_θi'(s', ã), ã = clip(π_φ'(s') + clip(0.2·half·ε, ±0.5·half),
  low, high) (clipped double Q-learning, Eq. 10; target policy smoothing, §5.3);
  L = MSE(Q_θ1(s, a), y) + MSE(Q_θ2(s, a), y) (:func:`~rllib_ext.common.offpolicy.td3.td3_critic_loss`);
* every ``policy_delay``-th iteration (§5.2): the actor on −Q_θ1(s, π_φ(s))
  (:func:`~rllib_ext.common.offpolicy.td3.td3_actor_loss`, the critics held fixed), then the soft
  updates θ' ← τθ + (1 − τ)θ', φ' ← τφ + (1 − τ)φ'.

The actor and the critics have one Adam each (``actor_lr``, ``critic_lr``), registered with
RLlib so that its learner state (and checkpoints) carries them. The critic step and the actor
step are separate backward passes, as in TD3 (the actor sees the just-updated critic), so the
iteration runs through the updater instead of RLlib's one-loss ``Learner.update``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.td3.td3_learner import TD3Learner
from rllib_ext.common.offpolicy.td3 import TD3Updater
from rllib_ext.common.threads import TorchThreadsLearner

#: The updater's counters and noise generator, kept in checkpoints next to RLlib's state.
_UPDATER_STATE_KEYS = ("num_updates", "num_critic_steps", "num_actor_steps", "generator", "generator_device")


class TD3TorchLearner(TorchThreadsLearner, TD3Learner, TorchLearner):
    """Runs TD3 iterations on the RLModule's networks through a :class:`TD3Updater`."""

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """A TD3Updater on the module's networks; its two Adams registered with RLlib."""
        module = self.module[module_id].unwrapped()
        updater = TD3Updater(
            module.obs_dim,
            module.action_space,
            hiddens=module.hiddens,
            actor_lr=config.actor_lr,
            critic_lr=config.critic_lr,
            gamma=config.gamma,
            tau=config.tau,
            policy_noise=config.policy_noise,
            noise_clip=config.noise_clip,
            policy_delay=config.policy_delay,
            seed=config.seed,
            optimizer=config.optimizer,
            optimizer_kwargs=config.optimizer_kwargs,
            actor=module.actor,
            critic=module.critic,
            actor_target=module.actor_target,
            critic_target=module.critic_target,
            device=self.device,  # the learner's (a GPU with num_gpus_per_learner): batches and noise go there
        )
        self.updaters = getattr(self, "updaters", {})
        self.updaters[module_id] = updater
        for name, optimizer, net in (
            ("actor", updater.actor_optimizer, module.actor),
            ("critic", updater.critic_optimizer, module.critic),
        ):
            self.register_optimizer(
                module_id=module_id, optimizer_name=name, optimizer=optimizer, params=list(net.parameters())
            )

    @override(TD3Learner)
    def _td3_update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        (updater,) = self.updaters.values()
        stats = updater.update(batch)
        stats["q_mean"] = 0.5 * (stats.pop("q1_mean") + stats.pop("q2_mean"))
        return stats

    @override(TorchLearner)
    def compute_loss_for_module(
        self, *, module_id, config, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        """Not used: a TD3 iteration is two backward passes (critic, then actor), see the module docstring."""
        raise NotImplementedError("TD3_EXT updates through TD3Learner.train_on_episodes, not Learner.update")

    @override(TD3Learner)
    def _counter_state(self) -> dict[str, Any]:
        state = {mid: u.get_state() for mid, u in self.updaters.items()}
        updaters = {mid: {k: s[k] for k in _UPDATER_STATE_KEYS} for mid, s in state.items()}
        return {**super()._counter_state(), "updaters": updaters}

    @override(TD3Learner)
    def _set_counter_state(self, state: dict[str, Any]) -> None:
        super()._set_counter_state(state)
        for mid, s in state.get("updaters", {}).items():
            self.updaters[mid].set_state(s)
