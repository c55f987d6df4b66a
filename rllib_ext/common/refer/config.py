"""ReFERConfig and ReFERQConfig: the settings the ReF-ER learners of paper 003 share (VRACER_EXT;
DDPG_EXT and NAF_EXT add the Q-learners' τ and σ), their defaults (App. A) and their checks.

Novati & Koumoutsakos, "Remember and Forget for Experience Replay" (ICML 2019),
``../shared/papers/003_e2e49ddc84a31194.txt``. The loop they drive is in ``algorithm.py``.
"""

from __future__ import annotations

from typing import Any, Self

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.utils.annotations import override

from rllib_ext.common.guards import FiniteSingleAgentEnvRunner
from rllib_ext.common.refer.networks import network_settings
from rllib_ext.common.refer.rules import REPLAY_MODES
from rllib_ext.common.threads import check_torch_num_threads
from rllib_ext.common.validation import (
    CLIP_REWARDS_UNREAD,
    CONTINUOUS,
    OLD_STACK_OBSERVATION_FILTER,
    REPLAY_LEARNER_CONNECTOR,
    KeepsMinusOneSettings,
    algo_name,
    check_finite_settings,
    check_model_config_keys,
    check_optimizer,
    check_unused_settings,
    check_user_module,
    check_vector_spaces,
    env_spaces,
    is_integer,
    is_number,
)


