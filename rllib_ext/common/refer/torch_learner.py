"""Torch side shared by the paper-003 learners: optimizers by name, learning-rate annealing
(Eq. 13), state statistics into the module, ρ and D_KL of the Gaussian policies against the
stored behaviour, and the soft target-network update of DDPG and NAF (Algorithm 4)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI
from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.learner import ReFERLearner
from rllib_ext.common.refer.rules import diag_gaussian_kl, diag_gaussian_log_rho, near_policy_mask
from rllib_ext.common.threads import TorchThreadsLearner
from rllib_ext.optim import make_optimizer

#: Cap on log ρ before exponentiation.
LOG_RHO_MAX = 20.0


def split_mu(mu: torch.Tensor):
    """(mean, σ) from RLlib's ``action_dist_inputs`` layout (mean, log σ)."""
    mean, log_std = mu.chunk(2, dim=-1)
    return mean, torch.exp(log_std)


class ReFERTorchLearner(TorchThreadsLearner, ReFERLearner, TorchLearner):
    """Builds the optimizer named by ``config.optimizer`` (``rllib_ext.optim``) and anneals it.

    Subclasses with several optimizers (DDPG: actor and critic) override
    :meth:`configure_optimizers_for_module` and call :meth:`_register` for each.
    """

    _base_lrs: dict[str, float]

    @override(TorchLearner)
    def build(self) -> None:
        """Builds (torch's thread count first, :class:`TorchThreadsLearner`), then the targets."""
        super().build()
        # After the optimizers exist, so that target weights are not trained (App. C remark 2
        # on Algorithm 4: targets start identical to the trained weights).
        self.module.foreach_module(
            lambda mid, mod: mod.make_target_networks() if isinstance(mod, TargetNetworkAPI) else None
        )

    @override(TorchLearner)
    def after_gradient_based_update(self, *, timesteps) -> None:
        """w̃ ← (1−τ)w̃ + τw for every target network (Algorithm 4, τ = ``config.tau``)."""
        super().after_gradient_based_update(timesteps=timesteps)
        for module in self.module._rl_modules.values():
            module = module.unwrapped()
            if isinstance(module, TargetNetworkAPI):
                for main_net, target_net in module.get_target_network_pairs():
                    update_target_network(main_net=main_net, target_net=target_net, tau=self.config.tau)

    def rho_kl(self, batch: dict[str, Any], pi_mean: torch.Tensor, pi_std: torch.Tensor):
        """(ρ, D_KL(μ‖π), near) of the minibatch for π = N(pi_mean, pi_std²).

        μ_t is read from ``batch["mu"]`` (RLlib layout: mean, log σ); log ρ is capped at
        :data:`LOG_RHO_MAX` (ρ ≤ 4.9e8) so that runs without Rule 1 cannot overflow. ``near``
        is Rule 1 with the current c_max. In ``refer2`` mode ρ is clipped at 10³ (§5.3).
        """
        mu_mean, mu_std = split_mu(batch["mu"])
        log_rho = diag_gaussian_log_rho(batch[Columns.ACTIONS], pi_mean, pi_std, mu_mean, mu_std)
        rho = torch.exp(torch.clamp(log_rho, max=LOG_RHO_MAX))
        if self.refer.rho_clip is not None:
            rho = torch.clamp(rho, max=self.refer.rho_clip)  # ReF-ER-2: ρ ← min(ρ, 10³), §5.3
        kl = diag_gaussian_kl(mu_mean, mu_std, pi_mean, pi_std)  # Eq. (11)
        return rho, kl, near_policy_mask(rho.detach(), self.refer.c_max)  # Rule 1

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """One optimizer over the whole module, at ``config.lr``."""
        module = self._module[module_id]
        self._register(module_id, "default_optimizer", self.get_parameters(module), config.lr, config)

    def _register(self, module_id, name: str, params, lr: float, config, **overrides) -> None:
        optimizer = make_optimizer(config.optimizer, params, lr=lr, **{**(config.optimizer_kwargs or {}), **overrides})
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
