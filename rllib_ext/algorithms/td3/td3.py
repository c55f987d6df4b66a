"""TD3_EXT: TD3 (Fujimoto et al. 2018) on RLlib's new API stack, as used by AES-RL (paper 001).

Fujimoto, van Hoof & Meger, "Addressing Function Approximation Error in Actor-Critic Methods"
(ICML 2018) is the RL part of AES-RL (``../shared/papers/001_6bf500f1c5f7a9b5.txt``); this is
its synchronous baseline. Networks (App. A): a 400-300 tanh actor with a tanh output mapped
onto the action bounds, and twin 400-300 leaky-ReLU critics. Hyperparameters (App. C, CEM-RL,
TD3): Adam 1e-3 for both, B 100, γ 0.99, τ 0.005, target smoothing σ 0.2 clipped at 0.5,
actor and targets updated every 2nd critic step, Gaussian exploration noise 0.1, replay
capacity 2e5 in paper 001 (TD3: 1e6, the default here), ``initial_steps`` of uniform random
actions (TD3: 10000 on MuJoCo). ``configs/td3.yaml`` holds the paper's values.

Data flow per ``training_step`` (:class:`~rllib_ext.common.offpolicy.algorithm.OffPolicyAlgorithm`'s):

1. RLlib's env runners (``SingleAgentEnvRunner``) sample ``rollout_fragment_length`` steps
   each: uniform random actions while the lifetime env-step count (RLlib's
   ``num_env_steps_sampled_lifetime``, known exactly on the driver) is below ``initial_steps``
   (``random_actions=True``), then π(s) plus Gaussian noise (:mod:`.td3_rl_module`).
2. The episode chunks go to the Learner (:mod:`.td3_learner`), which turns them into
   transitions in its :class:`~rllib_ext.common.offpolicy.transitions.TransitionBuffer` and takes
   ``updates_per_env_step`` TD3 iterations per env step stored after ``initial_steps``
   (:class:`~rllib_ext.common.offpolicy.td3.TD3Updater`: critic every iteration, actor and targets every
   ``policy_delay``-th).
3. The actor's weights go back to the env runners (after a check that no parameter is NaN/inf;
   an env step returning NaN/inf is dropped with its episode, :mod:`rllib_ext.common.guards`).

The env runners act with an actor at most one ``training_step`` old (TD3 acts with the newest).

Metrics: ``learners/default_policy/{critic_loss, actor_loss, q_mean, target_q_mean}`` (means
over the last ``training_step``'s iterations; ``q_mean`` averages Q_θ1 and Q_θ2 on the
minibatch) and ``learners/__all_modules__/{replay_size, num_updates_lifetime,
num_env_steps_stored_lifetime}``; env steps under RLlib's keys (``num_env_steps_sampled_lifetime``,
Tune's ``timesteps_total``).

Checkpoints hold the networks and their targets, both Adam states, the update and env-step
counters and the smoothing-noise generator; the replay contents only with
``checkpoint_replay=True`` (default False).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from rllib_ext.common.guards import FiniteSingleAgentEnvRunner
from rllib_ext.common.offpolicy.algorithm import OffPolicyAlgorithm
from rllib_ext.common.offpolicy.settings import TD3_SETTINGS
from rllib_ext.common.offpolicy.td3 import PAPER_HIDDENS
from rllib_ext.common.validation import (
    CLIP_REWARDS_UNREAD,
    CONTINUOUS,
    OLD_STACK_OBSERVATION_FILTER,
    REPLAY_LEARNER_CONNECTOR,
    algo_name,
    check_finite_settings,
    check_model_config_keys,
    check_optimizer,
    check_user_module,
    check_vector_spaces,
    env_spaces,
    is_integer,
)
from rllib_ext.settings import Configurable, Setting, unused

#: RLlib settings TD3_EXT never reads, with what to use instead (validate() refuses a changed value).
UNUSED_SETTINGS: dict[str, str] = {
    "lr": "TD3's learning rates are `actor_lr` and `critic_lr`",
    "grad_clip": "TD3's updates are not clipped",
    "learner_connector": REPLAY_LEARNER_CONNECTOR,
    "num_epochs": "`updates_per_env_step` TD3 iterations per env step, each on one minibatch",
    "minibatch_size": "the minibatch size is `train_batch_size_per_learner`",
    "train_batch_size": "the minibatch size is `train_batch_size_per_learner`",
    "clip_rewards": CLIP_REWARDS_UNREAD,
    "observation_filter": OLD_STACK_OBSERVATION_FILTER,
}


class TD3Config(Configurable, AlgorithmConfig):
    """TD3_EXT's configuration. Defaults: TD3 (Fujimoto et al. 2018) and paper 001 App. A/C.

    The TD3 settings are the off-policy family's group
    (:data:`~rllib_ext.common.offpolicy.settings.TD3_SETTINGS`, TD3's defaults); :attr:`SETTINGS`
    adds TD3_EXT's own and the RLlib settings it reads.

    Networks: ``model_config["fcnet_hiddens"]``, the hidden sizes of the actor and of each
    critic: [400, 300] (App. A; [256, 256] for Humanoid); activations are App. A's (tanh actor,
    leaky-ReLU critics).

    RLlib settings with TD3's values: ``gamma`` 0.99, ``train_batch_size_per_learner`` 100 (App.
    C / CEM-RL; TD3's later code uses 256), ``rollout_fragment_length`` 20 (env steps per
    runner per ``training_step``), ``num_env_runners`` 0 (the local runner samples),
    ``normalize_actions``/``clip_actions`` off (the actor maps onto the bounds itself).

    RLlib settings TD3_EXT does not read (``unused`` in :attr:`SETTINGS`: ``lr``, ``grad_clip``, a
    learner connector, ``num_epochs`` ...) and ``model_config`` keys other than ``fcnet_hiddens``
    (``use_lstm``, ``fcnet_activation`` ...) are refused by :meth:`validate` when set to anything
    but their default; a user module class must subclass ``TD3TorchRLModule``.
    """

    SETTINGS = {
        **TD3_SETTINGS,
        "updates_per_env_step": Setting(
            1.0, float, gt=0, source="1 (TD3)", doc="TD3 iterations per env step stored after `initial_steps`"
        ),
        "torch_num_threads": Setting(
            1, int, ge=1, also=(None,), doc="torch threads of the Learner's process (None: torch's default)"
        ),
        "train_batch_size_per_learner": Setting(
            100, int, ge=1, rllib=True, symbol="B", source="100 (CEM-RL/TD3)", doc="minibatch size"
        ),
        "rollout_fragment_length": Setting(
            20, int, ge=1, also=("auto",), rllib=True, doc="env steps per runner per `training_step`"
        ),
        "min_sample_timesteps_per_iteration": Setting(
            1000, int, ge=0, rllib=True, doc="env steps per `train()` call (iteration)"
        ),
        "num_env_runners": Setting(0, int, ge=0, rllib=True, doc="the local runner samples"),
        "num_learners": Setting(0, int, ge=0, le=1, rllib=True, doc="0 or 1: the replay lives in the one Learner"),
        "normalize_actions": Setting(
            False, bool, rllib=True, doc="must stay False: the actor maps onto the Box bounds itself"
        ),
        "clip_actions": Setting(False, bool, rllib=True, doc="off: the actor's actions are within the bounds"),
        **{name: unused(why) for name, why in UNUSED_SETTINGS.items()},
    }

    LEARNER_CLASS = "rllib_ext.algorithms.td3.torch.td3_torch_learner:TD3TorchLearner"
    RL_MODULE_CLASS = "rllib_ext.algorithms.td3.td3_rl_module:TD3TorchRLModule"

    def __init__(self, algo_class=None):
        """TD3 / paper 001 defaults."""
        super().__init__(algo_class=algo_class or TD3)
        self.env_runner_cls = FiniteSingleAgentEnvRunner  # NaN/inf env steps: episode dropped (common.guards)
        self.restart_failed_sub_environments = True

    @property
    @override(AlgorithmConfig)
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return super()._model_config_auto_includes | {
            "fcnet_hiddens": list(PAPER_HIDDENS),  # App. A; override with .rl_module(model_config=...)
            "action_noise": self.action_noise,
        }

    @override(AlgorithmConfig)
    def validate(self) -> None:
        """One clear error per bad setting and for non-continuous envs, before any actor starts."""
        super().validate()
        check_finite_settings(self)
        check_optimizer(self)
        check_user_module(self, self.get_default_rl_module_spec().module_class)  # the learner reads its networks
        check_model_config_keys(
            self,
            ("fcnet_hiddens", "action_noise"),
            "the actor and critics are App. A's MLPs (tanh actor, leaky-ReLU critics) sized by `fcnet_hiddens`",
        )
        if self.replay_capacity < self.train_batch_size_per_learner:
            self._value_error(
                f"`replay_capacity` must be an integer >= train_batch_size_per_learner "
                f"({self.train_batch_size_per_learner}), got {self.replay_capacity!r}"
            )
        hiddens = self.model_config.get("fcnet_hiddens")
        if not isinstance(hiddens, (list, tuple)) or not hiddens or not all(is_integer(h) and h > 0 for h in hiddens):
            self._value_error(
                f"`model_config['fcnet_hiddens']` must be a non-empty list of positive integers, got {hiddens!r}"
            )
        if self.normalize_actions:
            self._value_error(
                f"{algo_name(self)} maps its actions onto the Box bounds itself (and stores them in env units); "
                "set `normalize_actions=False`"
            )
        if self.framework_str != "torch":
            self._value_error(f"only framework='torch' is supported, got {self.framework_str!r}")
        spaces = env_spaces(self)
        check_vector_spaces(self, spaces, actions=(CONTINUOUS,))
        if spaces is not None and not (np.all(np.isfinite(spaces[1].low)) and np.all(np.isfinite(spaces[1].high))):
            self._value_error(f"{algo_name(self)} needs finite action bounds; env {self.env!r} has {spaces[1]}")


class TD3(OffPolicyAlgorithm):
    """TD3_EXT (see the module docstring)."""

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> TD3Config:
        """TD3 / paper 001 defaults."""
        return TD3Config()

    @override(OffPolicyAlgorithm)
    def _sample_kwargs(self) -> dict[str, Any]:
        """Uniform random actions while the lifetime env-step count is below ``initial_steps``."""
        sampled = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        return {"random_actions": sampled < self.config.initial_steps}
