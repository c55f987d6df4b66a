"""CriticWorker: the ERL family's shared TD3 critic, trained in its own Ray actor."""

from __future__ import annotations

import time
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np
import ray
import torch

from rllib_ext.common.erl.protocol import CriticReply
from rllib_ext.common.offpolicy.td3 import TD3Updater, make_actor
from rllib_ext.common.offpolicy.transitions import ReplayHandle, sample_chunks
from rllib_ext.common.policies import MLPPolicy
from rllib_ext.common.waits import RemoteMethod, get_within


def make_td3_updater(
    obs_dim: int,
    action_space: gym.Space[Any],
    settings: dict[str, Any],
    *,
    actor: MLPPolicy,
    seed: int | None = None,
    device: str | torch.device = "cpu",
) -> TD3Updater:
    """The family's TD3 trainer from ``ERLConfig.td3_settings``, around a given actor (critic worker: μ;
    env runner: the RL individual, i.e. its module's policy), on ``device``."""
    s = settings
    return TD3Updater(
        obs_dim,
        action_space,
        hiddens=tuple(s["critic_hiddens"]),
        actor_lr=s["actor_lr"],
        critic_lr=s["critic_lr"],
        gamma=s["gamma"],
        tau=s["tau"],
        policy_noise=s["policy_noise"],
        noise_clip=s["noise_clip"],
        policy_delay=s["policy_delay"],
        seed=seed,
        optimizer=s["optimizer"],
        optimizer_kwargs=s["optimizer_kwargs"],
        actor=actor,
        device=device,
    )


class CriticWorker:
    """The shared TD3 critic in its own process (paper 001 Fig. 2b, Algorithm 1 line 3).

    Each :meth:`train` call sets the actor and the target actor used in the TD3 target to the
    given parameters (AES-RL: the population mean μ, as the reference code does; CEM-RL: the RL
    individual about to be trained), then takes ``steps`` critic steps on replay minibatches,
    soft-updating the target critic every ``policy_delay`` critic steps (1, every step, by default:
    the references' schedule; see :class:`~rllib_ext.common.erl.config.ERLConfig`).

    ``device``: ``"cuda"`` when the algorithm gives the worker a GPU (``critic_num_gpus``), as both
    reference codes train their critic on one; weights leave the worker as CPU arrays either way.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: gym.Space[Any],
        settings: dict[str, Any],
        replay: ReplayHandle,
        seed: int | None = None,
        device: str = "cpu",
    ) -> None:
        torch.set_num_threads(1)
        self.settings, self.replay = dict(settings), replay
        s = self.settings
        # The actor (μ, the TD3 target policy) has the population's shape; the critics their own.
        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(int(seed))
            actor = make_actor(obs_dim, action_space, tuple(s["policy_hiddens"]))
        self.updater = make_td3_updater(obs_dim, action_space, s, actor=actor, seed=seed, device=device)

    def set_replay(self, replay: ReplayHandle) -> None:
        self.replay = replay

    def critic_weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.updater.critic.state_dict().items()}

    def train(self, steps: int, actor_flat: np.ndarray, max_s: float | None = None) -> CriticReply:
        """``steps`` critic steps with π' = π = ``actor_flat``; the reply carries the new critic weights.

        Args:
            steps: Critic steps to take.
            actor_flat: The flat parameters of π (the TD3 target actor).
            max_s: If given, the call returns early once this many seconds have passed, checked
                after each replay chunk (``replay_sample_chunk`` steps), with the steps it took
                (AES-RL's ``critic_call_s``: fresh weights at least that often on a busy machine).
        """
        t0 = time.perf_counter()
        upd = self.updater
        batch = int(self.settings["rl_batch_size"])
        if (
            get_within(self.replay.size.remote(), "the replay actor's size") < batch
        ):  # e.g. after a restore without replay contents
            return CriticReply(critic=None, stats={}, steps=0, train_s=time.perf_counter() - t0)
        upd.actor.set_flat(actor_flat)
        upd.actor_target.set_flat(actor_flat)
        done = 0
        sums: dict[str, float] = {}
        for n, data in sample_chunks(self.replay, batch, int(steps), int(self.settings["replay_sample_chunk"])):
            # The critic's target follows it every d critic steps (the reference ERL critics).
            for k, v in upd.critic_steps(data, target_every=upd.policy_delay).items():
                sums[k] = sums.get(k, 0.0) + n * v
            done += n
            if max_s is not None and time.perf_counter() - t0 >= max_s:
                break
        mean = {k: v / done for k, v in sums.items()}
        return CriticReply(critic=self.critic_weights(), stats=mean, steps=done, train_s=time.perf_counter() - t0)

    def get_state(self) -> dict[str, Any]:
        return self.updater.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.updater.set_state(state)


class CriticHandle(Protocol):
    """A :class:`CriticWorker` actor's handle: its methods, called with ``.remote``."""

    @property
    def train(self) -> RemoteMethod[CriticReply]: ...
    @property
    def set_replay(self) -> RemoteMethod[None]: ...
    @property
    def get_state(self) -> RemoteMethod[dict[str, Any]]: ...
    @property
    def set_state(self) -> RemoteMethod[None]: ...


def critic_worker_actor(
    obs_dim: int,
    action_space: gym.Space[Any],
    settings: dict[str, Any],
    replay: ReplayHandle,
    seed: int | None,
    *,
    num_cpus: float,
    num_gpus: float,
) -> CriticHandle:
    """A new :class:`CriticWorker` actor with ``num_cpus`` and ``num_gpus`` (on ``"cuda"`` when > 0)."""
    remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus)(CriticWorker)
    handle = remote.remote(obs_dim, action_space, settings, replay, seed, device="cuda" if num_gpus > 0 else "cpu")
    return cast(CriticHandle, handle)
