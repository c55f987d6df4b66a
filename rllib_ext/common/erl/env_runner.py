"""ERLEnvRunner: evaluates individuals (ES or RL-trained) and the mean μ; fills the replay actor."""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BlackBoxEnvRunner
from rllib_ext.common.blackbox.protocol import EvaluationJob, IndividualJob, Job, Payload
from rllib_ext.common.erl.critic_worker import make_td3_updater
from rllib_ext.common.erl.population import gaussian_individual
from rllib_ext.common.erl.protocol import ERLPayload, ERLResult
from rllib_ext.common.offpolicy.td3 import TD3Updater
from rllib_ext.common.offpolicy.transitions import ReplayHandle, sample_chunks
from rllib_ext.common.trajectory import ActionExploration, TrajectoryRecorder
from rllib_ext.common.waits import get_within

if TYPE_CHECKING:
    from rllib_ext.common.erl.config import ERLConfig


def train_device(config: AlgorithmConfig, remote: bool = True) -> torch.device:
    """Where a runner trains RL individuals' actors: its GPU when ``num_gpus_per_env_runner`` > 0.

    Raises:
        ValueError: GPUs were asked for, but this remote runner's process sees no CUDA device.
    """
    if float(config.num_gpus_per_env_runner or 0) <= 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if not remote:  # the driver's local runner (``rllib evaluate``) trains no RL individual
            return torch.device("cpu")
        raise ValueError(
            f"num_gpus_per_env_runner={config.num_gpus_per_env_runner:g} but this env runner's process sees no "
            "CUDA device: set num_gpus_per_env_runner=0 to train RL individuals on the runners' CPUs"
        )
    return torch.device("cuda")


def box_dim(space: gym.Space[Any]) -> int:
    """The length of a 1-d Box's samples (TD3's observations)."""
    if space.shape is None:
        raise ValueError(f"the ERL algorithms need a 1-d Box observation space, got {space!r}")
    return int(space.shape[0])


