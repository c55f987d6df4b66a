"""BlackBoxRLModule: the black-box policy as a TorchRLModule (RLlib's learner group owns θ)."""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.annotations import override

from rllib_ext.common.policies import MLPPolicy


class BlackBoxRLModule(TorchRLModule):
    """The black-box policy as an RLModule (RLlib owns, syncs and checkpoints θ)."""

    @override(TorchRLModule)
    def setup(self) -> None:
        obs_space = self.observation_space
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise ValueError(f"black-box policies need a 1-d Box observation space, got {obs_space}")
        cfg = dict(cast("dict[str, Any]", self.model_config or {}))  # the config's model_config_for_policy
        if self.action_space is None:  # what MLPPolicy would say
            raise ValueError("black-box policies support Discrete or 1-d Box actions, got None")
        self.policy = MLPPolicy(
            int(obs_space.shape[0]),
            self.action_space,
            hiddens=cfg.get("hiddens", (64, 64)),
            activation=cfg.get("activation", "tanh"),
            head=cfg.get("head", "deterministic"),
        )

    @override(TorchRLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.policy.net(batch[Columns.OBS])}

    def get_flat(self) -> np.ndarray:
        return self.policy.get_flat()

    def set_flat(self, theta: np.ndarray) -> None:
        self.policy.set_flat(theta)
