"""BlackBoxConfig: the settings every black-box algorithm shares, and their checks."""

from __future__ import annotations

import math
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import samplers as samplers_lib
from rllib_ext.common.blackbox import shaping as shaping_lib
from rllib_ext.common.blackbox.env_runner import BlackBoxEnvRunner
from rllib_ext.common.blackbox.learner import BlackBoxLearner
from rllib_ext.common.blackbox.rl_module import BlackBoxRLModule
from rllib_ext.common.policies import check_policy_spec
from rllib_ext.common.validation import (
    CLIP_REWARDS_UNREAD,
    CONTINUOUS,
    DISCRETE,
    KeepsMinusOneSettings,
    changed_model_config,
    check_env_runner_callbacks,
    check_finite_settings,
    check_model_config_keys,
    check_optimizer,
    check_unused_settings,
    check_user_module,
    check_vector_spaces,
    env_spaces,
)

#: RLlib settings the black-box algorithms never read (their runners play whole episodes in a
#: plain loop, without RLlib's connector pipelines; their update is an optimizer step along an
#: estimate made from episode returns), with what to use instead: validate() refuses a value
#: other than the default rather than run as if it had not been given.
UNUSED_RLLIB_SETTINGS: dict[str, str] = {
    "env_to_module_connector": (
        "the black-box runners act in a plain episode loop without RLlib's connector pipelines; to "
        "standardize observations (as RLlib's MeanStdFilter does) set `observation_filter=True` (with `obs_clip`)"
    ),
    "module_to_env_connector": (
        "the black-box runners act in a plain episode loop without RLlib's connector pipelines; the policy "
        "head (`policy_head`) maps its output onto the action space"
    ),
    "learner_connector": (
        "the update is an optimizer step along an estimate made from episode returns; no train batch "
        "passes through a learner pipeline"
    ),
    "num_envs_per_env_runner": (
        "each runner steps one env; keep runners busy with `jobs_in_flight_per_env_runner` and "
        "`perturbations_per_call`, or add runners (`num_env_runners`)"
    ),
    "explore": "perturbations act with `explore_perturbations` (sampling from a stochastic `policy_head`)",
    "gamma": "the algorithm maximizes undiscounted episode returns",
    "train_batch_size_per_learner": "a batch is `episodes_per_batch` (N) episodes",
    "train_batch_size": "a batch is `episodes_per_batch` (N) episodes",
    "num_epochs": "each batch of returns makes one optimizer step",
    "minibatch_size": "each batch of returns makes one optimizer step",
    "grad_clip": "the optimizer steps along the gradient estimate unclipped (`l2_coeff` adds weight decay)",
    "clip_rewards": CLIP_REWARDS_UNREAD,
}

