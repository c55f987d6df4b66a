"""ReFERConfig and ReFERQConfig: the settings the ReF-ER learners of paper 003 share (VRACER_EXT;
DDPG_EXT and NAF_EXT add the Q-learners' τ and σ), their defaults (App. A) and their checks.

Novati & Koumoutsakos, "Remember and Forget for Experience Replay" (ICML 2019),
``../shared/papers/003_e2e49ddc84a31194.txt``. The loop they drive is in ``algorithm.py``.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from rllib_ext.common.guards import FiniteSingleAgentEnvRunner
from rllib_ext.common.refer.networks import network_settings
from rllib_ext.common.refer.rules import REPLAY_MODES
from rllib_ext.common.validation import (
    CLIP_REWARDS_UNREAD,
    CONTINUOUS,
    OLD_STACK_OBSERVATION_FILTER,
    REPLAY_LEARNER_CONNECTOR,
    KeepsMinusOneSettings,
    check_finite_settings,
    check_model_config_keys,
    check_optimizer,
    check_user_module,
    check_vector_spaces,
    env_spaces,
    is_number,
)
from rllib_ext.settings import Configurable, Setting, changed, unused


class ReFERConfig(Configurable, KeepsMinusOneSettings, AlgorithmConfig):
    """Settings shared by the paper-003 learners (defaults: App. A, §3).

    The settings, their defaults (App. A, §3) and bounds are the table :attr:`SETTINGS`.

    RLlib settings these learners do not read (:attr:`unused_settings`: a learner connector,
    ``num_epochs``, ``minibatch_size`` ...) and ``model_config`` keys their networks do not read
    (:attr:`model_config_keys`; ``use_lstm`` ...) are refused by :meth:`validate` when set to
    anything but their default; a user module class must subclass the algorithm's own.
    """

    #: The ``model_config`` keys the networks read (App. A's MLP; ``head_fcnet_hiddens`` must stay empty).
    model_config_keys: tuple[str, ...] = ("fcnet_hiddens", "fcnet_activation", "head_fcnet_hiddens")

    # The types of the table's own settings (set from it by Configurable; rllib_ext/settings.py, Types).
    replay_mode: str  # type: ignore[assignment]  # RLlib's AlgorithmConfig has a deprecated int one
    refer_C: float
    refer_A: float
    refer_D: float
    refer_beta_rate: float | None
    replay_capacity: int
    n_start: int
    steps_per_update: float
    per_alpha: float
    per_beta: float
    per_beta_anneal_steps: int
    optimizer: str  # type: ignore[assignment]  # RLlib's AlgorithmConfig infers its old-stack dict setting
    optimizer_kwargs: dict[str, Any]
    reward_scale_interval: int
    retrace_tolerance: float
    compile_update: bool
    torch_num_threads: int | None
    checkpoint_replay: bool

    SETTINGS = {
        "train_batch_size_per_learner": Setting(
            256, int, ge=1, rllib=True, symbol="B", source="256 (App. A)", doc="minibatch size"
        ),
        "lr": Setting(
            1e-4,
            float,
            gt=0,
            rllib=True,
            symbol="η",
            source="1e-4 (App. A)",
            doc="learning rate, annealed with Eq. 13 in the ReF-ER modes (fixed with `er`/`per`)",
        ),
        "replay_mode": Setting(
            "refer",
            choices=tuple(REPLAY_MODES),
            doc="`refer` (Rules 1+2), `refer1`, `refer2`, `er` (uniform), `per` (rank-based)",
        ),
        "refer_C": Setting(
            4.0,
            float,
            gt=0,
            symbol="C",
            source="4 (§3)",
            doc="c_max(t) = 1 + C/(1 + A·t) (Eq. 13); must be > 0",
        ),
        "refer_A": Setting(
            5e-7,
            float,
            ge=0,
            symbol="A",
            source="5e-7 (§3)",
            doc="annealing of c_max and, in the ReF-ER modes, of the learning rate (Eq. 13)",
        ),
        "refer_D": Setting(
            0.1,
            float,
            gt=0,
            lt=1,
            symbol="D",
            source="0.1 (§3)",
            doc="tolerated far-policy fraction of the RM (Eq. 12); in (0, 1)",
        ),
        "refer_beta_rate": Setting(
            1e-4,
            float,
            gt=0,
            le=1,
            also=(None,),
            symbol="η of Eq. 12",
            source='"the NN\'s learning rate" (§3)',
            doc="step of the β update, fixed and independent of the learning rate (smarties); None: the "
            "annealed learning rate η(t)",
        ),
        "replay_capacity": Setting(
            2**18, int, ge=1, symbol="N", source="2^18 (§3)", doc="replay memory size in steps", shown="2^18"
        ),
        "n_start": Setting(
            2**17,
            int,
            ge=1,
            symbol="N_start",
            source="— (not given for Gym tasks)",
            doc="steps stored before the first gradient step (App. C)",
            shown="2^17",
        ),
        "steps_per_update": Setting(1.0, float, gt=0, symbol="F", source="1", doc="env steps per gradient step"),
        "per_alpha": Setting(0.7, float, ge=0, symbol="α (PER)", doc="rank-based PER's α (Schaul et al. 2016)"),
        "per_beta": Setting(
            0.5, float, ge=0, le=1, symbol="β₀ (PER)", doc="rank-based PER's initial β (Schaul et al. 2016)"
        ),
        "per_beta_anneal_steps": Setting(
            5_000_000,
            int,
            ge=1,
            shown="5·10^6",
            doc="gradient steps over which PER's β rises linearly to 1 (Schaul et al. §3.4); the paper's run length",
        ),
        "optimizer": Setting("adam", str, doc="or a `rllib_ext.optim` name (`sgd`, `msgd`, `dsgd`)"),
        "optimizer_kwargs": Setting({}, dict, doc="passed to the optimizer"),
        "reward_scale_interval": Setting(
            1000, int, ge=1, source="1000 (App. B)", doc="gradient steps between refreshes of σ_r"
        ),
        "retrace_tolerance": Setting(
            0.0,
            float,
            ge=0,
            lt=1,
            symbol="ε",
            source="— (Algorithm 3: all prior steps)",
            doc="Eq. 8's write-back below an episode's earliest sampled step m stops at the first s with "
            "Π_{i=s}^{m−1} γρ̄_i ≤ ε; 0 = all prior steps",
        ),
        "compile_update": Setting(
            True,
            bool,
            doc="`torch.compile` of the learner's forward + loss + backward and a numba loop for Eq. 8's "
            "write-back (equal results, ~2× the gradient steps/s on one core); False: the eager step and numpy "
            "targets. A compile failure (no C compiler, no numba) falls back with one log line",
        ),
        "torch_num_threads": Setting(
            1, int, ge=1, also=(None,), doc="torch threads of the Learner's process (None: torch's default)"
        ),
        "gamma": Setting(0.995, float, ge=0, le=1, rllib=True, symbol="γ", source="0.995 (App. A)", doc="discount"),
        "rollout_fragment_length": Setting(
            20, int, ge=1, also=("auto",), rllib=True, doc="env steps per runner per `training_step`"
        ),
        "checkpoint_replay": Setting(
            False,
            bool,
            doc="checkpoints hold the RM's contents and bookkeeping (RNG, PER ranks, far count), so a restored run "
            "samples the same memory; False: it refills N_start steps",
        ),
        "min_sample_timesteps_per_iteration": Setting(
            1000, int, ge=0, rllib=True, doc="env steps per `train()` call (iteration)"
        ),
        "num_env_runners": Setting(0, int, ge=0, rllib=True, doc="0: the local runner samples"),
        "num_learners": Setting(
            0, int, ge=0, le=1, rllib=True, doc="0 or 1: the replay memory lives in the one Learner"
        ),
        "learner_connector": unused(REPLAY_LEARNER_CONNECTOR),
        "num_epochs": unused("one gradient step per `steps_per_update` (F) env steps, each on one minibatch"),
        "minibatch_size": unused("the minibatch size is `train_batch_size_per_learner` (B)"),
        "train_batch_size": unused("the minibatch size is `train_batch_size_per_learner` (B)"),
        "clip_rewards": unused(f"{CLIP_REWARDS_UNREAD}; the learners scale rewards by σ_r themselves (App. B)"),
        "observation_filter": unused(
            f"{OLD_STACK_OBSERVATION_FILTER}; the learners standardize states themselves (App. B)"
        ),
    }

    def __init__(self, algo_class: type | None = None) -> None:
        """Paper 003 defaults (App. A)."""
        super().__init__(algo_class=algo_class)
        # An env that raises, or returns NaN/inf (FiniteSingleAgentEnvRunner), costs the episode
        # (logged, counted in env_runners/num_env_step_failures), not the env runner.
        self.env_runner_cls = FiniteSingleAgentEnvRunner  # type: ignore[assignment]  # RLlib infers None (its default)
        self.restart_failed_sub_environments = True

    @override(AlgorithmConfig)
    def validate(self) -> None:
        """The table's checks, then the rules between settings, before any actor starts."""
        super().validate()
        default = self.get_default_rl_module_spec()
        if not (isinstance(default, RLModuleSpec) and isinstance(default.module_class, type)):
            raise TypeError(f"{type(self).__name__}: the default module spec names no module class: {default!r}")
        check_user_module(self, default.module_class)  # the learner reads its networks
        check_model_config_keys(
            self, self.model_config_keys, "the networks are App. A's MLPs set by `fcnet_hiddens` and `fcnet_activation`"
        )
        if self.n_start > self.replay_capacity:
            self._value_error(f"`n_start` (N_start) must be an integer in [1, replay_capacity], got {self.n_start!r}")
        check_optimizer(self)
        if self.framework_str != "torch":
            self._value_error(f"only framework='torch' is supported, got {self.framework_str!r}")
        check_finite_settings(self)
        try:
            network_settings(self.model_config)
        except ValueError as e:
            self._value_error(str(e))
        # Continuous control with MLPs on state vectors (paper 003 App. A).
        check_vector_spaces(self, env_spaces(self), actions=(CONTINUOUS,))


