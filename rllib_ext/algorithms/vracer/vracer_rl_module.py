"""V-RACER's network (paper 003 §2, App. A): one MLP for V, the policy mean and a shared Σ.

"Given s, a single NN outputs the value V^w, the mean m^w and diagonal covariance Σ^w of the
Gaussian policy π^w(a|s)" (§2); "the values of the diagonal covariance matrix are shared among
all states and initialized to Σ = 0.2 I. To ensure that Σ is positive definite, the respective
NN outputs are mapped onto R+ by a Softplus rectifier" (App. A).

Σ: the paper's Σ = 0.2 I is a covariance, so σ = √0.2 ≈ 0.447 per action dimension; smarties'
V-RACER uses the same (``--explNoise 0.447214`` in the paper-era ``settings_VRACER.sh``,
0.4472135955 in today's ``settings/default.json``; its 0.2 is DPG's and NAF's σ). σ =
softplus(w_σ), initialized at σ = √0.2 (``model_config["init_sigma"]``). ``action_dist_inputs``
are RLlib's (m, log σ); exploration samples a normal truncated at ±3σ
(:class:`~rllib_ext.common.refer.distributions.TruncatedDiagGaussian`), ``explore=False``
acts with m. States are standardized with the memory's μ_s, σ_s (App. B; module buffers).

model_config keys: ``fcnet_hiddens`` (default [128, 128]), ``fcnet_activation`` (Softsign),
``init_sigma`` (√0.2, :data:`INIT_SIGMA`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from rllib_ext.common.refer.networks import Standardizer, network_settings, paper_mlp, softplus_inverse
from rllib_ext.common.refer.rl_module import ReFERModuleMixin

#: σ of the initial policy: √0.2, the std of the paper's covariance Σ = 0.2 I (App. A).
INIT_SIGMA = math.sqrt(0.2)


class VRACERTorchRLModule(ReFERModuleMixin, TorchRLModule, ValueFunctionAPI):
    """V^w(s), m^w(s) from one Softsign MLP; σ state-independent through a softplus."""

    @override(TorchRLModule)
    def setup(self):
        """Builds the MLP (App. A init), σ's parameter and the state standardizer."""
        cfg = self.model_config or {}
        hidden, activation = network_settings(cfg)
        self.obs_dim = int(np.prod(self.observation_space.shape))
        self.act_dim = int(np.prod(self.action_space.shape))
        self.standardize = Standardizer(self.obs_dim)
        self.net = paper_mlp(self.obs_dim, hidden, 1 + self.act_dim, activation)  # [V, m]
        init = softplus_inverse(float(cfg.get("init_sigma", INIT_SIGMA)))  # Σ = 0.2 I, App. A
        self.sigma_param = nn.Parameter(torch.full((self.act_dim,), init))

    def value_and_policy(self, obs: torch.Tensor):
        """(V [B], m [B, d_A], σ [B, d_A]) for raw states."""
        out = self.net(self.standardize(obs.reshape(obs.shape[0], -1).float()))
        v, mean = out[:, 0], out[:, 1:]
        sigma = nn.functional.softplus(self.sigma_param).expand_as(mean)
        return v, mean, sigma

    @override(TorchRLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        _, mean, sigma = self.value_and_policy(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: torch.cat([mean, torch.log(sigma)], -1)}

    @override(TorchRLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        v, mean, sigma = self.value_and_policy(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: torch.cat([mean, torch.log(sigma)], -1), Columns.VF_PREDS: v}

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings=None) -> torch.Tensor:
        """V^w(s)."""
        return self.value_and_policy(batch[Columns.OBS])[0]
