"""DDPG's networks (paper 003 §2, App. A): a tanh-bounded policy m^w(s) and a critic Q^w'(s, a).

"We use the common MLP architecture for each network. The output of the policy-network is
mapped onto the bounded interval [−1, 1]^{d_A} with an hyperbolic tangent function" (App. A).
Both are 2×128 Softsign MLPs; the critic reads (ŝ, a). Target copies ``target_actor`` and
``target_critic`` (TargetNetworkAPI) give the Q-learning target.

Exploration: π^w = m^w + N(0, σ²I), σ = 0.2, truncated at ±3σ (ReF-ER modes); with
``model_config["ou_noise"]`` (set by DDPGConfig for ``er``/``per``) the noise is an
Ornstein–Uhlenbeck process x ← x − θx + σ·N(0, I) (θ 0.15, σ 0.2, App. A). The OU state lives
in the env runner's module, one row per vectorized env, and is not reset at episode ends (RLlib
modules do not see episode boundaries); the stored μ_t stays (m^w(s_t), σ), used for ρ and
D_KL metrics only in those modes.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.networks import paper_mlp
from rllib_ext.common.refer.rl_module import TARGET_PREFIX, GaussianExplorationModule

DDPG_MEAN = "ddpg_mean"


class DDPGTorchRLModule(GaussianExplorationModule):
    """Policy network (``actor``) and value network (``critic``) with target copies."""

    target_network_names = ("actor", "critic")

    @override(GaussianExplorationModule)
    def build_networks(self) -> None:
        """Two MLPs (App. A init); OU settings from model_config."""
        cfg = self.model_config or {}
        self.actor = paper_mlp(self.obs_dim, self.hidden, self.act_dim, self.activation)
        self.critic = paper_mlp(self.obs_dim + self.act_dim, self.hidden, 1, self.activation)
        self.ou_noise = bool(cfg.get("ou_noise", False))
        self.ou_theta = float(cfg.get("ou_theta", 0.15))
        self.ou_sigma = float(cfg.get("ou_sigma", 0.2))
        self._ou_state = None

    @override(GaussianExplorationModule)
    def policy_mean(self, obs: torch.Tensor, target: bool = False) -> torch.Tensor:
        """m^w(s) = tanh(MLP(ŝ)) ∈ (−1, 1)^{d_A}."""
        actor = getattr(self, TARGET_PREFIX + "actor") if target else self.actor
        return torch.tanh(actor(self.flat_obs(obs)))

    def q_value(
        self, obs: torch.Tensor, actions: torch.Tensor, target: bool = False, params=None, frozen: bool = False
    ) -> torch.Tensor:
        """Q^w'(s, a) (or the target critic's).

        ``frozen`` evaluates the critic with its weights held constant (no gradient reaches
        them, the gradient with respect to ``actions`` is unchanged), so that the DPG does not
        train the critic; ``params`` evaluates it with other (e.g. detached) parameters.
        """
        critic = getattr(self, TARGET_PREFIX + "critic") if target else self.critic
        x = torch.cat([self.flat_obs(obs), actions], -1)
        if params is not None:
            return torch.func.functional_call(critic, params, (x,))[:, 0]
        if frozen:
            trained = [p for p in critic.parameters() if p.requires_grad]
            for p in trained:
                p.requires_grad_(False)
            try:
                return critic(x)[:, 0]
            finally:
                for p in trained:
                    p.requires_grad_(True)
        return critic(x)[:, 0]

    @override(GaussianExplorationModule)
    def _forward_exploration(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        out = self._forward(batch)
        if not self.ou_noise:
            return out
        mean = out[Columns.ACTION_DIST_INPUTS][:, : self.act_dim]
        if self._ou_state is None or self._ou_state.shape != mean.shape:
            self._ou_state = torch.zeros_like(mean)
        self._ou_state = self._ou_state - self.ou_theta * self._ou_state + self.ou_sigma * torch.randn_like(mean)
        out[Columns.ACTIONS] = mean + self._ou_state
        return out

    @override(GaussianExplorationModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        mean = self.policy_mean(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: self.dist_inputs(mean), DDPG_MEAN: mean}
