"""BlackBoxLearner: applies a gradient *estimate* ĝ with the optimizer chosen by name."""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

from rllib_ext.common.guards import nonfinite_parameters
from rllib_ext.common.validation import algo_name


class BlackBoxLearner(TorchLearner):
    """Applies gradient estimates with the optimizer chosen by name (``rllib_ext.optim``).

    Optimizers minimize; ĝ estimates the *ascent* direction of the return, so the learner sets
    ``param.grad = −(ĝ − l2·θ)`` before ``optimizer.step()``. DSGD (paper 000 Eq. 20–22) gets the
    policy's reward R(θ_u) through ``report_reward`` before its step.
    """

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None):
        from rllib_ext.optim import make_optimizer

        params = self.get_parameters(self._module[module_id])
        optimizer = make_optimizer(config.optimizer, params, lr=config.lr, **dict(config.optimizer_kwargs or {}))
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params)

    @override(TorchLearner)
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        raise NotImplementedError("black-box learners apply gradient estimates (apply_gradient_estimate)")

    def get_flat(self) -> np.ndarray:
        return self._module[DEFAULT_MODULE_ID].get_flat()

    def apply_gradient_estimate(self, g_hat: np.ndarray, reward: float | None = None) -> dict[str, float]:
        """One optimizer step along the ascent estimate ``g_hat`` (flat, θ's layout).

        Returns:
            ``{"update_norm": ‖θ_{u+1} − θ_u‖, "grad_norm": ‖ĝ‖, "theta_norm": ‖θ_{u+1}‖}``, and
            ``"eta_u"``, DSGD's η for the next step, with DSGD.

        Raises:
            FloatingPointError: ``g_hat`` or the new θ is not finite (the iteration fails loudly
                rather than publishing NaN weights).
        """
        module = self._module[DEFAULT_MODULE_ID]
        params = list(module.parameters())
        theta = torch.nn.utils.parameters_to_vector(params).detach().clone()
        g = torch.as_tensor(np.asarray(g_hat, dtype=np.float32))
        if not torch.isfinite(g).all():
            raise FloatingPointError(
                f"{algo_name(self.config)}: gradient estimate contains NaN/inf; refusing to update θ"
            )
        l2 = float(self.config.l2_coeff)
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
