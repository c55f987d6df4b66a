"""Small torch MLP policies for the black-box algorithms (ES, DFD, CV-ES, AES-RL evaluation).

A policy maps a (standardized) observation to an action. Heads (``head``):

- ``"deterministic"``: Box actions: ``tanh`` output mapped linearly onto ``[low, high]``;
  Discrete actions: ``argmax`` of the logits.
- ``"linear"``: Box actions: the raw output (no squashing) in units of the half-range around the
  centre of ``[low, high]``, clipped to the bounds — with ``hiddens=()`` this is ARS's linear
  policy (Mania et al. 2018) plus a bias: a = clip(M·s + c) on Swimmer's [−1, 1] (ARS has no c;
  ARS_EXT starts M and c at zero). Discrete: argmax.
- ``"gaussian"``: diagonal Gaussian with a state-independent log-std parameter (paper 002 §4);
  the mean as in ``"deterministic"``. Discrete actions sample the softmax of the logits.
- ``"gaussian_2a"``: paper 000 App. A.1: the network has 2A ``tanh`` outputs; the first A are
  the means, the second A are mapped linearly from [−1, 1] onto a *variance* in [0, 1].

With ``explore=False`` every head acts with its mean (or argmax). Parameters travel as one flat
float32 vector (``torch.nn.utils.parameters_to_vector`` order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rllib_ext.common.mlp import mlp
from rllib_ext.common.names import lookup

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "softsign": nn.Softsign}
HEADS = ("deterministic", "linear", "gaussian", "gaussian_2a")
#: Heads whose action is a deterministic function of the observation (no distribution).
DETERMINISTIC_HEADS = ("deterministic", "linear")


def check_policy_spec(action_space: gym.Space[Any], head: str, activation: str) -> None:
    """Raises ValueError naming the problem for an unsupported space/head/activation."""
    lookup(ACTIVATIONS, activation, "activation")
    if head not in HEADS:
        raise ValueError(f"unknown policy head {head!r}; valid: {', '.join(HEADS)}")
    if isinstance(action_space, gym.spaces.Discrete):
        if head == "gaussian_2a":
            raise ValueError("policy head 'gaussian_2a' needs a Box action space, got Discrete")
    elif not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        raise ValueError(f"black-box policies support Discrete or 1-d Box actions, got {action_space}")


class MLPPolicy(nn.Module):
    """MLP policy; see the module docstring for the heads.

    Args:
        obs_dim: Flattened observation size.
        action_space: Discrete or 1-d Box.
        hiddens: Hidden layer sizes (paper 000: (64, 64); paper 002: (32, 32)).
        activation: ``tanh`` | ``relu`` | ``elu`` | ``softsign``.
        head: ``deterministic`` | ``linear`` | ``gaussian`` | ``gaussian_2a``.
        init_log_std: Initial log-std of the ``gaussian`` head.
    """

    log_std: nn.Parameter
    _center: torch.Tensor
    _half: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space[Any],
        hiddens: Sequence[int] = (64, 64),
        activation: str = "tanh",
        head: str = "deterministic",
        init_log_std: float = -0.5,
    ):
        super().__init__()
        check_policy_spec(action_space, head, activation)
        self.head = head
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        box: gym.spaces.Box | None = None
        if isinstance(action_space, gym.spaces.Discrete):
            self.action_dim = int(action_space.n)
        else:
            box = cast(gym.spaces.Box, action_space)  # check_policy_spec: Discrete or a 1-d Box
            self.action_dim = int(box.shape[0])
        out = 2 * self.action_dim if head == "gaussian_2a" else self.action_dim
        self.net = mlp(obs_dim, hiddens, out, lookup(ACTIVATIONS, activation, "activation"))
        if head == "gaussian" and not self.discrete:
            self.log_std = nn.Parameter(torch.full((self.action_dim,), float(init_log_std)))
        if box is not None:
            low = np.where(np.isfinite(box.low), box.low, -1.0)
            high = np.where(np.isfinite(box.high), box.high, 1.0)
            self.register_buffer("_center", torch.as_tensor((high + low) / 2, dtype=torch.float32))
            self.register_buffer("_half", torch.as_tensor((high - low) / 2, dtype=torch.float32))

    def _mean_std(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(mean, std or None) in [-1, 1] units from the network output of a Box policy."""
        if self.head == "gaussian_2a":
            # Paper 000 App. A.1: tanh outputs; variance mapped linearly from [-1, 1] onto [0, 1].
            t = torch.tanh(out)
            var = (t[..., self.action_dim :] + 1.0) / 2.0
            return t[..., : self.action_dim], torch.sqrt(var.clamp_min(1e-12))
        if self.head == "linear":
            return out, None
        mean = torch.tanh(out)
        if self.head == "gaussian":
            return mean, torch.exp(self.log_std).expand_as(mean)
        return mean, None

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """The action distribution (actions in the env's units) of a stochastic head."""
        out = self.net(obs)
        if self.discrete:
            return torch.distributions.Categorical(logits=out)
        mean, std = self._mean_std(out)
        if std is None:
            raise ValueError(f"the {self.head!r} policy head has no action distribution")
        return torch.distributions.Normal(self._center + self._half * mean, self._half * std)

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        """Differentiable deterministic action of a Box policy, in the env's units.

        ``center + half · tanh(net(obs))``: the App. A actor of paper 001 (tanh output) mapped
        onto ``[low, high]``; TD3's π_φ(s) (Fujimoto et al. 2018). For a ``gaussian``/``gaussian_2a``
        head this is the mean action.

        Args:
            obs: Observations, shape [..., obs_dim].

        Returns:
            Actions, shape [..., action_dim], with gradients w.r.t. the policy's parameters.

        Raises:
            ValueError: For a Discrete action space.
        """
        if self.discrete:
            raise ValueError("deterministic_action needs a Box action space, the policy has a Discrete one")
        mean, _ = self._mean_std(self.net(obs))
        return self._center + self._half * mean

    @torch.no_grad()
    def act(self, obs: np.ndarray, explore: bool = False, generator: torch.Generator | None = None) -> int | np.ndarray:
        """One action for one observation, as the env expects it (Box actions clipped to bounds)."""
        out = self.net(torch.from_numpy(np.asarray(obs, dtype=np.float32)))
        if self.discrete:
            if explore and self.head not in DETERMINISTIC_HEADS:
                return int(torch.multinomial(torch.softmax(out, -1), 1, generator=generator))
            return int(torch.argmax(out))
        mean, std = self._mean_std(out)
        if explore and std is not None:
            mean = mean + std * torch.randn(mean.shape, generator=generator)
        return (self._center + self._half * mean.clamp(-1.0, 1.0)).numpy()

    def get_flat(self) -> np.ndarray:
        return torch.nn.utils.parameters_to_vector(self.parameters()).detach().cpu().numpy().astype(np.float32)

    def set_flat(self, theta: np.ndarray) -> None:
        # torch.tensor copies: θ may be a read-only array from Ray's object store. On the parameters'
        # device: vector_to_parameters would otherwise move a GPU policy's weights to the CPU.
        device = next(self.parameters()).device
        vec = torch.tensor(np.asarray(theta), dtype=torch.float32, device=device)
        torch.nn.utils.vector_to_parameters(vec, self.parameters())

    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
