"""Torch side shared by the paper-003 learners: optimizers by name, learning-rate annealing,
state statistics into the module."""

from __future__ import annotations

from typing import Dict

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.refer.refer_learner import ReFERLearner
from rllib_ext.optim import make_optimizer


class ReFERTorchLearner(ReFERLearner, TorchLearner):
    """Builds the optimizer named by ``config.optimizer`` (``rllib_ext.optim``) and anneals it.

    Subclasses with several optimizers (DDPG: actor and critic) override
    :meth:`configure_optimizers_for_module` and call :meth:`_register` for each.
    """

    _base_lrs: Dict[str, float]

    @override(TorchLearner)
    def build(self) -> None:
        """Sets torch's thread count (``config.torch_num_threads``), then builds."""
        if self.config.torch_num_threads is not None:
            torch.set_num_threads(int(self.config.torch_num_threads))
        super().build()

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """One optimizer over the whole module, at ``config.lr``."""
        module = self._module[module_id]
        self._register(module_id, "default_optimizer", self.get_parameters(module), config.lr, config)

    def _register(self, module_id, name: str, params, lr: float, config, **overrides) -> None:
        optimizer = make_optimizer(config.optimizer, params, lr=lr, **{**config.optimizer_kwargs, **overrides})
        # The learning rate is set by _set_learning_rate_factor (Eq. 13), not by RLlib.
        self.register_optimizer(module_id=module_id, optimizer_name=name, optimizer=optimizer, params=params)
        if not hasattr(self, "_base_lrs"):
            self._base_lrs = {}
        self._base_lrs[f"{module_id}_{name}"] = float(lr)

    @override(ReFERLearner)
    def _set_learning_rate_factor(self, factor: float) -> None:
        for full_name, optimizer in self._named_optimizers.items():
            for group in optimizer.param_groups:
                group["lr"] = self._base_lrs[full_name] * factor  # η(t) = η/(1 + A·t), Eq. (13)

    @override(ReFERLearner)
    def _set_state_stats(self, mean: np.ndarray, std: np.ndarray) -> None:
        for module in self.module._rl_modules.values():
            module.unwrapped().set_state_stats(mean, std)
