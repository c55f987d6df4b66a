"""NAF's loss with ReF-ER (paper 003 §2, Eq. 2 and 4; Algorithm 4 with one network, App. C).

Per sampled step k: Q^w(s_k, a_k) from Eq. (4); the Q-learning target
q̂_k = r̂_{k+1} + γ V^w̃(s_{k+1}) with the target network w̃ (V is max_a Q; 0 after a terminal
state); L^Q_k = ½ (Q^w(s_k, a_k) − q̂_k)² (Eq. 2). ReF-ER: β·mean[near_k·L^Q_k] +
(1−β)·mean[D_KL(μ_k ‖ π^w)] with π^w = N(m^w(s_k), σ²I) (Eq. 10-11). After the update the
target network moves by τ (ReFERTorchLearner.after_gradient_based_update), and ρ_k and the TD
error are written back (rank-based PER uses it).
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.naf.naf_rl_module import NAF_L, NAF_MEAN, NAF_V
from rllib_ext.algorithms.refer.torch.refer_torch_learner import ReFERTorchLearner
from rllib_ext.common.replay.rules import refer_loss


class NAFTorchLearner(ReFERTorchLearner):
    """The NAF loss (one network, Q-learning target) under ReF-ER."""

    @override(ReFERTorchLearner)
    def compute_loss_for_module(
        self, *, module_id, config, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        """β·mean[near·½(Q − q̂)²] + (1−β)·mean[D_KL(μ‖π)] (Eq. 2, 4, 10, 11)."""
        module = self.module[module_id].unwrapped()
        mean = fwd_out[NAF_MEAN]
        q = module.q_value(fwd_out[NAF_V], mean, fwd_out[NAF_L], batch[Columns.ACTIONS])  # Eq. (4)
        with torch.no_grad():
            v_next = module.naf_outputs(batch["next_obs"], target=True)[0]
            q_hat = batch["rewards"] + config.gamma * (1.0 - batch["terminated"].float()) * v_next
        q_loss = 0.5 * (q - q_hat) ** 2  # Eq. (2)
        rho, kl, near = self.rho_kl(batch, mean, torch.full_like(mean, module.sigma))
        refer = self.refer
        weights = batch["weights"] if config.replay_mode == "per" else None
        loss = refer_loss(q_loss, kl, near, refer.beta, rule1=refer.rule1, rule2=refer.rule2, weights=weights)
        self._stash = {"rho": rho.detach().cpu().numpy(), "td": (q_hat - q).detach().cpu().numpy()}
        self.log_batch_metrics(module_id, kl=kl.detach(), near=near, rho=rho.detach(), q_loss=q_loss.detach().mean())
        return loss