class ReFERConfig(KeepsMinusOneSettings, AlgorithmConfig):
    """Settings shared by the paper-003 learners (defaults: App. A, §3).

    ReF-ER and replay settings (set through :meth:`training`):
        replay_mode: ``"refer"`` (Rules 1+2, default), ``"refer1"``, ``"refer2"``, ``"er"``
            (uniform) or ``"per"`` (rank-based prioritized).
        refer_C: C of c_max(t) = 1 + C/(1 + A·t) (Eq. 13); 4. Must be > 0 (c_max > 1).
        refer_A: A, the annealing constant of c_max and the learning rate (Eq. 13); 5e-7. The
            learning rate is annealed only with ReF-ER (``refer``, ``refer1``, ``refer2``): the
            paper's ER and PER baselines keep η fixed (§5.1: "annealing η worsened the
            instability of DDPG with regular ER and PER"; paper-era smarties sets epsAnneal = 0
            for DPG without ReF-ER).
        refer_D: D, the tolerated far-policy fraction of the RM (Eq. 12); 0.1, in (0, 1).
        refer_beta_rate: η of the β update (Eq. 12); 1e-4, fixed and independent of the
            learning rate, as the paper-era smarties (``Learner_offPolicy.cpp``:
            β ← (1 − 10⁻⁴)β [+ 10⁻⁴]; today's smarties uses 0.1·B/N, also 1e-4 at B 256 and
            N 2^18). It equals the paper's η = 1e-4 for V-RACER and NAF. None uses the annealed
            learning rate η(t), the literal reading of Eq. (12) ("η is the NN's learning rate";
            DDPG: ``actor_lr``).
        replay_capacity: N, the RM size in steps; 2^18.
        n_start: N_start, the steps stored before the first gradient step (App. C); the paper
            gives no value for the Gym tasks, 2^17 here (half of N; smarties' examples).
        steps_per_update: F, env steps per gradient step; 1.
        per_alpha, per_beta: α and the initial β of rank-based PER (Schaul et al. 2016: 0.7,
            0.5).
        per_beta_anneal_steps: Gradient steps over which PER's β rises linearly from
            ``per_beta`` to 1 (Schaul et al. 2016 §3.4 anneal it to 1 by the end of learning);
            5·10^6, the length of the paper's MuJoCo runs (smarties' ``totNumSteps``) at F = 1.
            Set it to the run's length for shorter runs.
        optimizer: ``"adam"`` (default) or any name of ``rllib_ext.optim`` ("sgd", "msgd",
            "dsgd"); ``optimizer_kwargs`` go to its constructor; the learning rate is ``lr``,
            annealed with Eq. (13) in the ReF-ER modes.
        reward_scale_interval: gradient steps between refreshes of σ_r (App. B: 1000).
        retrace_tolerance: ε of V-RACER's write-back (Algorithm 3): below an episode's earliest
            sampled step m, Eq. (8)'s correction is applied down to the first step s with
            Π_{i=s}^{m−1} γρ̄_i ≤ ε; earlier steps keep V̂^tbc within ε·|Δ_m| (Δ_m: the
            correction at m) of the full recompute per write-back. 0 (default) corrects every
            prior step, as Algorithm 3; e.g. 1e-6 saves 10-25% of a write-back at 2^18 steps in
            1000-step episodes and nothing in small memories (``ReplayMemory``'s docstring).
        checkpoint_replay: whether checkpoints hold the RM's contents and bookkeeping (False, as
            TD3_EXT's: up to 2^18 steps of states, actions and statistics). With True a restored
            algorithm samples and corrects the same memory (e.g. a race paused and resumed
            across sessions); without, it refills N_start steps first.
        torch_num_threads: torch threads of the Learner's process (1: a 2×128 MLP at B 256 is
            fastest on one thread, and several threads contend with the env runners); None
            leaves torch's default. Note that the local Learner shares the driver's process.

    RLlib settings with the paper's values: ``gamma`` 0.995, ``train_batch_size_per_learner``
    (B) 256, ``lr`` (η) 1e-4; ``rollout_fragment_length`` (env steps per runner and
    ``training_step``) 20.

    RLlib settings these learners do not read (:attr:`unused_settings`: a learner connector,
    ``num_epochs``, ``minibatch_size`` ...) and ``model_config`` keys their networks do not read
    (:attr:`model_config_keys`; ``use_lstm`` ...) are refused by :meth:`validate` when set to
    anything but their default; a user module class must subclass the algorithm's own.
    """

    #: RLlib settings never read, with what to use instead (validate() refuses a changed value).
    unused_settings: dict[str, str] = {
        "learner_connector": REPLAY_LEARNER_CONNECTOR,
        "num_epochs": "one gradient step per `steps_per_update` (F) env steps, each on one minibatch",
        "minibatch_size": "the minibatch size is `train_batch_size_per_learner` (B)",
        "train_batch_size": "the minibatch size is `train_batch_size_per_learner` (B)",
        "clip_rewards": f"{CLIP_REWARDS_UNREAD}; the learners scale rewards by σ_r themselves (App. B)",
        "observation_filter": f"{OLD_STACK_OBSERVATION_FILTER}; the learners standardize states themselves (App. B)",
    }

    #: The ``model_config`` keys the networks read (App. A's MLP; ``head_fcnet_hiddens`` must stay empty).
    model_config_keys: tuple[str, ...] = ("fcnet_hiddens", "fcnet_activation", "head_fcnet_hiddens")

    def __init__(self, algo_class=None):
        """Paper 003 defaults (App. A)."""
        super().__init__(algo_class=algo_class)
        self.gamma = 0.995
        self.lr = 1e-4
        self.train_batch_size_per_learner = 256  # B
        self.rollout_fragment_length = 20
        self.num_env_runners = 0
        self.num_learners = 0
        self.min_sample_timesteps_per_iteration = 1000
        self.replay_mode = "refer"
        self.refer_C = 4.0
        self.refer_A = 5e-7
        self.refer_D = 0.1
        self.refer_beta_rate = 1e-4
        self.replay_capacity = 2**18
        self.n_start = 2**17
        self.steps_per_update = 1.0
        self.per_alpha = 0.7
        self.per_beta = 0.5
        self.per_beta_anneal_steps = 5_000_000
        self.optimizer = "adam"
        self.optimizer_kwargs = {}
        self.reward_scale_interval = 1000
        self.retrace_tolerance = 0.0
        self.checkpoint_replay = False
        self.torch_num_threads = 1
        # An env that raises, or returns NaN/inf (FiniteSingleAgentEnvRunner), costs the episode
        # (logged, counted in env_runners/num_env_step_failures), not the env runner.
        self.env_runner_cls = FiniteSingleAgentEnvRunner
        self.restart_failed_sub_environments = True

    @override(AlgorithmConfig)
    def training(
        self,
        *,
        replay_mode: str | None = NotProvided,
        refer_C: float | None = NotProvided,
        refer_A: float | None = NotProvided,
        refer_D: float | None = NotProvided,
        refer_beta_rate: float | None = NotProvided,
        replay_capacity: int | None = NotProvided,
        n_start: int | None = NotProvided,
        steps_per_update: float | None = NotProvided,
        per_alpha: float | None = NotProvided,
        per_beta: float | None = NotProvided,
        per_beta_anneal_steps: int | None = NotProvided,
        optimizer: str | None = NotProvided,
        optimizer_kwargs: dict[str, Any] | None = NotProvided,
        reward_scale_interval: int | None = NotProvided,
        retrace_tolerance: float | None = NotProvided,
        checkpoint_replay: bool | None = NotProvided,
        torch_num_threads: int | None = NotProvided,
        **kwargs,
    ) -> Self:
        """Sets ReF-ER, replay and RLlib training settings (see the class docstring).

        Returns:
            This updated config.
        """
        super().training(**kwargs)
        for name, value in list(locals().items()):
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    @override(AlgorithmConfig)
    def validate(self) -> None:
        """One clear error per bad setting, before any actor starts."""
        super().validate()
        check_unused_settings(self, self.unused_settings)
        check_user_module(self, self.get_default_rl_module_spec().module_class)  # the learner reads its networks
        check_model_config_keys(
            self, self.model_config_keys, "the networks are App. A's MLPs set by `fcnet_hiddens` and `fcnet_activation`"
        )
        if self.replay_mode not in REPLAY_MODES:
            self._value_error(f"`replay_mode` must be one of {', '.join(REPLAY_MODES)}, got {self.replay_mode!r}")
        if not is_number(self.refer_C) or self.refer_C <= 0:
            self._value_error(
                f"`refer_C` (C) must be > 0 so that c_max = 1 + C/(1 + A·t) > 1 (Eq. 13), got {self.refer_C!r}"
            )
        if not isinstance(self.checkpoint_replay, bool):
            self._value_error(f"`checkpoint_replay` must be True or False, got {self.checkpoint_replay!r}")
        if not is_number(self.refer_A) or self.refer_A < 0:
            self._value_error(f"`refer_A` (A) must be >= 0, got {self.refer_A!r}")
        if not is_number(self.refer_D) or not 0.0 < self.refer_D < 1.0:
            self._value_error(f"`refer_D` (D) must be in (0, 1) (Eq. 12), got {self.refer_D!r}")
        if self.refer_beta_rate is not None and (
            not is_number(self.refer_beta_rate) or not 0 < self.refer_beta_rate <= 1
        ):
            self._value_error(f"`refer_beta_rate` must be None or in (0, 1], got {self.refer_beta_rate!r}")
        if not is_integer(self.train_batch_size_per_learner) or self.train_batch_size_per_learner < 1:
            self._value_error(
                f"`train_batch_size_per_learner` (B) must be an integer >= 1, got {self.train_batch_size_per_learner!r}"
            )
        if not is_integer(self.replay_capacity) or self.replay_capacity < 1:
            self._value_error(f"`replay_capacity` (N) must be an integer >= 1, got {self.replay_capacity!r}")
        if not is_integer(self.n_start) or not 1 <= self.n_start <= self.replay_capacity:
            self._value_error(f"`n_start` (N_start) must be an integer in [1, replay_capacity], got {self.n_start!r}")
        if not is_number(self.steps_per_update) or self.steps_per_update <= 0:
            self._value_error(f"`steps_per_update` (F) must be > 0, got {self.steps_per_update!r}")
        if not is_number(self.per_beta) or not 0.0 <= self.per_beta <= 1.0:
            self._value_error(f"`per_beta` (PER's initial β) must be in [0, 1], got {self.per_beta!r}")
        if not is_integer(self.per_beta_anneal_steps) or self.per_beta_anneal_steps < 1:
            self._value_error(
                f"`per_beta_anneal_steps` must be an integer >= 1 (gradient steps), got {self.per_beta_anneal_steps!r}"
            )
        check_torch_num_threads(self)
        if not is_integer(self.reward_scale_interval) or self.reward_scale_interval < 1:
            self._value_error(f"`reward_scale_interval` must be an integer >= 1, got {self.reward_scale_interval!r}")
        if not is_number(self.retrace_tolerance) or not 0.0 <= self.retrace_tolerance < 1.0:
            self._value_error(f"`retrace_tolerance` must be in [0, 1), got {self.retrace_tolerance!r}")
        check_optimizer(self)
        if self.num_learners > 1:
            self._value_error(
                f"{algo_name(self)} supports `num_learners` 0 or 1 (the replay memory lives in the one Learner), "
                f"got {self.num_learners}"
            )
        if self.framework_str != "torch":
            self._value_error(f"only framework='torch' is supported, got {self.framework_str!r}")
        check_finite_settings(self)
        try:
            network_settings(self.model_config)
        except ValueError as e:
            self._value_error(str(e))
        # Continuous control with MLPs on state vectors (paper 003 App. A).
        check_vector_spaces(self, env_spaces(self), actions=(CONTINUOUS,))


