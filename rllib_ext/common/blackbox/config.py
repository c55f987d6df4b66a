"""BlackBoxConfig: the settings every black-box algorithm shares, and their checks."""

from __future__ import annotations

from typing import Any, Literal

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import samplers as samplers_lib
from rllib_ext.common.blackbox import shaping as shaping_lib
from rllib_ext.common.blackbox.env_runner import BlackBoxEnvRunner
from rllib_ext.common.blackbox.learner import BlackBoxLearner
from rllib_ext.common.blackbox.noise_table import TABLE_SAMPLERS
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
    check_user_module,
    check_vector_spaces,
    env_spaces,
)
from rllib_ext.settings import Configurable, Setting, unused

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


class BlackBoxConfig(Configurable, KeepsMinusOneSettings, AlgorithmConfig):
    """Settings shared by the black-box (ES-family) algorithms.

    Names follow paper 000 (Table 3) and paper 002 (§4):

    - ``noise_stdev`` (σ): perturbation scale, θ + σε.
    - ``episodes_per_batch`` (N): returns per update.
    - ``sampler``: ``gaussian`` | ``antithetic`` | ``orthogonal`` | ``gcmc`` | ``qmc``;
      ``sampler_antithetic`` (None: the sampler's default) pairs the directions of
      ``gaussian``/``orthogonal``/``qmc`` antithetically too.
    - ``noise_table`` (``"auto"``): ε_i as a slice of one shared block of Gaussian noise (OpenAI ES;
      :mod:`rllib_ext.common.blackbox.noise_table`) for the ``gaussian``/``antithetic`` samplers, the
      seeded generator for the others; ``noise_table_size``, ``noise_table_seed``, ``noise_table_dtype``.
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

    # The types of the table's own settings (set from it by Configurable; rllib_ext/settings.py, Types).
    noise_stdev: float
    episodes_per_batch: int
    sampler: str
    sampler_antithetic: bool | None
    noise_table: bool | Literal["auto"]
    noise_table_size: int
    noise_table_seed: int
    noise_table_dtype: str
    return_shaping: str
    optimizer: str  # type: ignore[assignment]  # RLlib's AlgorithmConfig infers its old-stack dict setting
    optimizer_kwargs: dict[str, Any]
    l2_coeff: float
    policy_hiddens: list[int]
    policy_activation: str
    policy_head: str
    explore_perturbations: bool
    observation_filter: bool  # type: ignore[assignment]  # RLlib's AlgorithmConfig infers its old-stack str setting
    obs_clip: float | None
    eval_episodes: int
    eval_return_ema: float
    jobs_in_flight_per_env_runner: int
    episodes_per_job: int
    max_episode_steps: int | None
    perturbations_per_call: int | Literal["auto"]
    batch_seed_offset: int
    common_random_numbers: bool
    min_reply_s: float

    SETTINGS = {
        "noise_stdev": Setting(
            0.02, float, gt=0, symbol="σ", source="0.02 (paper 000 Table 3)", doc="perturbation scale, θ + σε"
        ),
        "episodes_per_batch": Setting(
            40, int, ge=1, symbol="N", source="40 (paper 000 Table 3)", doc="returns per update"
        ),
        "sampler": Setting(
            "antithetic", str, doc="`gaussian`, `antithetic`, `orthogonal`, `gcmc`, `qmc` (paper 002 §4)"
        ),
        "sampler_antithetic": Setting(None, bool, also=(None,), doc="None: the sampler's default"),
        "noise_table": Setting(
            "auto",
            bool,
            also=("auto",),
            source="OpenAI ES (Salimans et al. 2017)",
            doc="ε as slices of one shared block of noise; `auto`: for `gaussian`/`antithetic`, else seeded",
        ),
        "noise_table_size": Setting(2**24, int, ge=1, shown="2^24", doc="numbers in the noise table (≥ θ's size)"),
        "noise_table_seed": Setting(0, int, ge=0, doc="seed of the noise table's draw"),
        "noise_table_dtype": Setting("float32", str, choices=("float32", "float16"), doc="dtype of the noise table"),
        "return_shaping": Setting("centered_rank", str, doc="`centered_rank`, `standardize`, `none`"),
        "optimizer": Setting("adam", str, doc="`adam`, `sgd`, `msgd`, `dsgd` (`rllib_ext.optim`)"),
        "optimizer_kwargs": Setting({}, dict, doc="passed to the optimizer"),
        "lr": Setting(
            0.01, float, gt=0, rllib=True, symbol="η (η0 for DSGD)", source="0.01 (paper 000 Table 3)", doc="step size"
        ),
        "l2_coeff": Setting(0.0, float, ge=0, doc="adds −l2·θ to the ascent direction"),
        "policy_hiddens": Setting([64, 64], list, source="[64, 64] (paper 000 Table 3)", doc="hidden layers"),
        "policy_activation": Setting("tanh", str, source="tanh (paper 000 Table 3)", doc="hidden activation"),
        "policy_head": Setting("deterministic", str, doc="see `rllib_ext.common.policies`"),
        "explore_perturbations": Setting(False, bool, doc="sample actions from a stochastic head"),
        "observation_filter": Setting(
            True, bool, source="paper 000 App. A.2", doc="standardize observations (RLlib's old `MeanStdFilter`)"
        ),
        "obs_clip": Setting(
            5.0, float, gt=0, also=(None,), source="5 (paper 000 App. A.2)", doc="clip standardized observations"
        ),
        "eval_episodes": Setting(
            0, int, ge=0, source="10 (paper 000)", doc="episodes of unperturbed θ_u per update (≥ 1 with DSGD)"
        ),
        "eval_return_ema": Setting(
            0.9, float, ge=0, lt=1, doc="weight of the old value in R̄, DSGD's running mean of evaluation returns"
        ),
        "jobs_in_flight_per_env_runner": Setting(2, int, ge=1, doc="async calls kept per runner"),
        "episodes_per_job": Setting(1, int, ge=1, doc="episodes per perturbation; its return is their mean"),
        "max_episode_steps": Setting(
            None, int, ge=1, also=(None,), doc="step cap: the env's time limit, else 10 000 (counted)"
        ),
        "perturbations_per_call": Setting(
            "auto", int, ge=1, also=("auto",), doc="perturbations per remote call; `auto`: sized by work"
        ),
        "min_reply_s": Setting(
            0.2,
            float,
            ge=0,
            source="OpenAI ES (≥ 0.2 s of episodes per message)",
            doc="`auto` calls carry at least this much runner time (in flight: about one batch at most)",
        ),
        "batch_seed_offset": Setting(0, int, doc="added to every batch seed (seeded runs draw other batches)"),
        "common_random_numbers": Setting(False, bool, doc="seed every episode from its job"),
        "num_env_runners": Setting(2, int, ge=0, rllib=True, doc="RLlib setting, family default"),
        **{name: unused(why) for name, why in UNUSED_RLLIB_SETTINGS.items()},
    }

    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class)
        # RLlib settings that fit this family.
        self.env_runner_cls = BlackBoxEnvRunner  # type: ignore[assignment]  # RLlib infers None (its default)
        self.restart_failed_env_runners = True
        # Several updates per iteration: RLlib's per-iteration bookkeeping (~0.1 s) must not
        # leave runners idle after every update.
        self.min_time_s_per_iteration = 1.0  # type: ignore[assignment]  # RLlib infers None (its default)
        # RLlib's per-iteration connector-state sync is a *synchronous* call on every runner,
        # which waits behind the jobs in flight (~0.75 s per iteration with 8 runners) and then
        # leaves them idle. The engine syncs its own observation filter (as IMPALA opts out).
        self._dont_auto_sync_env_runner_states = True
        self.min_sample_timesteps_per_iteration = 0

    @override(AlgorithmConfig)
    def validate(self) -> None:
        super().validate()
        check_optimizer(self)
        check_user_module(self, BlackBoxRLModule)
        check_env_runner_callbacks(self, "its env runners (a plain episode loop)")
        self._check_model_config()
        for kind, check in (
            ("sampler", lambda: samplers_lib.get_sampler(self.sampler)),
            ("return_shaping", lambda: shaping_lib.get_shaping(self.return_shaping)),
        ):
            try:
                check()
            except ValueError as e:
                self._value_error(f"{kind}: {e}")
        if self.noise_table is True and not self.sampler_has_table:
            self._value_error(
                f"noise_table=True: the shared noise table stands for i.i.d. Gaussian rows (samplers "
                f"{', '.join(TABLE_SAMPLERS)}), not for sampler {self.sampler!r}, whose directions are coupled "
                "within a batch: set noise_table='auto' or False (the seeded path)"
            )
        sampler_cls = samplers_lib.get_sampler(self.sampler)
        antithetic = sampler_cls.default_antithetic if self.sampler_antithetic is None else self.sampler_antithetic
        if self.sampler_antithetic is False and sampler_cls.default_antithetic:
            self._value_error(f"sampler {self.sampler!r} is antithetic by definition (sampler_antithetic=False)")
        if antithetic and self.episodes_per_batch % 2:
            self._value_error(
                f"episodes_per_batch (N) must be even for the antithetic sampler {self.sampler!r}, "
                f"got {self.episodes_per_batch}"
            )
        if self.optimizer_steps_theta and str(self.optimizer).lower() == "dsgd" and self.eval_episodes < 1:
            self._value_error(
                "optimizer 'dsgd' compares the running mean of θ_u's evaluation returns (paper 000 Eq. 20–21, "
                "as the authors feed it): set eval_episodes >= 1 (paper 000 uses 10)"
            )
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
    supported_actions: tuple[str, ...] = (DISCRETE, CONTINUOUS)

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

    @property
    def sampler_has_table(self) -> bool:
        """Whether ``sampler`` has a shared-noise-table form (i.i.d. Gaussian rows)."""
        return str(self.sampler).lower() in TABLE_SAMPLERS

    @property
    def uses_noise_table(self) -> bool:
        """Whether perturbations are slices of the shared noise table (``noise_table``; "auto": where
        the sampler has a table form). False where the algorithm reads no sampler (ERL)."""
        if "sampler" in self.unused_settings:
            return False
        return self.noise_table is True or (self.noise_table == "auto" and self.sampler_has_table)

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
    def get_default_learner_class(self) -> type[BlackBoxLearner]:
        return BlackBoxLearner
