"""RLModule building blocks shared by the paper-003 learners.

* :class:`ReFERModuleMixin`: exploration samples a normal truncated at ±3σ (App. A);
  inference acts with the mean (RLlib's ``TorchDiagGaussian``, deterministic form); the App. B
  state statistics go into the module's ``standardize`` buffers.
* :class:`GaussianExplorationModule`: the base of DDPG_EXT's and NAF_EXT's modules — a
  deterministic policy m^w(s) plus exploration noise N(0, σ²I) with fixed σ (0.2; §2: "we include
  exploratory Gaussian noise in the policy π^w = m^w + N(0, σ²I) ... to compute ρ_t or D_KL"),
  App. B state standardization, and target copies of the trained networks (TargetNetworkAPI).
  ``action_dist_inputs`` are (m, log σ) in RLlib's layout, so μ_t is stored as for V-RACER.
"""

from __future__ import annotations

import abc
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian, TorchDistribution
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from rllib_ext.common.refer.distributions import TruncatedDiagGaussian
from rllib_ext.common.refer.networks import Standardizer, network_settings

TARGET_PREFIX = "target_"


def _flat_size(space: gym.Space[Any] | None) -> int:
    """Numbers in one sample of a shaped space (a Box)."""
    shape = None if space is None else space.shape
    if shape is None:
        raise ValueError(f"paper 003's modules need shaped (Box) observation and action spaces, got {space!r}")
    return int(np.prod(shape))


class ReFERModuleMixin:
    """Action distributions and state statistics of paper 003's modules (TorchRLModule mixin).

    The module must hold a :class:`~rllib_ext.common.refer.networks.Standardizer` as
    ``self.standardize``.
    """

    standardize: Standardizer

    def set_state_stats(self, mean: npt.ArrayLike, std: npt.ArrayLike) -> None:
        """μ_s, σ_s of App. B (Eq. 14-15)."""
        self.standardize.set(mean, std)

    def get_inference_action_dist_cls(self) -> type[TorchDistribution]:
        """Gaussian; ``explore=False`` acts with its mean."""
        return TorchDiagGaussian

    def get_exploration_action_dist_cls(self) -> type[TorchDistribution]:
        """Normal truncated at ±3σ (App. A)."""
        return TruncatedDiagGaussian

    def get_train_action_dist_cls(self) -> type[TorchDistribution]:
        """Normal truncated at ±3σ (App. A)."""
        return TruncatedDiagGaussian


class GaussianExplorationModule(ReFERModuleMixin, TorchRLModule, TargetNetworkAPI):
    """Deterministic policy m^w(s) with fixed Gaussian exploration σ and target networks.

    Subclasses build their networks in :meth:`build_networks`, name the trained networks
    that get target copies in :attr:`target_network_names`, and implement :meth:`policy_mean`.

    model_config keys: ``fcnet_hiddens`` ([128, 128]), ``fcnet_activation`` (Softsign), ``exploration_sigma`` (σ, 0.2).
    """

    target_network_names: tuple[str, ...] = ()

    # RLlib types it dict | DefaultModelConfig; the module is built from an RLModuleSpec, whose
    # build() hands the module a dict (RLModuleSpec._get_model_config converts the dataclass).
    model_config: dict[str, Any] | None

    @override(TorchRLModule)
    def setup(self) -> None:
        """Standardizer, σ and the subclass's networks."""
        cfg = self.model_config or {}
        self.hidden, self.activation = network_settings(cfg)
        self.obs_dim = _flat_size(self.observation_space)
        self.act_dim = _flat_size(self.action_space)
        self.sigma = float(cfg.get("exploration_sigma", 0.2))
        self.standardize = Standardizer(self.obs_dim)
        self.build_networks()

    @abc.abstractmethod
    def build_networks(self) -> None:
        """Creates the trained networks."""

    @abc.abstractmethod
    def policy_mean(self, obs: torch.Tensor, target: bool = False) -> torch.Tensor:
        """m^w(s) (or the target network's m^w̃(s)) for raw states, [B, d_A]."""

    def flat_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Standardized, flattened states ŝ."""
        flat: torch.Tensor = self.standardize(obs.reshape(obs.shape[0], -1).float())  # nn.Module.__call__: Any
        return flat

    def dist_inputs(self, mean: torch.Tensor) -> torch.Tensor:
        """(m, log σ): the behaviour μ_t stored in the replay memory."""
        return torch.cat([mean, torch.full_like(mean, float(np.log(self.sigma)))], -1)

    @override(TorchRLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.dist_inputs(self.policy_mean(batch[Columns.OBS]))}

    @override(TargetNetworkAPI)
    def make_target_networks(self) -> None:
        """Target copies w̃ of the trained networks (App. C: initialized as identical)."""
        for name in self.target_network_names:
            setattr(self, TARGET_PREFIX + name, make_target_network(getattr(self, name)))

    @override(TargetNetworkAPI)
    def get_target_network_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(trained, target) pairs for the soft update w̃ ← (1−τ)w̃ + τw (Algorithm 4)."""
        return [(getattr(self, n), getattr(self, TARGET_PREFIX + n)) for n in self.target_network_names]

    @override(TargetNetworkAPI)
    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The target policy's mean."""
        return {Columns.ACTIONS: self.policy_mean(batch[Columns.OBS], target=True)}

    def has_targets(self) -> bool:
        """Whether :meth:`make_target_networks` ran (Learner-side modules only)."""
        return all(hasattr(self, TARGET_PREFIX + n) for n in self.target_network_names)