def _refer_eta(config) -> float:
    """η of Eq. (13), and β's step when ``refer_beta_rate`` is None: the network's learning rate
    (``lr``; DDPG: ``actor_lr``)."""
    return float(getattr(config, "actor_lr", config.lr))


class ReFERQConfig(ReFERConfig):
    """Settings shared by the Q-learning based learners of paper 003 (DDPG_EXT, NAF_EXT).

    Adds (App. A): ``tau`` (α of the soft target update w̃ ← (1−α)w̃ + αw, 0.01) and
    ``exploration_sigma`` (σ of the exploration noise π^w = m^w + N(0, σ²I), 0.2; it is also the
    σ of π and μ in ρ and D_KL, §2).
    """

    model_config_keys = (*ReFERConfig.model_config_keys, "exploration_sigma")

    def __init__(self, algo_class=None):
        """App. A defaults."""
        super().__init__(algo_class=algo_class)
        self.tau = 0.01
        self.exploration_sigma = 0.2

    @override(ReFERConfig)
    def training(
        self, *, tau: float | None = NotProvided, exploration_sigma: float | None = NotProvided, **kwargs
    ) -> Self:
        """Sets ``tau`` and ``exploration_sigma`` and the settings of :class:`ReFERConfig`."""
        super().training(**kwargs)
        if tau is not NotProvided:
            self.tau = tau
        if exploration_sigma is not NotProvided:
            self.exploration_sigma = exploration_sigma
        return self

    @property
    @override(ReFERConfig)
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return super()._model_config_auto_includes | {"exploration_sigma": self.exploration_sigma}

    @override(ReFERConfig)
    def validate(self) -> None:
        """ReFERConfig's checks plus τ ∈ (0, 1] and σ > 0; ``retrace_tolerance`` must stay 0 (these
        learners store no Retrace targets, so a tolerance would be a silent no-op)."""
        super().validate()
        if is_number(self.retrace_tolerance) and self.retrace_tolerance != 0.0:
            self._value_error(
                f"`retrace_tolerance` applies to V-RACER's Retrace write-back (Eq. 8); {type(self).__name__} "
                f"stores no Retrace targets, so it must stay 0, got {self.retrace_tolerance!r}"
            )
        if not is_number(self.tau) or not 0.0 < self.tau <= 1.0:
            self._value_error(f"`tau` must be in (0, 1], got {self.tau!r}")
        if not is_number(self.exploration_sigma) or self.exploration_sigma <= 0:
            self._value_error(f"`exploration_sigma` must be > 0, got {self.exploration_sigma!r}")
