"""NAF's network (paper 003 Eq. 4, App. A): one MLP for V^w(s), m^w(s) and a lower-triangular L^w(s).

Q^w_NAF(s, a) = V^w(s) − [a − m^w(s)]ᵀ L^w(s) L^w(s)ᵀ [a − m^w(s)]   (Eq. 4)

Given s, a single network (2×128 Softsign, App. A) outputs V, m and the d_A(d_A+1)/2 entries
of L; the diagonal of L is mapped to R+ with a softplus (as the paper does for its quadratic
advantage, App. E), so L Lᵀ is positive definite and Q is maximal at a = m. Exploration:
π^w = m^w + N(0, σ²I), σ = 0.2, truncated at ±3σ.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override
from torch import nn

from rllib_ext.common.refer.networks import paper_mlp
from rllib_ext.common.refer.rl_module import TARGET_PREFIX, GaussianExplorationModule

NAF_V = "naf_v"
NAF_MEAN = "naf_mean"
NAF_L = "naf_l"


class NAFTorchRLModule(GaussianExplorationModule):
    """V, m and L from one network; a target copy of it (``target_net``) for the Q-learning target."""

    target_network_names = ("net",)

    @override(GaussianExplorationModule)
    def build_networks(self) -> None:
        """One MLP with 1 + d_A + d_A(d_A+1)/2 outputs (App. A init)."""
        d = self.act_dim
        self.net = paper_mlp(self.obs_dim, self.hidden, 1 + d + d * (d + 1) // 2, self.activation)
        rows, cols = torch.tril_indices(d, d)
        self.register_buffer("tril_rows", rows, persistent=False)
        self.register_buffer("tril_cols", cols, persistent=False)

    def naf_outputs(self, obs: torch.Tensor, target: bool = False):
        """(V [B], m [B, d_A], L [B, d_A, d_A]) of the trained (or target) network."""
        net = getattr(self, TARGET_PREFIX + "net") if target else self.net
        out = net(self.flat_obs(obs))
        d = self.act_dim
        v, mean, entries = out[:, 0], out[:, 1 : 1 + d], out[:, 1 + d :]
        L = out.new_zeros(out.shape[0], d, d)
        L[:, self.tril_rows, self.tril_cols] = entries
        diag = torch.arange(d, device=out.device)
        L[:, diag, diag] = nn.functional.softplus(L[:, diag, diag])  # L L^T positive definite
        return v, mean, L

    @staticmethod
    def q_value(v: torch.Tensor, mean: torch.Tensor, L: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q = V − (a − m)ᵀ L Lᵀ (a − m), Eq. (4)."""
        u = torch.einsum("bij,bi->bj", L, actions - mean)  # Lᵀ (a − m)
        return v - (u**2).sum(-1)

    @override(GaussianExplorationModule)
    def policy_mean(self, obs: torch.Tensor, target: bool = False) -> torch.Tensor:
        """m^w(s), the maximizer of Q."""
        return self.naf_outputs(obs, target)[1]

    @override(GaussianExplorationModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        v, mean, L = self.naf_outputs(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: self.dist_inputs(mean), NAF_V: v, NAF_MEAN: mean, NAF_L: L}