#: RLlib ``model_config`` keys the black-box family reads (they must equal its own settings).
MODEL_CONFIG_KEYS = ("fcnet_hiddens", "fcnet_activation")


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
      ``eval_return_ema`` (a, default 0.9): their returns R enter R̄ ← a·R̄ + (1 − a)·R, the one
      reward DSGD compares in every black-box algorithm (``BlackBoxAlgorithm.observe_evaluations``);
      ``optimizer="dsgd"`` therefore needs ``eval_episodes >= 1``.
    - ``jobs_in_flight_per_env_runner`` (≥ 2 hides the ~2 ms round trip),
      ``perturbations_per_call`` (several short episodes per remote call; ``"auto"`` sizes calls
      so that each runner gets about 4 calls per batch) and ``episodes_per_job`` (k episodes per
      perturbation; its return is their mean, every episode counts).
    - ``max_episode_steps``: the runner's step cap. None: the env's own time limit
      (``env.spec.max_episode_steps``) where it has one, else ``DEFAULT_MAX_EPISODE_STEPS`` (logged
      once per runner): an env without a time limit must not keep a runner busy forever with a
      policy that never reaches a terminal state. Capped episodes count as truncations
      (``blackbox/episodes_capped_lifetime``).
    - ``common_random_numbers``: seed every episode from its job instead of from the runner's
      own stream. Episode k of any perturbation of batch s resets the env (and the generator of a
      stochastic head) with a seed drawn from (s, k), so all perturbations of a batch meet the
      same start states and action noise (common random numbers: the comparisons the shaped
      returns make are then between parameters, not between draws of the env); the unperturbed
      θ_u's j-th evaluation episode is seeded from (u, j). A result then no longer depends on
      which runner ran a job or what it ran before, which makes a seeded synchronous run (ES_EXT,
      CVES_EXT with one runner) reproducible and a restored run continue exactly as a straight
      one (tests/reliability/test_resume.py). Off by default (the papers draw fresh episodes).
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
        self.eval_return_ema = 0.9
        self.jobs_in_flight_per_env_runner = 2
        self.episodes_per_job = 1
        self.max_episode_steps = None
        self.perturbations_per_call = "auto"
        self.batch_seed_offset = 0
        self.common_random_numbers = False
        # RLlib settings that fit this family.
        self.num_env_runners = 2
        self.env_runner_cls = BlackBoxEnvRunner
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
        eval_return_ema=NotProvided,
        jobs_in_flight_per_env_runner=NotProvided,
        episodes_per_job=NotProvided,
        max_episode_steps=NotProvided,
        perturbations_per_call=NotProvided,
        common_random_numbers=NotProvided,
        **kwargs,
    ) -> BlackBoxConfig:
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
            eval_return_ema=eval_return_ema,
            jobs_in_flight_per_env_runner=jobs_in_flight_per_env_runner,
            episodes_per_job=episodes_per_job,
            max_episode_steps=max_episode_steps,
            perturbations_per_call=perturbations_per_call,
            common_random_numbers=common_random_numbers,
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
        check_optimizer(self)
        check_unused_settings(self, self.unused_settings)
        check_user_module(self, BlackBoxRLModule)
        check_env_runner_callbacks(self, "its env runners (a plain episode loop)")
        if not isinstance(self.observation_filter, bool):
            self._value_error(
                f"observation_filter must be True or False, got {self.observation_filter!r} (RLlib's old "
                "'MeanStdFilter' is True here, 'NoFilter' is False)"
            )
        self._check_model_config()
        if not (
            isinstance(self.noise_stdev, (int, float)) and self.noise_stdev > 0 and math.isfinite(self.noise_stdev)
        ):
            self._value_error(f"noise_stdev (σ) must be a finite number > 0, got {self.noise_stdev!r}")
        if not (isinstance(self.episodes_per_batch, int) and self.episodes_per_batch >= 1):
            self._value_error(f"episodes_per_batch (N) must be an integer >= 1, got {self.episodes_per_batch!r}")
        for kind, check in (
            ("sampler", lambda: samplers_lib.get_sampler(self.sampler)),
            ("return_shaping", lambda: shaping_lib.get_shaping(self.return_shaping)),
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
        if not (isinstance(self.eval_return_ema, (int, float)) and 0 <= self.eval_return_ema < 1):
            self._value_error(f"eval_return_ema must be a number in [0, 1), got {self.eval_return_ema!r}")
        if self.optimizer_steps_theta and str(self.optimizer).lower() == "dsgd" and self.eval_episodes < 1:
            self._value_error(
                "optimizer 'dsgd' compares the running mean of θ_u's evaluation returns (paper 000 Eq. 20–21, "
                "as the authors feed it): set eval_episodes >= 1 (paper 000 uses 10)"
            )
        if self.jobs_in_flight_per_env_runner < 1 or self.episodes_per_job < 1:
            self._value_error("jobs_in_flight_per_env_runner and episodes_per_job must be >= 1")
        if self.max_episode_steps is not None and not (
            isinstance(self.max_episode_steps, int) and self.max_episode_steps >= 1
        ):
            self._value_error(f"max_episode_steps must be None or an integer >= 1, got {self.max_episode_steps!r}")
        if self.perturbations_per_call != "auto" and not (
            isinstance(self.perturbations_per_call, int) and self.perturbations_per_call >= 1
        ):
            self._value_error(
                f"perturbations_per_call must be 'auto' or an integer >= 1, got {self.perturbations_per_call!r}"
            )
        if not isinstance(self.common_random_numbers, bool):
            self._value_error(f"common_random_numbers must be True or False, got {self.common_random_numbers!r}")
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
        if not self.runners_use_gpus and float(self.num_gpus_per_env_runner or 0) > 0:
            self._value_error(
                f"num_gpus_per_env_runner={self.num_gpus_per_env_runner:g}, but this algorithm's env runners only "
                "run episodes on the CPU and would hold the GPUs unused: set it to 0"
            )

    #: Whether ``optimizer`` steps θ along the black-box estimate, so that DSGD is fed R̄ from the
    #: evaluation episodes (ERL's optimizer trains its TD3 networks instead).
    optimizer_steps_theta = True

    #: Action-space kinds the family takes (ERL's TD3 part narrows it to continuous).
    supported_actions = (DISCRETE, CONTINUOUS)

    #: RLlib settings this algorithm never reads, with what to use instead (validate() refuses a
    #: value other than the default): :data:`UNUSED_RLLIB_SETTINGS` less those a subclass reads.
    unused_settings: dict[str, str] = UNUSED_RLLIB_SETTINGS

    #: Whether the env runners train on a GPU given by ``num_gpus_per_env_runner`` (ERL's RL
    #: individuals do); otherwise asking for runner GPUs is an error, not a reservation left idle.
    runners_use_gpus = False

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

    #: The hidden-size settings RLlib's ``model_config["fcnet_hiddens"]`` must agree with.
    network_settings: tuple[str, ...] = ("policy_hiddens",)

    def _check_model_config(self) -> None:
        """RLlib's ``model_config`` network keys are not this family's: its network is ``policy_hiddens``
        and ``policy_activation``. Equal values pass (a race may set one network for RLlib's algorithms
        and these); a different one would be silently ignored, so it is an error naming both. Values
        at RLlib's defaults (a ``DefaultModelConfig`` given to set another key carries them) are not
        settings (:func:`~rllib_ext.common.validation.changed_model_config`); any other key
        (``use_lstm``, initializers ...) is not read and is an error."""
        check_model_config_keys(
            self,
            MODEL_CONFIG_KEYS,
            "the policy is a feed-forward MLP set by `policy_hiddens`, `policy_activation` and `policy_head`",
        )
        mc = changed_model_config(self)
        if "fcnet_hiddens" in mc:
            for name in self.network_settings:
                if list(mc["fcnet_hiddens"]) != list(getattr(self, name)):
                    self._value_error(
                        f"model_config fcnet_hiddens={list(mc['fcnet_hiddens'])} is not used by "
                        f"{self.algo_class.__name__ if self.algo_class else 'this algorithm'}: its network is "
                        f"{name}={list(getattr(self, name))}; set {name} (or make them equal)"
                    )
        if "fcnet_activation" in mc and str(mc["fcnet_activation"]).lower() != str(self.policy_activation).lower():
            self._value_error(
                f"model_config fcnet_activation={mc['fcnet_activation']!r} is not used: the policy's activation "
                f"is policy_activation={self.policy_activation!r}; set policy_activation (or make them equal)"
            )

    @property
    def model_config_for_policy(self) -> dict[str, Any]:
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
