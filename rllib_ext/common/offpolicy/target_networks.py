"""Soft target-network updates, w̃ ← (1 − τ)w̃ + τw, shared by the TD3 family (TD3_EXT, AES-RL,
CEM-RL; Fujimoto et al. 2018, Algorithm 1) and the ReF-ER learners (paper 003, Algorithm 4).

One fused op over all tensors (:func:`rllib_ext._compat.foreach_lerp_`: w̃ + τ(w − w̃)). It equals RLlib's
``update_target_network`` (τw + (1−τ)w̃ through a rebuilt ``state_dict``) up to float rounding,
which cost 0.8 ms per DDPG step at 2×128 against 0.03 ms here.
"""

from __future__ import annotations

import torch

from rllib_ext._compat import foreach_lerp_


def soft_update_tensors(
    main_net: torch.nn.Module, target_net: torch.nn.Module
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(target tensors, main tensors) that the soft update moves: parameters and floating-point buffers.

    The same entries as the networks' ``state_dict`` (which RLlib's ``update_target_network``
    averages), in the same order; integer buffers are left out (averaging does not apply).
    Constant buffers (e.g. an actor's action bounds) are equal in both nets and stay so.
    """
    main: dict[str, torch.Tensor] = dict(main_net.named_parameters())
    main.update((name, b) for name, b in main_net.named_buffers() if b.is_floating_point())
    target: dict[str, torch.Tensor] = dict(target_net.named_parameters())
    target.update((name, b) for name, b in target_net.named_buffers() if b.is_floating_point())
    if main.keys() != target.keys():
        raise ValueError(f"target network entries {sorted(target)} differ from the main network's {sorted(main)}")
    return [target[name] for name in main], list(main.values())


@torch.no_grad()
def lerp_targets(targets: list[torch.Tensor], mains: list[torch.Tensor], tau: float) -> None:
    """w̃ ← (1−τ)w̃ + τw for each (target, main) pair of :func:`soft_update_tensors`, in one op."""
    if targets:
        foreach_lerp_(targets, mains, tau)


def soft_update(target_net: torch.nn.Module, main_net: torch.nn.Module, tau: float) -> None:
    """w̃ ← (1−τ)w̃ + τw for every parameter and floating-point buffer of ``target_net``."""
    lerp_targets(*soft_update_tensors(main_net, target_net), tau)
