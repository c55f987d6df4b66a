"""The black-box engine shared by ES_EXT, DFD_EXT, CVES_EXT (and AES-RL's evaluations).

Pieces, each an RLlib component so that RLlib manages, checkpoints and restarts it:

- :class:`BlackBoxConfig`: the settings every black-box algorithm shares (policy, σ, sampler,
  shaping, optimizer, observation filter, jobs in flight) and their checks.
- :class:`BlackBoxRLModule`: the policy (:class:`~rllib_ext.common.policies.MLPPolicy`) as a
  TorchRLModule, so RLlib's learner group owns θ and its checkpoints.
- :class:`BlackBoxLearner`: the central "learner": applies a gradient *estimate* ĝ (computed
  from returns, not backprop) with the optimizer chosen by name; its optimizer state is
  checkpointed by RLlib.
- :class:`BlackBoxEnvRunner`: an RLlib ``EnvRunner`` whose episode loop is a plain gymnasium +
  torch loop (RLlib's SingleAgentEnvRunner costs ~0.8 ms per step here, 4–9× a plain loop; see
  benchmarks/es_throughput.py). Plugged in with ``env_runner_cls`` so RLlib's EnvRunnerGroup
  health-checks and restarts it.
- :class:`BlackBoxAlgorithm`: the driver side every black-box algorithm shares: publishing
  (θ_u, u, observation filter), the async job pool, merging filter deltas, evaluating θ_u, metrics.

**Low bandwidth.** A job carries the update index u, a reference to (θ_u, filter state) that the
runner fetches once per u, and perturbation ids ``(batch seed, n, i, sign)``; the runner
regenerates ε_i from the sampler. A result is ``(job id, seed, i, return, length, u, runner id)``
plus the runner's observation-statistics delta — never a noise vector.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import ray
import torch

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MAX,
    EPISODE_RETURN_MEAN,
    EPISODE_RETURN_MIN,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
)

from rllib_ext.common import samplers as samplers_lib
from rllib_ext.common import shaping as shaping_lib
from rllib_ext.common.guards import FiniteParametersGuard, nonfinite_parameters
from rllib_ext.common.obs_filter import ObservationFilter
from rllib_ext.common.policies import MLPPolicy, check_policy_spec
from rllib_ext.common.validation import (
    CONTINUOUS,
    DISCRETE,
    KeepsMinusOneSettings,
    algo_name,
    check_finite_settings,
    check_vector_spaces,
    env_spaces,
    make_single_env,
)

logger = logging.getLogger(__name__)

BLACKBOX = "blackbox"  # metrics key prefix of the engine's own metrics

# Tags that keep the episode seeds of perturbations and of θ_u's evaluations apart.
PERTURBATION_STREAM, EVALUATION_STREAM = 1, 2


def episode_seed(entropy: Optional[List[int]], k: int) -> Optional[int]:
    """Seed of episode k of a job whose ``env_seed`` is ``entropy`` (None: the runner's stream)."""
    if entropy is None:
        return None
    return int(np.random.SeedSequence([*entropy, int(k)]).generate_state(1)[0])


# ---------------------------------------------------------------------------------------------
# Config.
# ---------------------------------------------------------------------------------------------
class BlackBoxConfig(KeepsMinusOneSettings, AlgorithmConfig):
    """Settings shared by the black-box (ES-family) algorithms.

    Names follow paper 000 (Table 3) and paper 002 (§4):

    - ``noise_stdev`` (σ): perturbation scale, θ + σε.
    - ``episodes_per_batch`` (N): returns per update.
    - ``sampler``: ``gaussian`` | ``antithetic`` | ``orthogonal`` | ``gcmc`` | ``qmc``;
      ``sampler_antithetic`` (None: the sampler's default) pairs the directions of
      ``gaussian``/``orthogonal``/``qmc`` antithetically too.
    - ``return_shaping``: ``centered_rank`` | ``standardize`` | ``none``.
    - ``optimizer``: ``adam`` | ``sgd`` | ``msgd`` | ``dsgd`` (``rllib_ext.optim``), with ``lr``
      (η, η0 for DSGD) and ``optimizer_kwargs``; ``l2_coeff`` adds −l2·θ to the ascent direction.
    - Policy: ``policy_hiddens``, ``policy_activation``, ``policy_head`` (see
      :mod:`rllib_ext.common.policies`), ``explore_perturbations`` (sample actions from a
      stochastic head while evaluating perturbations).
    - ``observation_filter`` with ``obs_clip`` (paper 000 App. A.2: standardize, clip to ±5).
    - ``eval_episodes``: episodes of the unperturbed θ_u per update (0 skips; paper 000 uses 10).
    - ``jobs_in_flight_per_env_runner`` (≥ 2 hides the ~2 ms round trip),
      ``perturbations_per_call`` (several short episodes per remote call; ``"auto"`` sizes calls
      so that each runner gets about 4 calls per batch) and ``episodes_per_job``.
    - ``common_random_numbers``: seed every episode from its job instead of from the runner's
      own stream. Episode k of any perturbation of batch s resets the env (and the generator of a
      stochastic head) with a seed drawn from (s, k), so all perturbations of a batch meet the
      same start states and action noise (common random numbers: the comparisons the shaped
      returns make are then between parameters, not between draws of the env); the unperturbed
      θ_u's j-th evaluation episode is seeded from (u, j). A result then no longer depends on
      which runner ran a job or what it ran before, which makes a seeded synchronous run (ES_EXT,
      CVES_EXT with one runner) reproducible and a restored run continue exactly as a straight
      one (tests/test_reliability_resume.py). Off by default (the papers draw fresh episodes).
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.noise_stdev = 0.02
        self.episodes_per_batch = 40
        self.sampler = "antithetic"
        self.sampler_antithetic = None
        self.return_shaping = "centered_rank"
        self.optimizer = "adam"
        self.optimizer_kwargs = {}
        self.lr = 0.01
        self.l2_coeff = 0.0
        self.policy_hiddens = [64, 64]
        self.policy_activation = "tanh"
        self.policy_head = "deterministic"
        self.explore_perturbations = False
        self.observation_filter = True
        self.obs_clip = 5.0
        self.eval_episodes = 0
        self.jobs_in_flight_per_env_runner = 2
        self.episodes_per_job = 1
        self.perturbations_per_call = "auto"
        self.batch_seed_offset = 0
        self.common_random_numbers = False
        # RLlib settings that fit this family.
        self.num_env_runners = 2
        self.env_runner_cls = BlackBoxEnvRunner
        self.max_requests_in_flight_per_env_runner = 2
        self.restart_failed_env_runners = True
        # Several updates per iteration: RLlib's per-iteration bookkeeping (~0.1 s) must not
        # leave runners idle after every update.
        self.min_time_s_per_iteration = 1.0
        # RLlib's per-iteration connector-state sync is a *synchronous* call on every runner,
        # which waits behind the jobs in flight (~0.75 s per iteration with 8 runners) and then
        # leaves them idle. The engine syncs its own observation filter (as IMPALA opts out).
        self._dont_auto_sync_env_runner_states = True
        self.min_sample_timesteps_per_iteration = 0

    @override(AlgorithmConfig)
    def training(
        self,
        *,
        noise_stdev=NotProvided,
        episodes_per_batch=NotProvided,
        sampler=NotProvided,
        sampler_antithetic=NotProvided,
        return_shaping=NotProvided,
        optimizer=NotProvided,
        optimizer_kwargs=NotProvided,
        l2_coeff=NotProvided,
        policy_hiddens=NotProvided,
        policy_activation=NotProvided,
        policy_head=NotProvided,
        explore_perturbations=NotProvided,
        observation_filter=NotProvided,
        obs_clip=NotProvided,
        eval_episodes=NotProvided,
        jobs_in_flight_per_env_runner=NotProvided,
        episodes_per_job=NotProvided,
        perturbations_per_call=NotProvided,
        common_random_numbers=NotProvided,
        **kwargs,
    ) -> "BlackBoxConfig":
        super().training(**kwargs)
        self._set_provided(
            noise_stdev=noise_stdev,
            episodes_per_batch=episodes_per_batch,
            sampler=sampler,
            sampler_antithetic=sampler_antithetic,
            return_shaping=return_shaping,
            optimizer=optimizer,
            optimizer_kwargs=optimizer_kwargs,
            l2_coeff=l2_coeff,
            policy_hiddens=policy_hiddens,
            policy_activation=policy_activation,
            policy_head=policy_head,
            explore_perturbations=explore_perturbations,
            observation_filter=observation_filter,
            obs_clip=obs_clip,
            eval_episodes=eval_episodes,
            jobs_in_flight_per_env_runner=jobs_in_flight_per_env_runner,
            episodes_per_job=episodes_per_job,
            perturbations_per_call=perturbations_per_call,
            common_random_numbers=common_random_numbers,
        )
        if jobs_in_flight_per_env_runner is not NotProvided:
            self.max_requests_in_flight_per_env_runner = max(
                self.max_requests_in_flight_per_env_runner, int(jobs_in_flight_per_env_runner)
            )
        return self

    def _set_provided(self, **values) -> None:
        """Sets every keyword not left at ``NotProvided`` (the shared body of ``training()``)."""
        for name, value in values.items():
            if value is not NotProvided:
                setattr(self, name, value)

    @override(AlgorithmConfig)
    def validate(self) -> None:
        super().validate()
        from rllib_ext.optim import get_optimizer_class

        if not (isinstance(self.noise_stdev, (int, float)) and self.noise_stdev > 0 and math.isfinite(self.noise_stdev)):
            self._value_error(f"noise_stdev (σ) must be a finite number > 0, got {self.noise_stdev!r}")
        if not (isinstance(self.episodes_per_batch, int) and self.episodes_per_batch >= 1):
            self._value_error(f"episodes_per_batch (N) must be an integer >= 1, got {self.episodes_per_batch!r}")
        for kind, check in (
            ("sampler", lambda: samplers_lib.get_sampler(self.sampler)),
            ("return_shaping", lambda: shaping_lib.get_shaping(self.return_shaping)),
            ("optimizer", lambda: get_optimizer_class(self.optimizer)),
        ):
            try:
                check()
            except ValueError as e:
                self._value_error(f"{kind}: {e}")
        sampler_cls = samplers_lib.get_sampler(self.sampler)
        antithetic = sampler_cls.default_antithetic if self.sampler_antithetic is None else self.sampler_antithetic
        if self.sampler_antithetic is False and sampler_cls.default_antithetic:
            self._value_error(f"sampler {self.sampler!r} is antithetic by definition (sampler_antithetic=False)")
        if antithetic and self.episodes_per_batch % 2:
            self._value_error(
                f"episodes_per_batch (N) must be even for the antithetic sampler {self.sampler!r}, "
                f"got {self.episodes_per_batch}"
            )
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            self._value_error(f"lr must be > 0, got {self.lr!r}")
        if self.l2_coeff < 0:
            self._value_error(f"l2_coeff must be >= 0, got {self.l2_coeff}")
        if self.eval_episodes < 0:
            self._value_error(f"eval_episodes must be >= 0, got {self.eval_episodes}")
        if self.jobs_in_flight_per_env_runner < 1 or self.episodes_per_job < 1:
            self._value_error("jobs_in_flight_per_env_runner and episodes_per_job must be >= 1")
        if self.max_requests_in_flight_per_env_runner < self.jobs_in_flight_per_env_runner:
            # RLlib would silently drop the extra requests.
            self._value_error(
                f"max_requests_in_flight_per_env_runner ({self.max_requests_in_flight_per_env_runner}) "
                f"< jobs_in_flight_per_env_runner ({self.jobs_in_flight_per_env_runner})"
            )
        if self.perturbations_per_call != "auto" and not (
            isinstance(self.perturbations_per_call, int) and self.perturbations_per_call >= 1
        ):
            self._value_error(f"perturbations_per_call must be 'auto' or an integer >= 1, got {self.perturbations_per_call!r}")
        if self.obs_clip is not None and self.obs_clip <= 0:
            self._value_error(f"obs_clip must be > 0 or None, got {self.obs_clip}")
        if not all(isinstance(h, int) and h > 0 for h in self.policy_hiddens):
            self._value_error(f"policy_hiddens must be positive integers, got {self.policy_hiddens}")
        check_finite_settings(self)
        self._check_env_spaces()
        if self.evaluation_interval:
            self._value_error(
                "black-box algorithms evaluate θ_u themselves: use eval_episodes, not evaluation_interval"
            )

    #: Action-space kinds the family takes (ERL's TD3 part narrows it to continuous).
    supported_actions = (DISCRETE, CONTINUOUS)

    def _check_env_spaces(self) -> None:
        """Builds the env once on the driver to reject unsupported spaces before actors start."""
        spaces = env_spaces(self)
        check_vector_spaces(self, spaces, actions=self.supported_actions)
        if spaces is not None:
            try:
                check_policy_spec(spaces[1], self.policy_head, self.policy_activation)
            except ValueError as e:
                self._value_error(f"{self.env!r}: {e}")

    def make_sampler(self, dim: int) -> samplers_lib.PerturbationSampler:
        """The perturbation sampler (the same on the driver and on every runner)."""
        return samplers_lib.make_sampler(self.sampler, dim, antithetic=self.sampler_antithetic)

    @property
    def model_config_for_policy(self) -> Dict[str, Any]:
        return {
            "hiddens": list(self.policy_hiddens),
            "activation": self.policy_activation,
            "head": self.policy_head,
        }

    @override(AlgorithmConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        return RLModuleSpec(module_class=BlackBoxRLModule, model_config=self.model_config_for_policy)

    @override(AlgorithmConfig)
    def get_default_learner_class(self):
        return BlackBoxLearner


# ---------------------------------------------------------------------------------------------
# RLModule and Learner.
# ---------------------------------------------------------------------------------------------
class BlackBoxRLModule(TorchRLModule):
    """The black-box policy as an RLModule (RLlib owns, syncs and checkpoints θ)."""

    @override(TorchRLModule)
    def setup(self):
        obs_space = self.observation_space
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise ValueError(f"black-box policies need a 1-d Box observation space, got {obs_space}")
        cfg = dict(self.model_config or {})
        self.policy = MLPPolicy(
            int(obs_space.shape[0]),
            self.action_space,
            hiddens=cfg.get("hiddens", (64, 64)),
            activation=cfg.get("activation", "tanh"),
            head=cfg.get("head", "deterministic"),
        )

    @override(TorchRLModule)
    def _forward(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self.policy.net(batch[Columns.OBS])}

    def get_flat(self) -> np.ndarray:
        return self.policy.get_flat()

    def set_flat(self, theta: np.ndarray) -> None:
        self.policy.set_flat(theta)


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

    def apply_gradient_estimate(self, g_hat: np.ndarray, reward: Optional[float] = None) -> Dict[str, float]:
        """One optimizer step along the ascent estimate ``g_hat`` (flat, θ's layout).

        Returns:
            ``{"update_norm": ‖θ_{u+1} − θ_u‖, "grad_norm": ‖ĝ‖, "theta_norm": ‖θ_{u+1}‖}``.

        Raises:
            FloatingPointError: ``g_hat`` or the new θ is not finite (the iteration fails loudly
                rather than publishing NaN weights).
        """
        module = self._module[DEFAULT_MODULE_ID]
        params = list(module.parameters())
        theta = torch.nn.utils.parameters_to_vector(params).detach().clone()
        g = torch.as_tensor(np.asarray(g_hat, dtype=np.float32))
        if not torch.isfinite(g).all():
            raise FloatingPointError(f"{algo_name(self.config)}: gradient estimate contains NaN/inf; refusing to update θ")
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
        return {
            "update_norm": float(torch.linalg.vector_norm(new_theta - theta)),
            "grad_norm": float(torch.linalg.vector_norm(g)),
            "theta_norm": float(torch.linalg.vector_norm(new_theta)),
        }


# ---------------------------------------------------------------------------------------------
# Env runner.
# ---------------------------------------------------------------------------------------------
class EpisodeRecord:
    """What ``BlackBoxEnvRunner.sample`` returns per episode (``get_return()``, ``len()``)."""

    __slots__ = ("ret", "length")

    def __init__(self, ret: float, length: int):
        self.ret, self.length = ret, length

    def get_return(self) -> float:
        return self.ret

    def __len__(self) -> int:
        return self.length


class EpisodeFailed(Exception):
    """An episode that cannot count: the env raised, or returned a non-finite value."""


class BlackBoxEnvRunner(EnvRunner, Checkpointable):
    """Lean env runner: a plain episode loop with the policy of :class:`BlackBoxRLModule`.

    Remote methods used by the driver (:class:`AsyncJobPool`): :meth:`run_jobs`. RLlib's own
    contract (state sync, restarts, ``rllib evaluate``): :meth:`sample`, :meth:`get_state`,
    :meth:`set_state`, :meth:`get_spaces`, :meth:`get_metrics`, :meth:`assert_healthy`.
    """

    def __init__(self, *, config: AlgorithmConfig, **kwargs):
        super().__init__(config=config, **kwargs)
        torch.set_num_threads(1)
        self.worker_index = kwargs.get("worker_index", 0) or 0
        self.make_env()
        self.make_module()
        self.obs_filter = ObservationFilter(
            self.env.observation_space.shape,
            clip=config.obs_clip,
            enabled=bool(config.observation_filter),
        )
        self.version = -1
        self._theta = self.module.get_flat()
        self._samplers: Dict[int, samplers_lib.PerturbationSampler] = {}
        self._rng = torch.Generator().manual_seed(int(self._seed or 0) + 7919 * self.worker_index)
        self._done_returns: List[float] = []
        self._done_lengths: List[int] = []

    # -- RLlib's EnvRunner contract ---------------------------------------------------------
    @override(EnvRunner)
    def make_env(self):
        if self.env is not None:
            try:
                self.env.close()
            except Exception:  # noqa: BLE001 - a broken env may fail to close; we replace it
                pass
        self.env = make_single_env(self.config, self.worker_index, self.num_workers)
        seed = None if self._seed is None else int(self._seed)
        self.env.reset(seed=seed)
        if seed is not None:
            self.env.action_space.seed(seed)

    @override(EnvRunner)
    def make_module(self):
        spec = self.config.get_rl_module_spec(env=self.env, spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        check_policy_spec(self.env.action_space, self.config.policy_head, self.config.policy_activation)

    @override(EnvRunner)
    def assert_healthy(self):
        assert self.env is not None and self.module is not None

    @override(EnvRunner)
    def get_spaces(self):
        spaces = (self.env.observation_space, self.env.action_space)
        return {INPUT_ENV_SPACES: spaces, INPUT_ENV_SINGLE_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    @override(EnvRunner)
    def sample(self, *, num_episodes: int = 1, explore: bool = False, **kwargs) -> List[EpisodeRecord]:
        """Episodes of the unperturbed policy (used by ``rllib evaluate`` and evaluation)."""
        self.module.set_flat(self._theta)
        out = []
        for _ in range(num_episodes):
            ret, length = self._run_episode(explore=explore, record_obs=False)
            out.append(EpisodeRecord(ret, length))
        return out

    @override(EnvRunner)
    def get_metrics(self):
        rets, lens = self._done_returns, self._done_lengths
        metrics = {NUM_EPISODES: len(rets), NUM_ENV_STEPS_SAMPLED: int(sum(lens))}
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
    def get_state(self, components=None, *, not_components=None, **kwargs):
        self.module.set_flat(self._theta)
        return {
            COMPONENT_RL_MODULE: self.module.get_state(),
            "obs_filter": self.obs_filter.get_state(),
            "version": self.version,
            NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime,
        }

    @override(Checkpointable)
    def set_state(self, state):
        if COMPONENT_RL_MODULE in state:
            module_state = state[COMPONENT_RL_MODULE]
            if isinstance(module_state, ray.ObjectRef):
                module_state = ray.get(module_state)
            if isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
                module_state = module_state[DEFAULT_MODULE_ID]
            self.module.set_state(module_state)
            self._theta = self.module.get_flat()
        if "obs_filter" in state:
            self.obs_filter.set_state(state["obs_filter"])
        # The version is not adopted: a restored (restarted) runner fetches the payload of the
        # next job's version, which may hold more than θ and the filter (CVES's γ's, ...).
        self.version = -1
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    @override(Checkpointable)
    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    @override(Checkpointable)
    def get_checkpointable_components(self):
        return []

    @override(EnvRunner)
    def stop(self):
        if self.env is not None:
            self.env.close()

    # -- The black-box job protocol ---------------------------------------------------------
    def publish(self, version: int, payload) -> None:
        """Adopts θ_u and the filter state of update ``version`` (payload: (θ, filter state))."""
        theta, filter_state = payload
        self._theta = np.asarray(theta, dtype=np.float32)
        if filter_state is not None:
            self.obs_filter.set_state(filter_state)
        self.version = version

    def _sampler(self, dim: int) -> samplers_lib.PerturbationSampler:
        if dim not in self._samplers:
            self._samplers[dim] = self.config.make_sampler(dim)
        return self._samplers[dim]

    def perturbed_theta(self, seed: int, n: int, index: int) -> np.ndarray:
        """θ_u + σ·ε_index of batch ``seed`` (ε regenerated from the sampler, never shipped)."""
        eps = self._sampler(self._theta.size).perturbation(seed, n, index)
        return self._theta + np.float32(self.config.noise_stdev) * eps

    def run_jobs(self, version: int, payload_ref: List[ray.ObjectRef], jobs: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Evaluates perturbations of θ_version, one episode each (``episodes_per_job`` each).

        Args:
            version: Update index u of the parameters the jobs perturb.
            payload_ref: ``[ObjectRef((θ_u, filter state))]``; fetched only when u is new here.
            jobs: Dicts with ``id``, ``seed``, ``n``, ``index`` (a row of the sampler's batch) or
                ``index: None`` for the unperturbed θ_u.

        Returns:
            ``{"results": [...], "busy_s", "runner", "obs_delta", "steps"}``; each result
            ``{"id", "seed", "n", "index", "return", "length", "u", "failed", "error",
            "duration_s"}``.
        """
        t0 = time.perf_counter()
        if version != self.version:
            self.publish(version, ray.get(payload_ref[0]))
        results, steps = [], 0
        for job in jobs:
            index = job.get("index")
            theta = self._theta if index is None else self.perturbed_theta(job["seed"], job["n"], index)
            self.module.set_flat(theta)
            for k in range(int(self.config.episodes_per_job)):
                t_episode = time.perf_counter()
                try:
                    ret, length = self._run_episode(
                        explore=bool(self.config.explore_perturbations), seed=episode_seed(job.get("env_seed"), k)
                    )
                    failed, error = False, None
                except EpisodeFailed as e:
                    ret, length, failed, error = float("nan"), 0, True, str(e)
                    self.make_env()  # a fresh env for the next episode (RLlib's recovery too)
                steps += length
                results.append(
                    {"id": job["id"], "seed": job.get("seed"), "n": job.get("n"), "index": index,
                     "return": ret, "length": length, "u": version, "failed": failed, "error": error,
                     "duration_s": time.perf_counter() - t_episode}
                )
        return {
            "results": results,
            "busy_s": time.perf_counter() - t0,
            "runner": self.worker_index,
            "obs_delta": self.obs_filter.pop_delta(),
            "steps": steps,
        }

    def _run_episode(self, explore: bool = False, record_obs: bool = True, seed: Optional[int] = None):
        """One full episode with the module's current weights: (return, length).

        ``seed`` (``common_random_numbers``) resets the env and the action generator with it;
        None continues the runner's own streams.

        Raises:
            EpisodeFailed: The env raised, or returned a non-finite observation or reward.
        """
        env, policy, obs_filter = self.env, self.module.policy, self.obs_filter
        if seed is not None:
            self._rng.manual_seed(seed)
        try:
            obs, _ = env.reset(seed=seed)
            total, length, done = 0.0, 0, False
            while not done:
                if not np.isfinite(obs).all():
                    raise EpisodeFailed(f"non-finite observation at step {length}: {obs}")
                action = policy.act(obs_filter(obs, record=record_obs), explore=explore, generator=self._rng)
                obs, reward, terminated, truncated, _ = env.step(action)
                if not math.isfinite(reward):
                    raise EpisodeFailed(f"non-finite reward at step {length}: {reward}")
                total += float(reward)
                length += 1
                done = terminated or truncated
        except EpisodeFailed:
            raise
        except Exception as e:  # the env itself raised
            raise EpisodeFailed(f"env raised {type(e).__name__}: {e}") from e
        self.num_env_steps_sampled_lifetime += length
        self._done_returns.append(total)
        self._done_lengths.append(length)
        return total, length


# ---------------------------------------------------------------------------------------------
# Driver side shared by the black-box algorithms.
# ---------------------------------------------------------------------------------------------
class BlackBoxAlgorithm(FiniteParametersGuard, Algorithm):
    """Algorithm base of the ES family: θ_u publishing, the job pool, filter merging, metrics.

    Subclasses implement ``training_step`` with :meth:`submit_perturbations`,
    :meth:`collect`, :meth:`apply_update` and :meth:`log_batch`. Extra state they keep must be
    added in ``_extra_state`` / ``_set_extra_state`` so checkpoints carry it.
    """

    @override(Algorithm)
    def setup(self, config):
        from rllib_ext.common.async_pool import AsyncJobPool

        super().setup(config)
        obs_space = self.spaces[DEFAULT_MODULE_ID][0]
        self.obs_filter = ObservationFilter(
            obs_space.shape, clip=self.config.obs_clip, enabled=bool(self.config.observation_filter)
        )
        self.pool = AsyncJobPool(self.env_runner_group, jobs_in_flight=self.config.jobs_in_flight_per_env_runner)
        self.update_index = 0  # u
        self.batch_seed = int(self.config.batch_seed_offset) + 1_000_003 * int(self.config.seed or 0)
        self.counters = {
            "episodes_failed": 0, "returns_dropped_stale": 0, "env_steps": 0, "episodes": 0, "useful_runner_s": 0.0,
        }
        self._t_first_update = None  # wall clock of the first training_step (updates_per_s)
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.sampler = self.config.make_sampler(self.theta.size)
        self.publish()

    # -- helpers ----------------------------------------------------------------------------
    def _on_learner(self, fn):
        return self.learner_group.foreach_learner(fn).result_or_errors[0].get()

    @property
    def num_runners(self) -> int:
        return max(len(self.pool.healthy_runner_ids()), 1)

    def publish(self) -> None:
        """Makes (θ_u, filter state) of update u the parameters of every call sent from now on."""
        payload = (self.theta, self.obs_filter.get_state())
        self.pool.publish(self.update_index, payload)
        if self.env_runner is not None:  # the local runner: `rllib evaluate`, restarts sync from it
            self.env_runner.publish(self.update_index, payload)

    def next_batch_seed(self) -> int:
        self.batch_seed += 1
        return self.batch_seed

    def call_size(self, n: int) -> int:
        """Perturbations per remote call: fixed, or ``auto`` ≈ 4 calls per runner per batch."""
        per_call = self.config.perturbations_per_call
        if per_call == "auto":
            return max(1, n // (4 * self.num_runners))
        return int(per_call)

    def submit_perturbations(self, seed: int, n: int, indices=None) -> List[int]:
        """Queues rows ``indices`` (default all n) of batch ``seed``; returns their job ids."""
        indices = list(range(n) if indices is None else indices)
        size = self.call_size(n)
        ids = []
        for start in range(0, len(indices), size):
            jobs = []
            for index in indices[start : start + size]:
                jobs.append({"id": self.pool.new_job_id(), "seed": seed, "n": n, "index": int(index),
                             "env_seed": self.job_env_seed(seed)})
            self.pool.submit(jobs)
            ids += [j["id"] for j in jobs]
        return ids

    def submit_unperturbed(self, episodes: int) -> List[int]:
        ids = []
        for _ in range(episodes):
            job_id = self.pool.new_job_id()
            self.pool.submit([{"id": job_id, "seed": None, "n": 0, "index": None, "env_seed": self.eval_env_seed()}])
            ids.append(job_id)
        return ids

    def job_env_seed(self, batch_seed: int) -> Optional[List[int]]:
        """Entropy of a perturbation job's episodes under ``common_random_numbers`` (else None)."""
        return [PERTURBATION_STREAM, int(batch_seed)] if self.config.common_random_numbers else None

    def eval_env_seed(self) -> Optional[List[int]]:
        """Entropy of θ_u's next evaluation episode under ``common_random_numbers``: (u, j)."""
        if not self.config.common_random_numbers:
            return None
        u, j = getattr(self, "_eval_seed_counter", (self.update_index, 0))
        j = j if u == self.update_index else 0
        self._eval_seed_counter = (self.update_index, j + 1)
        return [EVALUATION_STREAM, int(self.config.seed or 0), self.update_index, j]

    #: Seconds without any result and without a healthy env runner before a loop gives up.
    no_runner_timeout_s = 120.0

    def note_progress(self, progressed: bool) -> None:
        """Call once per polling round: fails loudly when runners are gone instead of waiting forever.

        Raises:
            RuntimeError: No result for :attr:`no_runner_timeout_s` and no healthy env runner.
        """
        now = time.perf_counter()
        if progressed or getattr(self, "_last_progress", None) is None:
            self._last_progress = now
        elif now - self._last_progress > self.no_runner_timeout_s and not self.pool.healthy_runner_ids():
            raise RuntimeError(f"{algo_name(self)}: no healthy env runner for {self.no_runner_timeout_s:.0f} s")

    def check_can_train(self) -> None:
        """Training evaluates on remote runners (a driver-only build is for `rllib evaluate`)."""
        if self.env_runner_group.num_remote_env_runners() < 1:
            raise ValueError(f"{type(self).__name__} needs num_env_runners >= 1 to train")

    def collect(self, timeout_s: float = 0.01):
        """(finished results, failed results), with filter deltas merged and failures counted.

        A failed episode (the env raised, or returned NaN/inf) is logged and counted, never used
        as a return; the caller decides whether to re-submit its perturbation.
        """
        ok, failed = [], []
        for call in self.pool.poll(timeout_s=timeout_s):
            self.obs_filter.merge(call["obs_delta"])
            for r in call["results"]:
                r["runner"] = call["runner"]
                if r["failed"]:
                    self.counters["episodes_failed"] += 1
                    logger.warning("rllib_ext: episode on env runner %s failed and is not used: %s", call["runner"], r["error"])
                    failed.append(r)
                    continue
                self.counters["env_steps"] += r["length"]
                self.counters["episodes"] += 1
                ok.append(r)
        return ok, failed

    def apply_update(self, g_hat: np.ndarray, reward: Optional[float] = None) -> Dict[str, float]:
        """Steps the learner's optimizer along ĝ, then publishes θ_{u+1}, u+1."""
        stats = self._on_learner(lambda learner: learner.apply_gradient_estimate(g_hat, reward))
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.update_index += 1
        self.publish()
        return stats

    def log_batch(self, results: List[Dict[str, Any]], since: float, busy_before: Dict[int, float]) -> None:
        """Env-step/episode counters and return metrics under RLlib's keys, plus utilization.

        ``worker_utilization``: runner busy time / (runners × wall); ``useful_utilization``: the
        part of it spent on episodes whose returns this update used; ``updates_per_s``.
        """
        steps = int(sum(r["length"] for r in results))
        m = self.metrics
        m.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), steps, reduce="lifetime_sum")
        m.log_value((ENV_RUNNER_RESULTS, NUM_EPISODES_LIFETIME), len(results), reduce="lifetime_sum")
        m.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED), steps, reduce="sum")
        if results:
            returns = [r["return"] for r in results]
            window = max(self.config.episodes_per_batch, 10)
            for key, value in (
                (EPISODE_RETURN_MEAN, float(np.mean(returns))),
                (EPISODE_LEN_MEAN, float(np.mean([r["length"] for r in results]))),
            ):
                m.log_value((ENV_RUNNER_RESULTS, key), value, reduce="mean", window=window)
            m.log_value((ENV_RUNNER_RESULTS, EPISODE_RETURN_MAX), float(np.max(returns)), reduce="max", window=window)
            m.log_value((ENV_RUNNER_RESULTS, EPISODE_RETURN_MIN), float(np.min(returns)), reduce="min", window=window)
        m.log_value((BLACKBOX, "worker_utilization"), self.pool.utilization(since, busy_before, self.num_runners), reduce="mean", window=20)
        # Runner time spent on episodes whose returns entered this update / (runners × wall).
        wall = max(time.perf_counter() - since, 1e-9)
        useful_s = sum(r.get("duration_s", 0.0) for r in results)
        self.counters["useful_runner_s"] += useful_s
        m.log_value((BLACKBOX, "env_steps_per_s"), steps / wall, reduce="mean", window=20)
        m.log_value((BLACKBOX, "useful_utilization"), useful_s / (self.num_runners * wall), reduce="mean", window=20)
        if self._t_first_update is None:
            self._t_first_update = since
        m.log_value(
            (BLACKBOX, "updates_per_s"),
            self.update_index / max(time.perf_counter() - self._t_first_update, 1e-9),
            reduce="mean", window=1,
        )
        m.log_value((BLACKBOX, "update_index"), self.update_index, reduce="max", window=1)
        for key in ("episodes_failed", "returns_dropped_stale"):
            m.log_value((BLACKBOX, key + "_lifetime"), self.counters[key], reduce="max", window=1)
        m.log_value((BLACKBOX, "runner_calls_lost_lifetime"), self.pool.num_calls_lost, reduce="max", window=1)
        m.log_value((BLACKBOX, "jobs_requeued_lifetime"), self.pool.num_jobs_requeued, reduce="max", window=1)
        m.log_value((BLACKBOX, "num_healthy_env_runners"), len(self.pool.healthy_runner_ids()), reduce="mean", window=1)

    # -- checkpoints ------------------------------------------------------------------------
    def _extra_state(self) -> Dict[str, Any]:
        return {}

    def _set_extra_state(self, state: Dict[str, Any]) -> None:
        pass

    @override(Algorithm)
    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = super().get_state(components, not_components=not_components, **kwargs)
        state[BLACKBOX] = {
            "update_index": self.update_index,
            "batch_seed": self.batch_seed,
            "obs_filter": self.obs_filter.get_state(),
            "counters": dict(self.counters),
            "extra": self._extra_state(),
        }
        return state

    @override(Algorithm)
    def set_state(self, state) -> None:
        super().set_state(state)
        own = state.get(BLACKBOX)
        if own is not None:
            self.update_index = own["update_index"]
            self.batch_seed = own["batch_seed"]
            self.obs_filter.set_state(own["obs_filter"])
            self.counters.update(own["counters"])
            self._set_extra_state(own["extra"])
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.publish()

    @override(Algorithm)
    def cleanup(self) -> None:
        try:
            self.pool.drain(timeout_s=10.0)
        except Exception:  # noqa: BLE001 - shutting down; a dead runner must not block stop()
            pass
        super().cleanup()
