"""BlackBoxEnvRunner: the lean env runner (a plain gymnasium episode loop with a numpy policy)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MAX,
    EPISODE_RETURN_MEAN,
    EPISODE_RETURN_MIN,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
)

from rllib_ext.common.blackbox import samplers as samplers_lib
from rllib_ext.common.blackbox.fast_policy import NumpyPolicy
from rllib_ext.common.blackbox.noise_table import NoiseTable
from rllib_ext.common.blackbox.obs_filter import ObservationFilter
from rllib_ext.common.blackbox.protocol import (
    Call,
    EpisodeResult,
    EvaluationJob,
    Job,
    Payload,
    PerturbationJob,
    Reply,
    theta_digest,
)
from rllib_ext.common.blackbox.rl_module import BlackBoxRLModule
from rllib_ext.common.policies import check_policy_spec
from rllib_ext.common.validation import make_single_env
from rllib_ext.common.waits import get_within

if TYPE_CHECKING:
    from rllib_ext.common.blackbox.config import BlackBoxConfig

logger = logging.getLogger(__name__)

# Tags that keep the episode seeds of perturbations and of θ_u's evaluations apart.
PERTURBATION_STREAM, EVALUATION_STREAM = 1, 2

#: Step cap of an env without its own time limit (``max_episode_steps=None``).
DEFAULT_MAX_EPISODE_STEPS = 10_000


def all_finite(obs: Any) -> bool:
    """Whether every number of an observation is finite (the exact check, any observation)."""
    return bool(np.isfinite(obs).all())


def finite_check(space: gym.Space[Any]) -> Callable[[Any], bool]:
    """The observation check of an env with observation space ``space``: :func:`all_finite`, or for a
    1-d float Box an exact check ~5× cheaper (one env step of a short episode spends ~10% in the
    exact one): obs·0 is 0 when every number is finite and NaN otherwise (0·inf is NaN), and it
    cannot overflow. Anything else (another shape or type) takes the exact check."""
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and np.issubdtype(space.dtype, np.floating)):
        return all_finite
    zeros = np.zeros(space.shape, dtype=space.dtype)

    def vector_all_finite(obs: Any) -> bool:
        if type(obs) is np.ndarray and obs.shape == zeros.shape:
            try:
                return math.isfinite(obs.dot(zeros))
            except FloatingPointError:  # np.seterr(invalid="raise") and an inf: not finite
                pass
        return all_finite(obs)

    return vector_all_finite


def episode_seed(entropy: tuple[int, ...] | None, k: int) -> int | None:
    """Seed of episode k of a job whose ``env_seed`` is ``entropy`` (None: the runner's stream)."""
    if entropy is None:
        return None
    return int(np.random.SeedSequence([*entropy, int(k)]).generate_state(1)[0])


class EpisodeRecord:
    """What ``BlackBoxEnvRunner.sample`` returns per episode (``get_return()``, ``len()``)."""

    __slots__ = ("ret", "length")

    def __init__(self, ret: float, length: int) -> None:
        self.ret, self.length = ret, length

    def get_return(self) -> float:
        return self.ret

    def __len__(self) -> int:
        return self.length


class EpisodeFailed(Exception):
    """An episode that cannot count: the env raised, or returned a non-finite value.

    Attributes:
        steps: Env steps the episode simulated before it failed, the failing ``step()`` included.
    """

    def __init__(self, message: str, steps: int = 0) -> None:
        super().__init__(message)
        self.steps = int(steps)


class BlackBoxEnvRunner(EnvRunner, Checkpointable):
    """Lean env runner: a plain episode loop with the policy of :class:`BlackBoxRLModule`.

    Remote method used by the driver (:class:`AsyncJobPool`): :meth:`run_jobs` (a typed
    :class:`~rllib_ext.common.blackbox.protocol.Call` in, a ``Reply`` out). RLlib's own
    contract (state sync, restarts, ``rllib evaluate``): :meth:`sample`, :meth:`get_state`,
    :meth:`set_state`, :meth:`get_spaces`, :meth:`get_metrics`, :meth:`assert_healthy`.
    """

    config: BlackBoxConfig
    # RLlib's EnvRunner.__init__ sets both to None (unannotated); make_env/make_module build them.
    env: gym.Env[Any, Any]  # type: ignore[assignment]
    module: BlackBoxRLModule

    def __init__(self, *, config: AlgorithmConfig, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.worker_index = kwargs.get("worker_index", 0) or 0
        self.make_env()
        self.make_module()
        obs_shape = self.env.observation_space.shape
        if obs_shape is None:
            raise ValueError(
                f"{type(self).__name__} needs an observation space with a shape, got {self.env.observation_space}"
            )
        self.obs_filter = ObservationFilter(
            obs_shape,
            clip=self.config.obs_clip,
            enabled=bool(self.config.observation_filter),
        )
        self.version = -1
        self._theta = self.module.get_flat()
        self._theta_digest = -1
        self._samplers: dict[int, samplers_lib.PerturbationSampler] = {}
        self._noise: np.ndarray | None = None  # the shared noise table (read-only, Ray's object store)
        self._noise_tables: dict[int, NoiseTable] = {}
        self._perturb_buf: np.ndarray | None = None  # θ_u + σε of the job running (_perturb_into_buffer)
        self._rng = np.random.default_rng(int(self._seed or 0) + 7919 * self.worker_index)
        self._done_returns: list[float] = []
        self._done_lengths: list[int] = []

    # -- RLlib's EnvRunner contract ---------------------------------------------------------
    @override(EnvRunner)
    def make_env(self) -> None:
        if self.env is not None:
            try:
                self.env.close()  # type: ignore[no-untyped-call]  # gymnasium's Env.close is unannotated
            except Exception:  # noqa: BLE001 - a broken env may fail to close; we replace it
                pass
        self.env = make_single_env(self.config, self.worker_index, self.num_workers)
        self.step_cap = self._step_cap()
        self._obs_finite = finite_check(self.env.observation_space)
        seed = None if self._seed is None else int(self._seed)
        self.env.reset(seed=seed)
        if seed is not None:
            self.env.action_space.seed(seed)

    def _step_cap(self) -> int:
        """``max_episode_steps``, else the env's time limit, else the default (logged once)."""
        if self.config.max_episode_steps is not None:
            return int(self.config.max_episode_steps)
        spec = getattr(self.env, "spec", None)
        if spec is not None and spec.max_episode_steps:
            return int(spec.max_episode_steps)
        if not getattr(self, "_cap_logged", False):
            self._cap_logged = True
            logger.warning(
                "rllib_ext: env %r has no time limit; episodes are cut at %d steps and counted as truncated "
                "(set max_episode_steps to choose)",
                self.config.env,
                DEFAULT_MAX_EPISODE_STEPS,
            )
        return DEFAULT_MAX_EPISODE_STEPS

    @override(EnvRunner)
    def make_module(self) -> None:
        spec = self.config.get_rl_module_spec(env=self.env, spaces=self.get_spaces(), inference_only=True)
        # validate() checked that a user's module is a BlackBoxRLModule (check_user_module).
        self.module = cast(BlackBoxRLModule, spec.build())
        check_policy_spec(self.env.action_space, self.config.policy_head, self.config.policy_activation)
        # The episode loop acts through the numpy twin (no per-step torch overhead); the torch
        # module keeps the same parameters for what needs autograd (CV-ES's PG, TD3 training).
        self.fast_policy = NumpyPolicy(self.module.policy)
        self._params, self._module_synced = self.module.get_flat(), True

    @override(EnvRunner)
    def assert_healthy(self) -> None:
        assert self.env is not None and self.module is not None

    @override(EnvRunner)
    def get_spaces(self) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]]:
        spaces = (self.env.observation_space, self.env.action_space)
        return {INPUT_ENV_SPACES: spaces, INPUT_ENV_SINGLE_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    @override(EnvRunner)
    def sample(self, *, num_episodes: int = 1, explore: bool = False, **kwargs: Any) -> list[EpisodeRecord]:
        """Episodes of the unperturbed policy (used by ``rllib evaluate`` and evaluation)."""
        self.set_params(self._theta)
        out = []
        for _ in range(num_episodes):
            ret, length, _ = self._run_episode(explore=explore, record_obs=False)
            out.append(EpisodeRecord(ret, length))
        return out

    @override(EnvRunner)
    def get_metrics(self) -> dict[str, float]:
        rets, lens = self._done_returns, self._done_lengths
        metrics: dict[str, float] = {NUM_EPISODES: len(rets), NUM_ENV_STEPS_SAMPLED: int(sum(lens))}
        if rets:
            metrics.update(
                {
                    EPISODE_RETURN_MEAN: float(np.mean(rets)),
                    EPISODE_RETURN_MAX: float(np.max(rets)),
                    EPISODE_RETURN_MIN: float(np.min(rets)),
                    EPISODE_LEN_MEAN: float(np.mean(lens)),
                }
            )
        self._done_returns, self._done_lengths = [], []
        return metrics

    @override(Checkpointable)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.module.set_flat(self._theta)
        self._module_synced = False
        return {
            COMPONENT_RL_MODULE: self.module.get_state(),
            "obs_filter": self.obs_filter.get_state(),
            "version": self.version,
            NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime,
        }

    @override(Checkpointable)
    def set_state(self, state: dict[str, Any]) -> None:
        if COMPONENT_RL_MODULE in state:
            module_state = state[COMPONENT_RL_MODULE]
            if isinstance(module_state, ray.ObjectRef):
                module_state = ray.get(module_state)
            if isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
                module_state = module_state[DEFAULT_MODULE_ID]
            self.module.set_state(module_state)
            self._theta = self.module.get_flat()
            self._module_synced = False
        if "obs_filter" in state:
            self.obs_filter.set_state(state["obs_filter"])
        # The version is not adopted: a restored (restarted) runner fetches the payload of the
        # next job's version, which may hold more than θ and the filter (CVES's γ's, ...).
        self.version = -1
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    @override(Checkpointable)
    def get_ctor_args_and_kwargs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {"config": self.config}

    @override(Checkpointable)
    def get_checkpointable_components(self) -> list[tuple[str, Checkpointable]]:
        return []

    @override(EnvRunner)
    def stop(self) -> None:
        if self.env is not None:
            self.env.close()  # type: ignore[no-untyped-call]  # gymnasium's Env.close is unannotated

    # -- The black-box job protocol ---------------------------------------------------------
    def adopt(self, version: int, payload: Payload) -> None:
        """Adopts the payload of update ``version`` (θ_u and the filter state; subclasses: more)."""
        self._theta = np.asarray(payload.theta, dtype=np.float32)
        self._theta_digest = theta_digest(self._theta)
        if payload.filter_state is not None:
            self.obs_filter.set_state(payload.filter_state)
        if payload.noise is not None and self._noise is None:  # one table per run: mapped once
            noise = payload.noise
            self._noise = noise if isinstance(noise, np.ndarray) else get_within(noise, "the shared noise table")
        self.version = version

    def set_params(self, theta: np.ndarray) -> None:
        """The parameters the next episodes run with (the numpy policy acts with them).

        The torch module gets them only when something needs autograd (:meth:`sync_module`):
        copying θ into torch costs ~0.4 ms, a whole short episode's worth of steps.
        """
        # The numpy policy keeps views into θ: every θ here is a fresh array, θ_u (replaced on
        # adopt, never changed in place) or the runner's perturbation buffer, which is rewritten
        # only for the next job, so no copy is needed.
        self._params = np.ascontiguousarray(theta, dtype=np.float32)
        self.fast_policy.set_flat(self._params)
        self._module_synced = False

    def sync_module(self) -> None:
        """Makes the torch module hold the parameters of :meth:`set_params` (CV-ES's PG terms)."""
        if not self._module_synced:
            self.module.set_flat(self._params)
            self._module_synced = True

    def _sampler(self, dim: int) -> samplers_lib.PerturbationSampler:
        if dim not in self._samplers:
            self._samplers[dim] = self.config.make_sampler(dim)
        return self._samplers[dim]

    def _noise_table(self, dim: int) -> NoiseTable:
        if self._noise is None:
            raise RuntimeError("a job reads the shared noise table, but no payload brought its reference")
        if dim not in self._noise_tables:
            antithetic = self._sampler(dim).antithetic
            self._noise_tables[dim] = NoiseTable(self._noise, dim, antithetic=antithetic)
        return self._noise_tables[dim]

    def perturbed_theta(
        self, seed: int, n: int, index: int, noise_offset: int | None = None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """θ_u + σ·ε_index of batch ``seed``: ε a slice of the shared noise table at ``noise_offset``,
        or (None) regenerated from the sampler; never shipped. Written into ``out`` (float32, θ's
        shape) when given, else into a new array."""
        theta, sigma = self._theta, np.float32(self.config.noise_stdev)
        if out is None:
            out = np.empty_like(theta, dtype=np.float32)
        if noise_offset is None:
            np.multiply(self._sampler(theta.size).perturbation(seed, n, index), sigma, out=out)
        else:
            self._noise_table(theta.size).scaled_row_into(out, noise_offset, index, sigma)
        out += theta
        return out

    def _perturb_into_buffer(self, job: PerturbationJob) -> np.ndarray:
        """:meth:`perturbed_theta` of ``job`` in one buffer kept for the runner's jobs: no allocation
        per job, and the numpy policy's views into the buffer stay valid (``NumpyPolicy.set_flat`` of
        the same array rebuilds nothing). The buffer is overwritten by the next job: what needs θ_i
        past the job copies it (``sync_module``)."""
        buf = self._perturb_buf
        if buf is None or buf.shape != self._theta.shape:
            buf = self._perturb_buf = np.empty_like(self._theta, dtype=np.float32)
        return self.perturbed_theta(job.seed, job.n, job.index, job.noise_offset, out=buf)

    def run_jobs(self, call: Call) -> Reply:
        """Runs every job of ``call`` with the payload of ``call.version`` (fetched when new here)."""
        t0 = time.perf_counter()
        if call.version != self.version:
            self.adopt(call.version, get_within(call.payload_ref, f"the payload of version {call.version}"))
        results = [self.run_job(job) for job in call.jobs]
        return Reply(
            results=results,
            busy_s=time.perf_counter() - t0,
            runner=self.worker_index,
            obs_delta=self.obs_filter.pop_delta(),
            steps=sum(r.length + r.failed_steps for r in results),
        )

    def run_job(self, job: Job) -> EpisodeResult:
        """One job: a perturbation θ_u + σε_index or θ_u itself (an :class:`EvaluationJob`)."""
        if isinstance(job, PerturbationJob):
            self.set_params(self._perturb_into_buffer(job))
            return self.evaluate(job, explore=bool(self.config.explore_perturbations))
        if isinstance(job, EvaluationJob):
            self.set_params(self._theta)
            return self.evaluate(job, explore=bool(self.config.explore_perturbations))
        raise TypeError(f"{type(self).__name__} cannot run a {type(job).__name__}")

    #: The result type :meth:`evaluate` builds (subclasses add fields, see :meth:`episode_extras`).
    result_cls = EpisodeResult

    def episode_extras(self) -> dict[str, Any]:
        """Per-episode extras of the episode just run (averaged over the job's episodes into
        fields of :attr:`result_cls`); none here."""
        return {}

    def evaluate(self, job: Job, explore: bool) -> EpisodeResult:
        """Runs ``job.episodes`` episodes with the parameters of :meth:`set_params`; their mean return counts.

        Paper 000/002 evaluate each perturbation with one episode; with k > 1 the k returns are
        averaged (a lower-variance estimate of the same R(θ_u + σε)), never dropped. An episode
        that fails (the env raised, or returned NaN/inf) is counted in ``episodes_failed`` and the
        env is rebuilt; the job's return is the mean of its other episodes, and the job fails only
        when none succeeded (the driver then re-runs or drops it, counted).
        """
        t0 = time.perf_counter()
        returns, length, capped, extras, failures, error, failed_steps = [], 0, 0, [], 0, None, 0
        for k in range(int(job.episodes)):
            try:
                ret, steps, was_capped = self._run_episode(explore=explore, seed=episode_seed(job.env_seed, k))
            except EpisodeFailed as e:
                failures, error, failed_steps = failures + 1, str(e), failed_steps + e.steps
                self.make_env()  # a fresh env for the next episode (RLlib's recovery too)
                continue
            returns.append(ret)
            length += steps
            capped += int(was_capped)
            extras.append(self.episode_extras())
        averaged = {key: np.mean([e[key] for e in extras], axis=0) for key in extras[0]} if extras else {}
        if len(returns) == 1:  # the usual job: np.mean of one number costs ~5 µs, a short episode's 5%
            ret = float(returns[0])
        else:
            ret = float(np.mean(returns)) if returns else float("nan")
        return self.result_cls(
            job=job,
            ret=ret,
            returns=tuple(returns),
            length=length,
            failed_steps=failed_steps,
            capped=capped,
            episodes_failed=failures,
            failed=not returns,
            error=error,
            duration_s=time.perf_counter() - t0,
            runner=self.worker_index,
            theta_digest=self._theta_digest,
            **averaged,
        )

    def _run_episode(
        self, explore: bool = False, record_obs: bool = True, seed: int | None = None
    ) -> tuple[float, int, bool]:
        """One full episode with the parameters of :meth:`set_params`: (return, length, capped).

        ``capped``: the episode reached :attr:`step_cap` without terminating or truncating itself.

        ``seed`` (``common_random_numbers``) resets the env and the action generator with it;
        None continues the runner's own streams.

        Raises:
            EpisodeFailed: The env raised, or returned a non-finite observation or reward.
        """
        env, policy, obs_filter, obs_finite = self.env, self.fast_policy, self.obs_filter, self._obs_finite
        # Action noise is drawn per episode, in blocks; a seeded episode has its own stream.
        policy.begin_episode(self._rng if seed is None else np.random.default_rng(seed))
        length = 0  # env.step() calls made (the one that fails included)
        try:
            obs, _ = env.reset(seed=seed)
            total, done, capped, cap = 0.0, False, False, self.step_cap
            while not done:
                if not obs_finite(obs):
                    raise EpisodeFailed(f"non-finite observation at step {length}: {obs}", length)
                action = policy.act(obs_filter(obs, record=record_obs), explore=explore)
                length += 1
                obs, reward, terminated, truncated, _ = env.step(action)
                if not math.isfinite(reward):
                    raise EpisodeFailed(f"non-finite reward at step {length - 1}: {reward}", length)
                total += float(reward)
                done = terminated or truncated
                if not done and length >= cap:
                    done = capped = True
        except EpisodeFailed as e:
            self.num_env_steps_sampled_lifetime += e.steps
            raise
        except Exception as e:  # the env itself raised (in reset, or in the length-th step)
            self.num_env_steps_sampled_lifetime += length
            raise EpisodeFailed(f"env raised {type(e).__name__}: {e}", length) from e
        self.num_env_steps_sampled_lifetime += length
        self._done_returns.append(total)
        self._done_lengths.append(length)
        return total, length, capped
