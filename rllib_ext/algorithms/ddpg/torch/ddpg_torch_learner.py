"""DDPG's loss with ReF-ER (paper 003 Algorithm 4, Eq. 2-3, 10-11; App. A).

Per sampled step k with ρ_k = π^w(a_k|s_k)/μ_k(a_k|s_k), π^w = N(m^w(s_k), σ²I):

* critic (Eq. 2): q̂_k = r̂_{k+1} + γ Q^w̃'(s_{k+1}, m^w̃(s_{k+1})) with the target networks;
  L^Q_k = ½ (Q^w'(s_k, a_k) − q̂_k)², zeroed for far-policy steps (Rule 1), plus the L2 weight
  decay ½·λ·‖w'‖² (λ 1e-4, App. A; in the loss so that every optimizer of rllib_ext.optim gets it);
* policy (Eq. 3): L^DPG_k = −Q^w'(s_k, m^w(s_k)) (the critic's weights held fixed), zeroed for
  far-policy steps; ReF-ER: β·mean[near_k·L^DPG_k] + (1−β)·mean[D_KL(μ_k ‖ π^w)] (Algorithm 4:
  β and the penalty act on the policy-network only).

Two optimizers: the policy at ``actor_lr`` (1e-5) and the critic at ``critic_lr`` (1e-4), both
annealed with Eq. (13) in the ReF-ER modes. The target networks move by τ after each step.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.ddpg.ddpg_rl_module import DDPG_MEAN
from rllib_ext.common.refer.rules import refer_loss
from rllib_ext.common.refer.torch_learner import ReFERTorchLearner, StepOutputs, batch_metrics


class DDPGTorchLearner(ReFERTorchLearner):
    """Algorithm 4 (critic and DPG losses under ReF-ER), two optimizers."""

    LOSS_METRIC_NAMES = ("critic_loss", "actor_loss")

    @override(ReFERTorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """Policy network at ``actor_lr``, value network at ``critic_lr`` (App. A)."""
        module = self.module[module_id].unwrapped()
        self._register(module_id, "actor", self.get_parameters(module.actor), config.actor_lr, config)
        self._register(module_id, "critic", self.get_parameters(module.critic), config.critic_lr, config)

    @override(ReFERTorchLearner)
    def loss_terms(
        self,
        module_id: str,
        module: Any,
        config: Any,
        batch: dict[str, Any],
        fwd_out: dict[str, Any],
        beta: torch.Tensor | float,
        c_max: torch.Tensor | float,
    ) -> StepOutputs:
        """Critic loss (Eq. 2) + ReF-ER DPG loss (Eq. 3, 10, 11), Rule 1 on both."""
        obs, actions = batch[Columns.OBS], batch[Columns.ACTIONS]
        mean = fwd_out[DDPG_MEAN]
        rho, kl, near = self.rho_kl(batch, mean, torch.full_like(mean, module.sigma), c_max)
        refer = self.refer
        weights = batch["weights"] if config.replay_mode == "per" else None
        q = module.q_value(obs, actions)
        with torch.no_grad():
            next_obs = batch["next_obs"]
            q_next = module.q_value(next_obs, module.policy_mean(next_obs, target=True), target=True)
            q_hat = batch["rewards"] + config.gamma * (1.0 - batch["terminated"].float()) * q_next
        critic_i = 0.5 * (q - q_hat) ** 2  # Eq. (2)
        critic_loss = refer_loss(critic_i, kl, near, 1.0, rule1=refer.rule1, rule2=False, weights=weights)
        decay = 0.5 * config.critic_weight_decay * sum((p**2).sum() for p in module.critic.parameters())
        # Eq. (3), the critic's weights held constant (detached: no gradient reaches them, the one
        # with respect to the actions is unchanged).
        frozen = {name: p.detach() for name, p in module.critic.named_parameters()}
        dpg_i = -module.q_value(obs, mean, params=frozen)
        actor_loss = refer_loss(dpg_i, kl, near, beta, rule1=refer.rule1, rule2=refer.rule2, weights=weights)
        outputs = {
            "rho": rho.detach(),
            "td": (q_hat - q).detach(),
            "metrics": batch_metrics(kl, near, rho, refer.rule1, critic_i, dpg_i),
        }
        return critic_loss + decay + actor_loss, outputs
