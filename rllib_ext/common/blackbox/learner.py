"""BlackBoxLearner: applies a gradient *estimate* ĝ with the optimizer chosen by name."""

from __future__ import annotations

from typing import Any, Protocol, cast

import numpy as np
import torch
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox.rl_module import BlackBoxRLModule
from rllib_ext.common.guards import nonfinite_parameters
from rllib_ext.common.validation import algo_name


class BlackBoxLearnerSettings(Protocol):
    """The settings the learner reads (a BlackBoxConfig sets them from its settings table at run
    time, so they are not declared on the class)."""

    optimizer: str
    lr: float
    optimizer_kwargs: dict[str, Any] | None
    l2_coeff: float


def _settings(config: AlgorithmConfig | None) -> BlackBoxLearnerSettings:
    return cast(BlackBoxLearnerSettings, config)


class BlackBoxLearner(TorchLearner):
    """Applies gradient estimates with the optimizer chosen by name (``rllib_ext.optim``).

    Optimizers minimize; ĝ estimates the *ascent* direction of the return, so the learner sets
    ``param.grad = −(ĝ − l2·θ)`` before ``optimizer.step()``. DSGD (paper 000 Eq. 20–22) gets the
    policy's reward R(θ_u) through ``report_reward`` before its step.
    """

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: str, config: AlgorithmConfig | None = None) -> None:
        from rllib_ext.optim import make_optimizer

        settings = _settings(config)
        params = self.get_parameters(self._policy_module(module_id))
        optimizer = make_optimizer(settings.optimizer, params, lr=settings.lr, **dict(settings.optimizer_kwargs or {}))
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params)

    @override(TorchLearner)
    def compute_loss_for_module(
        self, *, module_id: str, config: AlgorithmConfig, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        raise NotImplementedError("black-box learners apply gradient estimates (apply_gradient_estimate)")

    def _policy_module(self, module_id: str = DEFAULT_MODULE_ID) -> BlackBoxRLModule:
        """The learner's BlackBoxRLModule."""
        assert self.module is not None, "the learner is not built"
        return cast(BlackBoxRLModule, self.module[module_id])  # the config's module (check_user_module)

    def get_flat(self) -> np.ndarray:
        return self._policy_module().get_flat()

    def apply_gradient_estimate(self, g_hat: np.ndarray, reward: float | None = None) -> dict[str, float]:
        """One optimizer step along the ascent estimate ``g_hat`` (flat, θ's layout).

        Returns:
            ``{"update_norm": ‖θ_{u+1} − θ_u‖, "grad_norm": ‖ĝ‖, "theta_norm": ‖θ_{u+1}‖}``, and
            ``"eta_u"``, DSGD's η for the next step, with DSGD.

        Raises:
            FloatingPointError: ``g_hat`` or the new θ is not finite (the iteration fails loudly
                rather than publishing NaN weights).
        """
        module = self._policy_module()
        params = list(module.parameters())
        theta = torch.nn.utils.parameters_to_vector(params).detach().clone()
        g = torch.as_tensor(np.asarray(g_hat, dtype=np.float32))
        if not torch.isfinite(g).all():
            raise FloatingPointError(
                f"{algo_name(self.config)}: gradient estimate contains NaN/inf; refusing to update θ"
            )
        l2 = float(_settings(self.config).l2_coeff)
        ascent = g - l2 * theta if l2 else g
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = (-ascent[offset : offset + n]).view_as(p).clone()
            offset += n
        for optimizer in self._named_optimizers.values():
            if reward is not None and hasattr(optimizer, "report_reward"):
                optimizer.report_reward(float(reward))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        new_theta = torch.nn.utils.parameters_to_vector(params).detach()
        if not torch.isfinite(new_theta).all():
            raise FloatingPointError(
                f"{algo_name(self.config)}: θ became non-finite after the optimizer step (module "
                f"{DEFAULT_MODULE_ID!r}, parameter(s) {', '.join(map(repr, nonfinite_parameters(module)))}); "
                "refusing to publish it to the env runners"
            )
        stats = {
            "update_norm": float(torch.linalg.vector_norm(new_theta - theta)),
            "grad_norm": float(torch.linalg.vector_norm(g)),
            "theta_norm": float(torch.linalg.vector_norm(new_theta)),
        }
        for optimizer in self._named_optimizers.values():
            if optimizer.param_groups[0].get("eta_u") is not None:  # DSGD's step size after its update
                stats["eta_u"] = float(optimizer.param_groups[0]["eta_u"])
        return stats
