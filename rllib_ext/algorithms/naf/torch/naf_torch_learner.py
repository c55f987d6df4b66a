"""NAF's loss with ReF-ER (paper 003 §2, Eq. 2 and 4; Algorithm 4 with one network, App. C).

Per sampled step k: Q^w(s_k, a_k) from Eq. (4); the Q-learning target
q̂_k = r̂_{k+1} + γ V^w̃(s_{k+1}) with the target network w̃ (V is max_a Q; 0 after a terminal
state); L^Q_k = ½ (Q^w(s_k, a_k) − q̂_k)² (Eq. 2). π^w = N(m^w(s_k), σ²I) gives ρ_k and
D_KL(μ_k ‖ π^w) (Eq. 11); near_k is Rule 1.

Where β of Eq. (10) acts (``naf_beta_placement``; the paper's Eq. 10 is generic):

* ``"mean"`` (default, as smarties' NAF, both at the paper's commit and today: ``NAF::Train``
  blends β and the penalty only into the gradient of the policy-mean outputs,
  ``grad[m_i] = β·grad[m_i] + (1−β)·penG[i]``, while V and L keep the full Rule-1-masked TD error):
  mean[near·½(Q(V, L, m̄) − q̂)²] + β·mean[near·½(Q(V̄, L̄, m) − q̂)²] + (1−β)·mean[D_KL], where
  the bar is "held constant" (detached). Each output gets exactly its partial derivative of
  ½(Q − q̂)², so without Rule 2 (β = 1) the gradient is that of mean[near·L^Q_k] (the loss's
  value counts the TD term twice; the logged ``q_loss`` is mean[L^Q_k]).
* ``"whole"``: β·mean[near_k·L^Q_k] + (1−β)·mean[D_KL] (β also slows V and L).

After the update the target network moves by τ (ReFERTorchLearner.after_gradient_based_update),
and ρ_k and the TD error are written back (rank-based PER uses it).
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.naf.naf_rl_module import NAF_L, NAF_MEAN, NAF_V
from rllib_ext.common.refer.rules import refer_loss
from rllib_ext.common.refer.torch_learner import ReFERTorchLearner, StepOutputs, batch_metrics


class NAFTorchLearner(ReFERTorchLearner):
    """The NAF loss (one network, Q-learning target) under ReF-ER."""

    LOSS_METRIC_NAMES = ("q_loss",)

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
        """Q-learning loss (Eq. 2, 4) with Rule 1, β on the gradient of m (module docstring), D_KL."""
        v, mean, L, actions = fwd_out[NAF_V], fwd_out[NAF_MEAN], fwd_out[NAF_L], batch[Columns.ACTIONS]
        q = module.q_value(v, mean, L, actions)  # Eq. (4)
        with torch.no_grad():
            v_next = module.naf_outputs(batch["next_obs"], target=True)[0]
            q_hat = batch["rewards"] + config.gamma * (1.0 - batch["terminated"].float()) * v_next
        q_loss = 0.5 * (q - q_hat) ** 2  # Eq. (2)
        rho, kl, near = self.rho_kl(batch, mean, torch.full_like(mean, module.sigma), c_max)
        refer = self.refer
        weights = batch["weights"] if config.replay_mode == "per" else None
        shared = {"rule1": refer.rule1, "weights": weights}
        if config.naf_beta_placement == "whole":
            loss = refer_loss(q_loss, kl, near, beta, rule2=refer.rule2, **shared)  # Eq. (10)
        else:  # as smarties: β and the penalty act on m only; V and L get the full TD gradient
            q_vl = module.q_value(v, mean.detach(), L, actions)  # gradient to V and L
            q_m = module.q_value(v.detach(), mean, L.detach(), actions)  # gradient to m
            vl_loss = refer_loss(0.5 * (q_vl - q_hat) ** 2, kl, near, 1.0, rule2=False, **shared)  # Rule 1
            m_loss = refer_loss(0.5 * (q_m - q_hat) ** 2, kl, near, beta, rule2=refer.rule2, **shared)
            loss = vl_loss + m_loss  # Eq. (2), (10)
        outputs = {
            "rho": rho.detach(),
            "td": (q_hat - q).detach(),
            "metrics": batch_metrics(kl, near, rho, refer.rule1, q_loss),
        }
        return loss, outputs
