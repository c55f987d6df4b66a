"""TD3 building blocks (Fujimoto et al. 2018), shared by TD3_EXT, AESRL_EXT and CEMRL_EXT.

Fujimoto, van Hoof & Meger, "Addressing Function Approximation Error in Actor-Critic Methods"
(ICML 2018) — the RL part of AES-RL (paper 001, ``../shared/papers/001_6bf500f1c5f7a9b5.txt``).

* :class:`TwinCritic`: the two critics Q_θ1, Q_θ2 of paper 001 App. A (Table 4): concat(s, a) →
  400 → leaky ReLU → 300 → leaky ReLU → 1, each.
* The actor is an :class:`~rllib_ext.common.policies.MLPPolicy` with ``hiddens=(400, 300)``,
  ``activation="tanh"``, ``head="deterministic"`` (App. A: 400 → tanh → 300 → tanh → action_dim →
  tanh), mapped onto the Box bounds; :func:`make_actor` builds it.
* :func:`td3_critic_loss`: clipped double-Q target (Fujimoto et al. Eq. 10) with target policy
  smoothing (§5.3), both critics regressed onto it.
* :func:`td3_actor_loss`: the deterministic policy gradient through Q_θ1 (Eq. 1).
* :func:`~rllib_ext.common.offpolicy.target_networks.soft_update`: θ' ← τθ + (1 − τ)θ' (Algorithm 1).
* :class:`TD3Updater`: one TD3 iteration — a critic step every call, an actor step and both
  soft target updates every ``policy_delay``-th call (§5.2, delayed policy updates) — with its
  networks, Adam optimizers, counters and state. Framework-neutral (plain torch), so that an
  RLlib Learner, a Ray actor or a test can drive it.

Action units: actions are in the env's units throughout (the actor maps tanh onto
``[low, high]``); TD3 scales its noises by ``max_action``, here by the half-range
``half = (high − low)/2`` per dimension, which is the same for symmetric bounds.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rllib_ext.common.mlp import mlp
from rllib_ext.common.offpolicy.target_networks import soft_update
from rllib_ext.common.policies import MLPPolicy

logger = logging.getLogger(__name__)

#: Hidden sizes of the actor and of each critic, paper 001 App. A ((256, 256) for Humanoid).
PAPER_HIDDENS = (400, 300)

#: Keys of the batches :func:`td3_critic_loss` and :meth:`TD3Updater.update` take.
BATCH_KEYS = ("obs", "actions", "rewards", "next_obs", "terminateds")


def make_actor(obs_dim: int, action_space: gym.Space[Any], hiddens: Sequence[int] = PAPER_HIDDENS) -> MLPPolicy:
    """The App. A actor of paper 001: tanh MLP with a tanh output mapped onto the Box bounds.

    Args:
        obs_dim: Flattened observation size.
        action_space: A 1-d Box.
        hiddens: Hidden sizes; (400, 300) in paper 001 ((256, 256) for Humanoid).

    Returns:
        An :class:`MLPPolicy` with ``activation="tanh"``, ``head="deterministic"``.
    """
    if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        raise ValueError(f"TD3 needs a 1-d Box action space, got {action_space}")
    return MLPPolicy(obs_dim, action_space, hiddens=tuple(hiddens), activation="tanh", head="deterministic")


class TwinCritic(nn.Module):
    """Q_θ1 and Q_θ2 of TD3 with paper 001's App. A critic architecture.

    Each: Linear(obs_dim + act_dim, 400) → leaky ReLU → Linear(400, 300) → leaky ReLU →
    Linear(300, 1) (Table 4; leaky ReLU with torch's default slope 0.01).

    Args:
        obs_dim: Flattened observation size.
        act_dim: Action size.
        hiddens: Hidden sizes of each Q network; (400, 300).
    """

    def __init__(self, obs_dim: int, act_dim: int, hiddens: Sequence[int] = PAPER_HIDDENS):
        super().__init__()
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.q1_net = mlp(self.obs_dim + self.act_dim, hiddens, 1, nn.LeakyReLU)
        self.q2_net = mlp(self.obs_dim + self.act_dim, hiddens, 1, nn.LeakyReLU)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q_θ1(s, a), Q_θ2(s, a)), each of shape [B]."""
        x = torch.cat([obs, act], dim=-1)
        return self.q1_net(x).squeeze(-1), self.q2_net(x).squeeze(-1)

    def q1(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Q_θ1(s, a), shape [B] (the critic of the actor's loss)."""
        q: torch.Tensor = self.q1_net(torch.cat([obs, act], dim=-1))
        return q.squeeze(-1)


def td3_critic_loss(
    critic: TwinCritic,
    critic_target: TwinCritic,
    actor_target: MLPPolicy,
    batch: dict[str, torch.Tensor],
    *,
    gamma: float,
    policy_noise: float,
    noise_clip: float,
    generator: torch.Generator | None = None,
    tensor_stats: bool = False,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The TD3 critic loss with target policy smoothing and clipped double-Q.

    Target action (§5.3, target policy smoothing), with half = the action half-range:
    ã = clip(π_φ'(s') + clip(ε·policy_noise·half, −noise_clip·half, noise_clip·half), low, high),
    ε ~ N(0, I). Target (clipped double Q-learning, Eq. 10): y = r + γ(1 − d)·min(Q_θ1', Q_θ2')(s', ã).
    Loss: MSE(Q_θ1(s, a), y) + MSE(Q_θ2(s, a), y) (Algorithm 1).

    Args:
        critic: Q_θ1, Q_θ2.
        critic_target: Q_θ1', Q_θ2'.
        actor_target: π_φ' (an :class:`MLPPolicy`; :meth:`~MLPPolicy.deterministic_action`).
        batch: Float tensors ``obs`` [B, obs_dim], ``actions`` [B, act_dim], ``rewards`` [B],
            ``next_obs`` [B, obs_dim], ``terminateds`` [B] (1.0 where the episode ended by
            termination; truncated episodes bootstrap).
        gamma: Discount γ.
        policy_noise: σ of the smoothing noise, in half-ranges (TD3: 0.2).
        noise_clip: c, the noise clip, in half-ranges (TD3: 0.5).
        generator: Optional torch generator for ε.
        tensor_stats: Return the statistics as detached 0-d tensors on the batch's device instead of
            floats (a ``float()`` waits for a GPU; :meth:`TD3Updater.critic_steps` reads them once
            per chunk of steps).

    Returns:
        (loss, stats) with stats ``critic_loss``, ``q1_mean``, ``q2_mean``, ``target_q_mean``.
    """
    obs, actions = batch["obs"], batch["actions"]
    rewards = batch["rewards"].reshape(-1)
    not_done = 1.0 - batch["terminateds"].reshape(-1).float()
    with torch.no_grad():
        half, center = actor_target._half, actor_target._center
        next_action = actor_target.deterministic_action(batch["next_obs"])
        eps = torch.randn(next_action.shape, generator=generator, dtype=next_action.dtype, device=next_action.device)
        noise = torch.maximum(torch.minimum(eps * policy_noise * half, noise_clip * half), -noise_clip * half)
        next_action = torch.maximum(torch.minimum(next_action + noise, center + half), center - half)
        tq1, tq2 = critic_target(batch["next_obs"], next_action)
        y = rewards + gamma * not_done * torch.min(tq1, tq2)  # Eq. (10)
    q1, q2 = critic(obs, actions)
    loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
    stats = {"critic_loss": loss.detach(), "q1_mean": q1.detach().mean(), "q2_mean": q2.detach().mean()}
    stats["target_q_mean"] = y.mean()
    return loss, stats if tensor_stats else {k: float(v) for k, v in stats.items()}


def td3_actor_loss(actor: MLPPolicy, critic: TwinCritic, obs: torch.Tensor) -> torch.Tensor:
    """−Q_θ1(s, π_φ(s)) averaged over the batch: the deterministic policy gradient (Eq. 1).

    The critic must be held fixed: step only the actor's optimizer (:meth:`TD3Updater.actor_step`
    also switches off the critic's weight gradients while it backpropagates this loss).
    """
    return -critic.q1(obs, actor.deterministic_action(obs)).mean()


class TD3Updater:
    """TD3's networks, optimizers and update schedule (Fujimoto et al. 2018, Algorithm 1).

    :meth:`update` is one TD3 iteration: a critic step on every call, and on every
    ``policy_delay``-th call an actor step followed by the soft updates of both target
    networks (§5.2). :meth:`critic_step` and :meth:`actor_step` can also be called on their own,
    e.g. to train an actor (after :meth:`MLPPolicy.set_flat`) against fixed critic weights,
    as the RL individuals of AES-RL and CEM-RL do.

    Args:
        obs_dim: Flattened observation size.
        action_space: 1-d Box.
        hiddens: Hidden sizes of the actor and of each critic (paper 001 App. A: (400, 300)).
        actor_lr: Adam learning rate of the actor (1e-3).
        critic_lr: Adam learning rate of the critics (1e-3).
        gamma: Discount γ (0.99).
        tau: τ of the soft target updates (0.005).
        policy_noise: σ of the target smoothing noise, in half-ranges (0.2).
        noise_clip: c, its clip, in half-ranges (0.5).
        policy_delay: d, critic steps per actor step (2).
        optimizer: The optimizer of both networks by name (``rllib_ext.optim``: ``"adam"``, TD3's,
            or ``"sgd"``, ``"msgd"``, ``"dsgd"``, paper 000 §4); ``optimizer_kwargs`` go to its
            constructor. DSGD without reported rewards keeps η0 (see :class:`~rllib_ext.optim.DSGD`).
            Adam runs torch's fused implementation (``fused=True``: the same update, one kernel over
            all parameters instead of a Python loop over them; a 400-300 TD3 step takes 0.87–0.88× the
            time on one CPU thread) unless ``optimizer_kwargs`` names ``fused`` or ``foreach``.
        seed: Seeds the networks' initialization (without touching torch's global RNG) and
            the smoothing noise; None: torch's global RNG initializes, a random seed the noise.
        actor, critic: Networks to train instead of new ones (e.g. an RLModule's); targets
            start as copies of them unless ``actor_target`` / ``critic_target`` are given.
        device: Where the networks, their targets and the smoothing noise live (``"cpu"``, or
            ``"cuda"`` for the ERL family's critic worker on a GPU); batches are moved there.
            :meth:`get_state` always returns CPU arrays and tensors, so a state moves between devices.

    Attributes:
        actor, actor_target: π_φ and π_φ' (:class:`MLPPolicy`).
        critic, critic_target: (Q_θ1, Q_θ2) and their targets (:class:`TwinCritic`).
        actor_optimizer, critic_optimizer: Adam (or the optimizer chosen by name).
        num_updates: Calls of :meth:`update` so far.
        num_critic_steps, num_actor_steps: Gradient steps taken by each optimizer.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space[Any],
        hiddens: Sequence[int] = PAPER_HIDDENS,
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        gamma: float = 0.99,
        tau: float = 0.005,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        policy_delay: int = 2,
        seed: int | None = None,
        *,
        optimizer: str = "adam",
        optimizer_kwargs: dict[str, Any] | None = None,
        actor: MLPPolicy | None = None,
        critic: TwinCritic | None = None,
        actor_target: MLPPolicy | None = None,
        critic_target: TwinCritic | None = None,
        device: str | torch.device = "cpu",
    ):
        if int(policy_delay) < 1:
            raise ValueError(f"policy_delay must be >= 1, got {policy_delay!r}")
        if not 0.0 < float(tau) <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau!r}")
        self.gamma, self.tau = float(gamma), float(tau)
        self.policy_noise, self.noise_clip = float(policy_noise), float(noise_clip)
        self.policy_delay = int(policy_delay)
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ValueError(f"TD3 needs a 1-d Box action space, got {action_space}")
        act_dim = int(action_space.shape[0])
        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(int(seed))
            self.actor = actor if actor is not None else make_actor(obs_dim, action_space, hiddens)
            self.critic = critic if critic is not None else TwinCritic(obs_dim, act_dim, hiddens)
        self.actor_target = actor_target if actor_target is not None else copy.deepcopy(self.actor)
        self.critic_target = critic_target if critic_target is not None else copy.deepcopy(self.critic)
        self.device = torch.device(device)
        for net in (self.actor, self.critic, self.actor_target, self.critic_target):
            net.to(self.device)
        for p in list(self.actor_target.parameters()) + list(self.critic_target.parameters()):
            p.requires_grad_(False)
        self.optimizer_name, self.optimizer_kwargs = optimizer, dict(optimizer_kwargs or {})
        self.actor_optimizer = self.make_optimizer(self.actor.parameters(), actor_lr)
        self.critic_optimizer = self.make_optimizer(self.critic.parameters(), critic_lr)
        self.generator = torch.Generator(device=self.device)
        if seed is not None:
            self.generator.manual_seed(int(seed) + 1)
        else:
            self.generator.seed()
        self.num_updates = 0
        self.num_critic_steps = 0
        self.num_actor_steps = 0

    def make_optimizer(self, params: Iterable[torch.Tensor], lr: float) -> torch.optim.Optimizer:
        """An optimizer of the chosen kind (``rllib_ext.optim``: adam, sgd, msgd, dsgd) over ``params``."""
        from rllib_ext.optim import make_optimizer

        kwargs = dict(self.optimizer_kwargs)
        if self.optimizer_name.lower() == "adam" and not {"fused", "foreach"} & kwargs.keys():
            kwargs["fused"] = True  # per step: one kernel instead of ~2 per tensor (dispatch-bound at batch 100)
        return make_optimizer(self.optimizer_name, params, lr=float(lr), **kwargs)

    def critic_step(self, batch: dict[str, Any]) -> dict[str, float]:
        """One Adam step of both critics on :func:`td3_critic_loss`.

        Args:
            batch: ``obs, actions, rewards, next_obs, terminateds`` (tensors or arrays).

        Returns:
            The loss statistics of :func:`td3_critic_loss`.
        """
        return {k: float(v) for k, v in self._critic_step(as_tensors(batch, self.device)).items()}

    def critic_steps(self, batches: dict[str, Any], target_every: int | None = None) -> dict[str, float]:
        """n :meth:`critic_step` calls on stacked batches, with one transfer to the device and one
        read of the statistics (per-step ``float()`` reads make a GPU wait at every step).

        Args:
            batches: ``obs, actions, rewards, next_obs, terminateds`` stacked as [n, B, ...].
            target_every: Soft-update the critic's target (only) after every critic step whose
                count :attr:`num_critic_steps` is a multiple of this (the ERL critic worker: d);
                None: no target updates.

        Returns:
            The statistics of :func:`td3_critic_loss`, averaged over the n steps ({} for n = 0).
        """
        stacked = as_tensors(batches, self.device)
        per_step = []
        for i in range(int(stacked["obs"].shape[0])):
            per_step.append(self._critic_step({k: v[i] for k, v in stacked.items()}))
            if target_every and self.num_critic_steps % int(target_every) == 0:
                soft_update(self.critic_target, self.critic, self.tau)
        if not per_step:
            return {}
        means = torch.stack([torch.stack(list(s.values())) for s in per_step]).mean(0).cpu().tolist()
        return dict(zip(per_step[0], means, strict=True))

    def _critic_step(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        loss, stats = td3_critic_loss(
            self.critic,
            self.critic_target,
            self.actor_target,
            batch,
            gamma=self.gamma,
            policy_noise=self.policy_noise,
            noise_clip=self.noise_clip,
            generator=self.generator,
            tensor_stats=True,
        )
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
        self.critic_optimizer.step()
        self.num_critic_steps += 1
        return stats

    def actor_step(self, obs: torch.Tensor | np.ndarray) -> dict[str, float]:
        """One Adam step of the actor on :func:`td3_actor_loss` (the critics are not changed).

        Args:
            obs: Observations [B, obs_dim] (tensor or array).

        Returns:
            ``actor_loss``.
        """
        obs = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        with self._critic_held():
            return {"actor_loss": float(self._actor_step(obs))}

    def actor_steps(self, obs: torch.Tensor | np.ndarray) -> dict[str, float]:
        """n :meth:`actor_step` calls on stacked observations, with one transfer to the device and
        one read of the loss (an RL individual's chunk of minibatches; see :meth:`critic_steps`).

        Args:
            obs: Observations stacked as [n, B, obs_dim] (tensor or array).

        Returns:
            ``actor_loss`` averaged over the n steps ({} for n = 0).
        """
        stacked = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        with self._critic_held():  # once per chunk, not per step
            losses = [self._actor_step(stacked[i]) for i in range(int(stacked.shape[0]))]
        return {"actor_loss": float(torch.stack(losses).mean())} if losses else {}

    @contextlib.contextmanager
    def _critic_held(self) -> Iterator[None]:
        """The critic held fixed: no weight gradients are computed for it meanwhile."""
        critic_params = [p for p in self.critic.parameters() if p.requires_grad]
        for p in critic_params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in critic_params:
                p.requires_grad_(True)

    def _actor_step(self, obs: torch.Tensor) -> torch.Tensor:
        """One actor step; the caller holds the critic (:meth:`_critic_held`)."""
        loss = td3_actor_loss(self.actor, self.critic, obs)
        self.actor_optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward is unannotated
        self.actor_optimizer.step()
        self.num_actor_steps += 1
        return loss.detach()

    def update_targets(self) -> None:
        """Soft updates of both target networks by τ (Algorithm 1)."""
        soft_update(self.critic_target, self.critic, self.tau)
        soft_update(self.actor_target, self.actor, self.tau)

    def update(self, batch: dict[str, Any]) -> dict[str, float]:
        """One TD3 iteration (Algorithm 1): critic step; every d-th call also actor step and targets.

        Args:
            batch: ``obs, actions, rewards, next_obs, terminateds`` (tensors or arrays).

        Returns:
            The critic statistics, plus ``actor_loss`` on the calls that updated the actor.
        """
        batch = as_tensors(batch, self.device)
        stats = self.critic_step(batch)
        self.num_updates += 1
        if self.num_updates % self.policy_delay == 0:  # §5.2: delayed policy updates
            stats.update(self.actor_step(batch["obs"]))
            self.update_targets()
        return stats

    def get_state(self) -> dict[str, Any]:
        """Weights, targets, optimizer states, counters and the noise generator's state, on the CPU."""
        return {
            "actor": _numpy_state(self.actor.state_dict()),
            "critic": _numpy_state(self.critic.state_dict()),
            "actor_target": _numpy_state(self.actor_target.state_dict()),
            "critic_target": _numpy_state(self.critic_target.state_dict()),
            # Copies: torch's state_dict() and load_state_dict() share the moment tensors.
            "actor_optimizer": _on_cpu(self.actor_optimizer.state_dict()),
            "critic_optimizer": _on_cpu(self.critic_optimizer.state_dict()),
            "num_updates": self.num_updates,
            "num_critic_steps": self.num_critic_steps,
            "num_actor_steps": self.num_actor_steps,
            "generator": self.generator.get_state().numpy(),
            "generator_device": self.device.type,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`'s output (any subset of its keys)."""
        for name in ("actor", "critic", "actor_target", "critic_target"):
            if name in state:
                # Copies: restored arrays may be read-only (Ray's object store), which torch warns about.
                getattr(self, name).load_state_dict({k: torch.tensor(v) for k, v in state[name].items()})
        if "actor_optimizer" in state:
            self.actor_optimizer.load_state_dict(copy.deepcopy(state["actor_optimizer"]))
        if "critic_optimizer" in state:
            self.critic_optimizer.load_state_dict(copy.deepcopy(state["critic_optimizer"]))
        for name in ("num_updates", "num_critic_steps", "num_actor_steps"):
            if name in state:
                setattr(self, name, int(state[name]))
        if "generator" in state:
            if state.get("generator_device", "cpu") == self.device.type:
                self.generator.set_state(torch.as_tensor(np.asarray(state["generator"]), dtype=torch.uint8))
            else:  # a CPU generator's state does not fit a CUDA one (nor back): the noise stream differs
                logger.warning(
                    "rllib_ext: TD3 state saved with its smoothing noise on %s, restored on %s: the noise "
                    "generator keeps its own seed's stream (weights, optimizers and counters are restored)",
                    state.get("generator_device", "cpu"),
                    self.device.type,
                )


def as_tensors(batch: dict[str, Any], device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """The :data:`BATCH_KEYS` of ``batch`` as float32 tensors on ``device`` (on the CPU, arrays are
    wrapped, not copied)."""
    missing = [k for k in BATCH_KEYS if k not in batch]
    if missing:
        raise ValueError(f"TD3 batch lacks {missing}; needs {list(BATCH_KEYS)}")
    return {k: torch.as_tensor(batch[k], dtype=torch.float32, device=device) for k in BATCH_KEYS}


def _on_cpu(tree: Any) -> Any:
    """A deep copy of an optimizer's state dict with every tensor on the CPU (torch's
    ``load_state_dict`` moves the moments back to the parameters' device)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu().clone()
    if isinstance(tree, dict):
        return {k: _on_cpu(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_on_cpu(v) for v in tree)
    return copy.deepcopy(tree)


def _numpy_state(state_dict: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in state_dict.items()}