def _refer_eta(config: ReFERConfig) -> float:
    """η of Eq. (13), and β's step when ``refer_beta_rate`` is None: the network's learning rate
    (``lr``; DDPG: ``actor_lr``)."""
    return float(getattr(config, "actor_lr", config.lr))


class ReFERQConfig(ReFERConfig):
    """Settings shared by the Q-learning based learners of paper 003 (DDPG_EXT, NAF_EXT).

    Adds (App. A) ``tau`` and ``exploration_sigma`` (:attr:`SETTINGS`).
    """

    model_config_keys = (*ReFERConfig.model_config_keys, "exploration_sigma")

    tau: float
    exploration_sigma: float

    SETTINGS = {
        "tau": Setting(
            0.01,
            float,
            gt=0,
            le=1,
            symbol="α (target update)",
            source="0.01 (App. A)",
            doc="soft target update w̃ ← (1−α)w̃ + αw",
        ),
        "exploration_sigma": Setting(
            0.2,
            float,
            gt=0,
            symbol="σ",
            source="0.2 (App. A)",
            doc="σ of π = m + N(0, σ²I); also σ of π and μ in ρ and D_KL",
        ),
        "retrace_tolerance": changed(
            symbol="—",
            source="—",
            doc="V-RACER's (Eq. 8's write-back); must stay 0 here (no Retrace targets): `validate()` refuses "
            "another value",
        ),
    }

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