class ERLEnvRunner(BlackBoxEnvRunner):
    """Evaluates individuals (ES or RL-trained) and the mean; fills the replay actor.

    Payload per update: :class:`ERLPayload` (μ, σ², the replay actor handle). Jobs:

    - :class:`~rllib_ext.common.blackbox.protocol.IndividualJob`: z = μ + √var ⊙ ε(seed), or z
      from ``params_ref``; trained for ``rl_steps`` TD3 actor steps first when asked; evaluated
      with action noise ``action_noise`` (Algorithm 2) and stored in the replay actor.
    - :class:`~rllib_ext.common.blackbox.protocol.EvaluationJob`: μ for ``episodes`` episodes with
      the same ``action_noise``, not stored in replay (f(μ)).

    An RL individual's actor steps run on the runner's CPU, or on its GPU when the runner has one
    (RLlib's ``num_gpus_per_env_runner`` > 0, a fraction is fine), as the aes-rl reference's
    workers do; its episodes run on the CPU either way (one state per forward pass).
    """

    result_cls = ERLResult

    config: ERLConfig
    env: gym.Env[Any, Any]  # BlackBoxEnvRunner declares it too (RLlib's EnvRunner.__init__ sets None)

    def __init__(self, *, config: AlgorithmConfig, **kwargs: Any) -> None:
        self._var: np.ndarray | None = None
        self._replay: ReplayHandle | None = None
        self._updater: TD3Updater | None = None
        self.train_device = train_device(config, remote=(kwargs.get("worker_index") or 0) > 0)
        super().__init__(config=config, **kwargs)

    @override(BlackBoxEnvRunner)
    def make_env(self) -> None:
        super().make_env()
        self.recorder = TrajectoryRecorder(self.env)
        seed = None if self._seed is None else int(self._seed) + 7919 * self.worker_index
        self.env = self.exploration = ActionExploration(self.recorder, noise=0.0, seed=seed)

    @override(BlackBoxEnvRunner)
    def adopt(self, version: int, payload: Payload) -> None:
        if not isinstance(payload, ERLPayload):
            raise TypeError(f"{type(self).__name__} adopts an ERLPayload, got a {type(payload).__name__}")
        self._var = None if payload.var is None else np.asarray(payload.var, dtype=np.float32)
        self._replay = payload.replay
        super().adopt(version, payload)

    def _td3(self) -> TD3Updater:
        """The TD3 actor trainer of RL individuals: on the CPU its actor is the module's policy
        itself; on a GPU, a copy of it there."""
        if self._updater is None:
            on_cpu = self.train_device.type == "cpu"
            self._updater = make_td3_updater(
                box_dim(self.env.observation_space),
                self.env.action_space,
                self.config.td3_settings,
                actor=self.module.policy if on_cpu else copy.deepcopy(self.module.policy),
                device=self.train_device,
            )
        return self._updater

    def train_actor(self, z: np.ndarray, critic_state: dict[str, np.ndarray], steps: int) -> float:
        """An RL individual: ``steps`` TD3 actor steps from z against fixed critic weights; mean loss.

        The module's policy holds the trained z afterwards (its episodes run on the CPU)."""
        upd = self._td3()
        self.module.set_flat(z)
        copied = upd.actor is not self.module.policy
        if copied:
            upd.actor.load_state_dict(self.module.policy.state_dict())
        upd.critic.load_state_dict({k: torch.tensor(v) for k, v in critic_state.items()})
        upd.actor_optimizer = upd.make_optimizer(upd.actor.parameters(), self.config.actor_lr)  # a fresh one
        if self._replay is None:
            raise RuntimeError("an RL individual trains on replay minibatches, but no payload brought the replay actor")
        loss_sum, done = 0.0, 0
        chunks = sample_chunks(
            self._replay, int(self.config.rl_batch_size), int(steps), int(self.config.replay_sample_chunk), ("obs",)
        )
        for n, data in chunks:  # an actor step needs states only (Eq. 1: −Q1(s, π(s)))
            loss_sum += upd.actor_steps(data["obs"][:n])["actor_loss"] * n
            done += n
        if copied:
            self.module.policy.load_state_dict(upd.actor.state_dict())  # copied back to the CPU
        return loss_sum / done if done else float("nan")

    @override(BlackBoxEnvRunner)
    def run_job(self, job: Job) -> ERLResult:
        if isinstance(job, IndividualJob):
            return self._individual_job(job)
        if isinstance(job, EvaluationJob):  # f(μ): the individuals' action noise, not stored in replay
            self.set_params(self._theta)
            return self._evaluate_with(job, noise=self.config.action_noise, random_actions=False)
        raise TypeError(f"{type(self).__name__} cannot run a {type(job).__name__}")

    def _evaluate_with(self, job: Job, noise: float, random_actions: bool) -> ERLResult:
        self.exploration.noise, self.exploration.random_actions = float(noise), bool(random_actions)
        try:
            return cast(ERLResult, self.evaluate(job, explore=False))  # it builds result_cls
        finally:
            self.exploration.noise, self.exploration.random_actions = 0.0, False

    def _individual_job(self, job: IndividualJob) -> ERLResult:
        t0 = time.perf_counter()
        params: np.ndarray | None = None
        actor_loss = float("nan")
        try:
            if job.params_ref is not None:
                z = np.asarray(get_within(job.params_ref[0], "an individual's parameters"), dtype=np.float32)
            elif self._var is None or job.seed is None:
                raise TypeError(f"individual job {job.id}: a seed and the payload's σ² make z, or params_ref gives it")
            else:
                z = gaussian_individual(self._theta, self._var, job.seed)
            if job.rl_steps:
                if job.critic_ref is None:
                    raise TypeError(f"individual job {job.id}: an RL individual needs critic_ref")
                critic = get_within(job.critic_ref[0], "the critic's weights")
                actor_loss = self.train_actor(z, critic, int(job.rl_steps))
                z = params = self.module.get_flat()
            train_s = time.perf_counter() - t0
            self.set_params(z)
            result = self._evaluate_with(job, self.config.action_noise, job.random_actions)
            if not result.failed and self._replay is not None:
                self._replay.add.remote(**self.recorder.transitions())  # Algorithm 2 line 14
        except ray.exceptions.RayError as e:  # the replay actor or a critic object was lost
            train_s = time.perf_counter() - t0
            result = ERLResult(
                job=job,
                ret=float("nan"),
                failed=True,
                episodes_failed=1,
                error=f"{type(e).__name__}: {e}",
                theta_digest=self._theta_digest,
            )
        result.params, result.rl, result.actor_loss, result.train_s = params, bool(job.rl_steps), actor_loss, train_s
        result.runner, result.duration_s = self.worker_index, time.perf_counter() - t0
        return result
