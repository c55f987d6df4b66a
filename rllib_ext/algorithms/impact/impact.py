"""IMPACT: Importance Weighted Asynchronous Architectures with Clipped Target Networks.

Luo, Yao, Liaw, Liang, Stoica (ICLR 2020), ``../shared/papers/004_555154fd259f23fa.txt``,
registered as ``IMPACT_EXT``.

RLlib 2.60's APPO descends from IMPACT, but its torch loss clips the target-worker ratio at a
hard-coded 2.0 (``target_worker_clipping`` is ignored), uses plain V-trace advantages instead of
the paper's V-trace GAE-λ, and syncs its target network by trained env steps. IMPACT_EXT
implements the paper: its own ``training_step`` follows Algorithm 1, the loss is Algorithm 1
line 8 (see ``torch/impact_torch_learner.py``), and the circular buffer C(N, K) is a component of
its own (``circular_buffer.py``).

Data flow (Algorithm 1, Figure 1c):

1. Env runners (workers) sample asynchronously, each with its own copy of the weights
   (Worker-i lines 1-8); the driver collects whatever fragments are ready and groups them into
   train batches of ``train_batch_size_per_learner`` env steps (size M).
2. Each train batch goes into the circular buffer C(N, K) inside the Learner (line 4, 6).
3. The learner draws batches; on a batch's first draw (k = 0) it evaluates the batch on the
   target network and keeps that output in the batch (line 7); it computes the IMPACT loss and
   updates (lines 8-9); a batch leaves the buffer after its K-th draw (line 10).
4. The target network is synced every ``target_network_update_freq`` learner updates (default
   n = N·K, §4.1.1), and the KL coefficient is adapted then (line 11).
5. Weights are broadcast to the workers every ``broadcast_interval`` learner updates (line 12),
   through RLlib's EnvRunnerStateServer (workers pull them at their next ``sample()``,
   Worker-i line 7).

The learner runs in its own thread (``learner_thread=True``, the default; Figure 1c): the
driver's ``training_step`` keeps ``max_requests_in_flight_per_env_runner`` (2) sample requests
in flight per runner, hands finished fragments to the Learner without waiting for updates, and
ships whatever weights the learner thread last snapshot. The learner thread draws from C(N, K)
in round robin (each batch exactly K times, interleaved with the other held batches), waits on
the buffer when it has nothing to draw, and snapshots the weights when a broadcast is due
(every ``broadcast_interval`` updates) and the driver has taken the previous snapshot. When
sampling outpaces the learner, worker batches wait for a slot in a queue of
``circular_buffer_queue_size``; a full queue drops its oldest batch (counted in
``circular_buffer_num_dropped_lifetime``). ``learner_thread=False`` runs the draws inside
``training_step`` instead (the learner then blocks sampling; for debugging and as an ablation).

Scale (as RLlib's APPO): ``num_learners >= 2`` learner actors, each with its own C(N, K), whose
gradients RLlib averages with torch DDP (one all-reduce per update), ``num_gpus_per_learner``,
and ``MultiAgentEnv`` s with several policies (``config.multi_agent(...)``; each module its own
loss, target network and KL coefficient). DDP needs every learner to run the same updates in the
same order, so the driver hands each learner the same number of train batches per call and never
more than its wait queue takes (``_impact_shares``), and ``train()`` ends with the learner
threads paused after an agreed draw (``step``; see ``impact_learner.py`` for the learner side).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import time
from typing import Any

import ray
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo.appo import APPO, APPOConfig
from ray.rllib.core import COMPONENT_ENV_TO_MODULE_CONNECTOR, COMPONENT_MODULE_TO_ENV_CONNECTOR
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    MEAN_NUM_EPISODE_LISTS_RECEIVED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
    NUM_SYNCH_WORKER_WEIGHTS,
    SAMPLE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from rllib_ext import _compat
from rllib_ext.algorithms.impact.impact_learner import LEARNER_DROPPED_STEPS_KEY, LEARNER_WAIT_TIMEOUT_S
from rllib_ext.algorithms.impact.losses import SURROGATE_RATIOS, VALUE_TARGETS
from rllib_ext.algorithms.impact.reward_clipping import add_reward_clipping, clip_rewards_error
from rllib_ext.common.fault_tolerance import ThrottledEnvRunnerProbe
from rllib_ext.common.guards import (
    FiniteMultiAgentEnvRunner,
    FiniteParametersGuard,
    FiniteSingleAgentEnvRunner,
)
from rllib_ext.common.steps import log_all_used, steps_in_episodes
from rllib_ext.common.validation import (
    OLD_STACK_OBSERVATION_FILTER,
    KeepsMinusOneSettings,
    check_default_module_builds,
    check_finite_settings,
    check_optimizer,
    check_user_module,
    is_number,
    module_spaces,
)
from rllib_ext.settings import Configurable, Setting, unused

logger = logging.getLogger(__name__)

#: Driver metrics with several learners (under learners/__all_modules__/): train batches held
#: back for the next call, and those dropped (oldest first) because all wait queues were full.
HELD_BACK_KEY = "circular_buffer_num_held_back"
DRIVER_DROPPED_KEY = "circular_buffer_num_dropped_by_driver_lifetime"
#: Env steps of the train batches the driver dropped (under env_runners/; booked as wasted); those
#: a learner's full wait queue dropped are under learners/__all_modules__/ (LEARNER_DROPPED_STEPS_KEY).
DRIVER_DROPPED_STEPS_KEY = "num_env_steps_dropped_by_driver_lifetime"

#: The driver calls the learners' ``impact_update`` (which reduces their metrics, ~1 ms in the
#: learner's process) only with new train batches, at an iteration's first loop (it also resumes
#: the learner threads held between iterations) and at least this often (seconds), so learner
#: metrics are never staler; in the other loops it only takes the newest weights snapshot.
LEARNER_RESULTS_PERIOD_S = 1.0

#: §4.1.1: "when n = 1∼4, the agent does not learn" (n = learner updates between target syncs).
#: An explicit `target_network_update_freq` at or below this is rejected unless forced.
MAX_NON_LEARNING_TARGET_PERIOD = 4

#: Settings inherited from RLlib's AlgorithmConfig / IMPALAConfig / APPOConfig that IMPACT_EXT
#: never reads, with what to use instead. validate() rejects a value other than the default.
IGNORED_SETTINGS: dict[str, str] = {
    "num_epochs": (
        "each learner update is one gradient step on one batch drawn from the circular buffer; "
        "the reuse of a batch is `circular_buffer_iterations_per_batch` (K), which is also what "
        "the old `num_sgd_iter` of the authors' APPO meant"
    ),
    "minibatch_size": (
        "a learner update trains on one whole train batch of `train_batch_size_per_learner` (M) "
        "env steps; §3.2's minibatches are the N batches of the circular buffer"
    ),
    "shuffle_batch_per_epoch": "there are no epochs or minibatches to shuffle (see `num_epochs`)",
    "train_batch_size": (
        "the train batch size M is `train_batch_size_per_learner` (`train_batch_size` is only "
        "read when `train_batch_size_per_learner` is None)"
    ),
    "use_gae": "the advantages are always V-trace GAE-λ (§3.1); `lambda_=1.0` gives V-trace's",
    "vtrace_clip_pg_rho_threshold": (
        "the policy gradient uses A^{V-GAE} (§3.1), whose δ-weights are truncated at "
        "`vtrace_clip_rho_threshold` (ρ̄), and R3's `target_worker_clipping` (ρ)"
    ),
    "simple_queue_size": "the learner draws from the circular buffer C(N, K), not from APPO's queue",
    "num_gpu_loader_threads": "there are no GPU loader threads",
    "timeout_s_aggregator_manager": "there are no aggregator actors",
    "opt_type": "the optimizer is `optimizer` (with `optimizer_kwargs`)",
    "decay": "the optimizer is `optimizer` (with `optimizer_kwargs`)",
    "momentum": "the optimizer is `optimizer` (with `optimizer_kwargs`)",
    "epsilon": "the optimizer is `optimizer` (with `optimizer_kwargs`)",
    "replay_buffer_num_slots": "the only buffer is the circular buffer C(N, K)",
    "learner_queue_timeout": "the learner draws from the circular buffer C(N, K), not from a queue",
    "observation_filter": OLD_STACK_OBSERVATION_FILTER,
}


class IMPACTConfig(Configurable, KeepsMinusOneSettings, APPOConfig):
    """Configuration of IMPACT_EXT (paper 004).

    Defaults follow the paper's Table 1 (discrete control) with RLlib's default network, which
    is the paper's continuous-control network: two fully connected layers of 256 tanh units for
    the policy and a critic of the same shape (``vf_share_layers=False``; set
    ``model_config={"vf_share_layers": True}`` for a shared torso). Table 2 (continuous control)
    is ``configs/impact_continuous.yaml``.

    Settings that differ in meaning from APPO's:
        target_network_update_freq: learner updates between target-network syncs (Algorithm 1
            ``t_target``); None (default) means n = N·K, the paper's §4.1.1 benchmark. (APPO
            counts multiples of N·K·batch size in trained env steps.) 1 to 4 is the range where
            "the agent does not learn" (§4.1.1) and is rejected unless
            ``force_target_network_update_freq=True``.
        target_worker_clipping: ρ ≥ 1 of R3 (β = 1/ρ). APPO ignores it; here it is used.
        lambda_: λ of the V-trace GAE-λ advantage (§3.1).
        broadcast_interval: learner updates between weight snapshots for the workers
            (``t_frequency``); the driver ships the newest snapshot at its next loop.

    A default that differs from RLlib's: ``max_requests_in_flight_per_env_runner`` is 2, so that
    a runner samples its next fragment while the driver collects the last one.

    Own settings: ``learner_thread`` (True: the learner trains in its own thread, Figure 1c;
    False: inside ``training_step``, blocking sampling), ``circular_buffer_queue_size`` (worker
    batches waiting for a slot of C(N, K), 4; the oldest is dropped and counted when one more
    arrives), ``surrogate_ratio``, ``value_target``, ``vtrace_clip_c_threshold`` (c̄),
    ``force_target_network_update_freq``, ``optimizer``, ``optimizer_kwargs`` (see
    :meth:`training`) and ``torch_num_threads`` (torch threads of the Learner's process; 1 by
    default: with the learner in the driver, more threads contend with the env runners on a
    small machine; None leaves torch's default).

    Inherited settings IMPACT_EXT does not read (:data:`IGNORED_SETTINGS`: ``num_epochs``,
    ``minibatch_size``, ``vtrace_clip_pg_rho_threshold``, ...) are rejected by
    :meth:`validate` when set to anything but their default. A user module class
    (``rl_module_spec``) must implement ``TargetNetworkAPI`` and ``ValueFunctionAPI``; RLlib's
    connectors, ``use_lstm`` and the other ``model_config`` keys go to RLlib's own pipelines and
    default module.

    Example:
        >>> from rllib_ext import IMPACTConfig
        >>> config = IMPACTConfig().environment("CartPole-v1").training(lr=5e-4)
        >>> algo = config.build_algo()  # doctest: +SKIP
    """

    SETTINGS = {
        "circular_buffer_num_batches": Setting(
            4,
            int,
            ge=1,
            rllib=True,
            symbol="N",
            source='4 (T1), 16 (T2); §4.3: "N = 1, K = 2 works best" for discrete',
            doc="slots of C(N, K), traversed in turn (Fig. 4a)",
        ),
        "circular_buffer_queue_size": Setting(
            4,
            int,
            ge=1,
            doc="worker batches that may wait for a free slot; when one more arrives the oldest waiting batch is "
            "dropped before any draw and counted (sampling outpaces the learner)",
        ),
        "learner_thread": Setting(
            True,
            bool,
            source="Fig. 1c",
            doc="True: the learner draws and updates in its own thread and never blocks sampling; False: inside "
            "`training_step` (the learner blocks sampling; for debugging and as an ablation)",
        ),
        "max_requests_in_flight_per_env_runner": Setting(
            2,
            int,
            ge=1,
            rllib=True,
            shown="2 (RLlib: 1)",
            doc="sample requests each runner has in flight, so that it samples while the driver collects",
        ),
        "circular_buffer_iterations_per_batch": Setting(
            2,
            int,
            ge=1,
            rllib=True,
            symbol="K",
            source="2 (T1), 20 (T2; 32 for HalfCheetah)",
            doc="draws of one batch before it leaves its slot (Alg. 1 l. 10); every batch that reaches a slot is "
            "drawn exactly K times",
        ),
        "train_batch_size_per_learner": Setting(
            500,
            int,
            ge=1,
            rllib=True,
            symbol='M, "Train Batch Size"',
            source="500 (T1), 32768 (T2)",
            doc="env steps per train batch (one buffer entry)",
        ),
        "rollout_fragment_length": Setting(
            50,
            int,
            ge=1,
            also=("auto",),
            rllib=True,
            symbol='S, "Sample Batch Size"',
            source="50 (T1), 1024 (T2)",
            doc="env steps a worker samples per call (Worker-i l. 3); each V-trace GAE-λ trace runs to the end of "
            "its fragment or episode",
        ),
        "target_worker_clipping": Setting(
            2.0,
            float,
            ge=1,
            rllib=True,
            symbol="ρ (β = 1/ρ)",
            source="2.0 (T1, T2); ρ ≥ 1 (§3.1)",
            doc="R3 = πθ / max(πtarget, β·πworker); must be ≥ 1",
        ),
        "target_network_update_freq": Setting(
            None,
            int,
            ge=1,
            also=(None,),
            rllib=True,
            symbol="t_target, n",
            source="n = N·K (§4.1.1)",
            shown="None (= N·K)",
            doc="learner updates between target syncs; the unit differs from APPO's (env steps); 1–4 is rejected "
            "unless `force_target_network_update_freq`",
        ),
        "force_target_network_update_freq": Setting(
            False,
            bool,
            doc='accept a `target_network_update_freq` of 1–4, the range where "the agent does not learn" '
            "(§4.1.1, Fig. 3b)",
        ),
        "tau": Setting(
            1.0,
            float,
            gt=0,
            le=1,
            rllib=True,
            source="copy (Alg. 1 l. 2, 11)",
            doc="target update θ' ← τθ + (1−τ)θ' at each sync; 1.0 copies",
        ),
        "broadcast_interval": Setting(
            1,
            int,
            ge=1,
            rllib=True,
            symbol="t_frequency",
            source="— (Alg. 1 l. 12)",
            doc="learner updates between weight broadcasts (snapshots the driver ships at its next loop)",
        ),
        "clip_param": Setting(
            0.3,
            float,
            gt=0,
            rllib=True,
            symbol="ε",
            source="0.3 (T1), 0.4 (T2)",
            doc="PPO's clip of R: min(R·A, clip(R, 1−ε, 1+ε)·A) (§4.1, App. E)",
        ),
        "lambda_": Setting(
            0.995,
            float,
            ge=0,
            le=1,
            rllib=True,
            symbol="λ",
            source="0.995 (T1, T2)",
            doc="λ of V-trace GAE-λ (§3.1)",
        ),
        "gamma": Setting(
            0.99, float, ge=0, le=1, rllib=True, symbol="γ", source="0.99 (T1), 0.995 (T2)", doc="discount"
        ),
        "lr": Setting(
            1e-4,
            (float, list),
            gt=0,
            rllib=True,
            symbol="α_t (and β_t)",
            source="1e-4 (T1), 3e-4 (T2)",
            doc="learning rate of the one optimizer over policy and value parameters; a schedule is allowed",
        ),
        "use_kl_loss": Setting(
            True, bool, rllib=True, source="KL term of Alg. 1 l. 8", doc="adds η·KL(πtarget ‖ πθ) to the loss"
        ),
        "kl_coeff": Setting(
            0.0,
            float,
            rllib=True,
            symbol="η (initial)",
            source="0.0 (T1), 1.0 (T2)",
            doc="initial KL coefficient (>= 0 with the KL loss); the adaptive rule multiplies it, so 0.0 stays 0",
        ),
        "kl_target": Setting(
            0.01,
            float,
            rllib=True,
            source="0.01 (T1), 0.04 (T2)",
            doc="(> 0 with the KL loss) η ×1.5 if mean KL > 2·target, ×0.5 if < target/2, at each target sync",
        ),
        "vf_loss_coeff": Setting(
            1.0,
            float,
            ge=0,
            rllib=True,
            symbol='"Value Function Coeff"',
            source="1.0 (T1, T2; 0.5 for HalfCheetah)",
            doc="weight of the value loss ½(V − V̂)², V̂ the critic target (`value_target`)",
        ),
        "entropy_coeff": Setting(
            0.01,
            (float, list),
            rllib=True,
            symbol='"Entropy Coeff"',
            source="0.01 (T1), 0.0 (T2)",
            doc="entropy bonus; a schedule is allowed",
        ),
        "grad_clip": Setting(
            10.0,
            float,
            gt=0,
            also=(None,),
            rllib=True,
            symbol='"Grad Clipping"',
            source="10.0 (T1), 0.5 (T2)",
            doc="clip of the gradient (None: no clipping)",
        ),
        "grad_clip_by": Setting("global_norm", str, rllib=True, doc="how `grad_clip` clips (RLlib's)"),
        "surrogate_ratio": Setting(
            "r3",
            choices=SURROGATE_RATIOS,
            symbol="R1, R2, R3",
            source="R3 (§3.1); R1, R2 in the §4.1 ablation",
            doc="`r1` πθ/πtarget, `r2` πθ/πworker, `r3` IMPACT",
        ),
        "standardize_advantages": Setting(
            False,
            bool,
            source="not in the paper",
            doc="standardise each drawn batch's advantages (mean 0, std 1), as RLlib's PPO does",
        ),
        "optimizer": Setting(
            "adam",
            str,
            source="not stated",
            doc="`adam`, or paper 000's `sgd`, `msgd`, `dsgd` (`rllib_ext.optim`); DSGD is fed the workers' mean "
            "return",
        ),
        "optimizer_kwargs": Setting(
            {}, dict, doc="extra optimizer arguments (the learning rate always comes from `lr`)"
        ),
        "torch_num_threads": Setting(
            1, int, ge=1, also=(None,), doc="torch threads of the learner's process (None: torch's default)"
        ),
        "value_target": Setting(
            "v_gae",
            choices=VALUE_TARGETS,
            symbol="V̂_V-GAE (Alg. 1 l. 8)",
            source="V̂_V-GAE, not defined further",
            doc="the critic's regression target: `v_gae` V + A^V-GAE (same λ as the advantage), `vtrace` the "
            "λ = 1 V-trace target v_s (IMPALA, the authors' code)",
        ),
        "vtrace_clip_rho_threshold": Setting(
            1.0,
            float,
            gt=0,
            rllib=True,
            symbol="ρ̄",
            source="not given",
            doc="truncation of ρ_i on the TD errors δ_i of A^V-GAE (and so of the critic target)",
        ),
        "vtrace_clip_c_threshold": Setting(
            1.0,
            float,
            gt=0,
            symbol="c̄",
            source="not given",
            doc="truncation of the trace coefficients c_j of A^V-GAE (§3.1)",
        ),
        "num_env_runners": Setting(
            2,
            int,
            ge=0,
            rllib=True,
            symbol="W",
            source="not given; 16 CPUs (MuJoCo), 32 (Atari), 1 GPU each (§4.3)",
            doc="workers; `rllib train` fits it to the free CPUs unless you pass `--num-env-runners`",
        ),
        "num_learners": Setting(
            0,
            int,
            ge=0,
            rllib=True,
            source='one "master learner" (§3, Fig. 1c) on 1 GPU (§4.3)',
            doc="0: the learner and the buffer live in the driver; 1: in their own learner actor; L ≥ 2: L "
            "learner actors, each with its own C(N, K), whose gradients torch DDP averages in every update",
        ),
        "timeout_s_sampler_manager": Setting(
            0.01,
            float,
            ge=0,
            rllib=True,
            doc="seconds the driver waits for worker fragments in each loop (APPO: 0.0, a busy loop)",
        ),
        "min_time_s_per_iteration": Setting(
            10,
            float,
            ge=0,
            also=(None,),
            rllib=True,
            doc="seconds per reported iteration (RLlib's IMPALA/APPO value)",
        ),
        "num_gpus_per_learner": Setting(
            0,
            float,
            ge=0,
            rllib=True,
            source="1 GPU (§4.3)",
            doc="GPUs per learner: the module, its batches, the target outputs and the trace operator on the GPU",
        ),
        "clip_rewards": Setting(
            None,
            rllib=True,
            source="Atari: the sign of each reward (the authors' RLlib)",
            shown="None (no clipping)",
            doc="`True`: the train batch's rewards become their sign; a number c > 0: clipped to [−c, c]; the "
            "reported returns stay the env's",
        ),
        "restart_failed_sub_environments": Setting(
            True, bool, rllib=True, doc="an env that raises or returns NaN/inf costs the episode, not the runner"
        ),
        **{name: unused(why) for name, why in IGNORED_SETTINGS.items()},
    }

    def __init__(self, algo_class=None):
        """Initializes an IMPACTConfig with the paper's Table 1 values (:attr:`SETTINGS`)."""
        super().__init__(algo_class=algo_class or IMPACT)
        # An env that raises, or returns NaN/inf (FiniteSingleAgentEnvRunner), costs the episode
        # (logged, counted in env_runners/num_env_step_failures), not the env runner.
        self.env_runner_cls = FiniteSingleAgentEnvRunner

    @property
    def target_update_interval(self) -> int:
        """n: learner updates between target-network syncs (N·K unless set)."""
        if self.target_network_update_freq is None:
            return int(self.circular_buffer_num_batches) * int(self.circular_buffer_iterations_per_batch)
        return int(self.target_network_update_freq)

    @override(APPOConfig)
    def validate(self) -> None:
        """The table's checks (before any actor starts), APPO's, then IMPACT's rules between settings."""
        if self.is_multi_agent and self.env_runner_cls is FiniteSingleAgentEnvRunner:
            # Several policies sample in RLlib's MultiAgentEnvRunner, with the same NaN/inf guard.
            self.env_runner_cls = FiniteMultiAgentEnvRunner
        super().validate()
        freq = self.target_network_update_freq
        if freq is not None and freq <= MAX_NON_LEARNING_TARGET_PERIOD and not self.force_target_network_update_freq:
            self._value_error(
                f"`target_network_update_freq` = {freq} learner updates between target syncs is in "
                f"the range 1-{MAX_NON_LEARNING_TARGET_PERIOD} where, in paper 004 §4.1.1 (Fig. 3b), "
                '"the agent does not learn". IMPACT_EXT counts it in learner updates (APPO counts '
                "multiples of N*K*M trained env steps, so an APPO value of 2 means something else "
                "here). Use None (n = N*K, the paper's benchmark) or a larger value, or set "
                "`force_target_network_update_freq=True` to run it anyway"
            )
        # A user module (`rl_module_spec`) needs the target network and value function the loss
        # uses: checked here, not when the learner thread first calls `forward_target`.
        check_user_module(self)
        check_optimizer(self)
        if self.use_kl_loss and (not is_number(self.kl_target) or self.kl_target <= 0):
            self._value_error(f"`kl_target` must be > 0 when `use_kl_loss=True`, got {self.kl_target!r}")
        if self.use_kl_loss and (not is_number(self.kl_coeff) or self.kl_coeff < 0):
            self._value_error(f"`kl_coeff` must be >= 0, got {self.kl_coeff!r}")
        if not self.use_circular_buffer:
            self._value_error("IMPACT_EXT always uses its circular buffer: `use_circular_buffer` must be True")
        if self.num_aggregator_actors_per_learner > 0:
            self._value_error("IMPACT_EXT does not use aggregator actors: set `num_aggregator_actors_per_learner=0`")
        if (error := clip_rewards_error(self.clip_rewards)) is not None:
            self._value_error(error)
        check_finite_settings(self)
        # RLlib's default networks (its catalog) decide which spaces work: Discrete, Box and
        # MultiDiscrete actions; vector or (some) image observations. Per module for several
        # policies (a MultiAgentEnv mapped by `policy_mapping_fn`).
        check_default_module_builds(self, module_spaces(self))

    @override(APPOConfig)
    def get_default_learner_class(self):
        """IMPACTTorchLearner (imported lazily)."""
        if self.framework_str != "torch":
            raise ValueError(f"IMPACT_EXT supports framework='torch' only, got {self.framework_str!r}")
        from rllib_ext.algorithms.impact.torch.impact_torch_learner import IMPACTTorchLearner

        return IMPACTTorchLearner

    @override(APPOConfig)
    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        """APPO's learner pipeline, plus the train batch's reward clipping when ``clip_rewards`` is set.

        RLlib 2.60's new API stack does not read ``clip_rewards``; IMPACT_EXT clips the rewards
        the loss sees (``reward_clipping.ClipRewards``), not those the env runners report.
        """
        pipeline = super().build_learner_connector(input_observation_space, input_action_space, device)
        add_reward_clipping(pipeline, self.clip_rewards)
        return pipeline

    @override(APPOConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        """RLlib's APPO module: actor-critic with a target copy of the policy (TargetNetworkAPI)."""
        from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import DefaultAPPOTorchRLModule

        return RLModuleSpec(module_class=DefaultAPPOTorchRLModule)


class IMPACT(FiniteParametersGuard, ThrottledEnvRunnerProbe, APPO):
    """IMPACT_EXT: IMPACT's Algorithm 1 on RLlib's env runners, learner and Tune.

    See the module docstring for the data flow; the loss is in
    :class:`~rllib_ext.algorithms.impact.torch.impact_torch_learner.IMPACTTorchLearner`.
    """

    @classmethod
    @override(APPO)
    def get_default_config(cls) -> IMPACTConfig:
        """The paper's Table 1 defaults."""
        return IMPACTConfig()

    @override(APPO)
    def setup(self, config: AlgorithmConfig):
        """RLlib's IMPALA setup (env runners, weights server, learner group)."""
        super().setup(config)
        # Whether the learner's buffer still allows draws (then sampling does not wait).
        self._impact_buffer_has_draws = False
        # Several learners: train batches not yet handed out (the remainder of an uneven split,
        # and those the learners' wait queues had no room for), oldest first.
        self._impact_pending: collections.deque[list[ray.ObjectRef]] = collections.deque()
        # The most batches any learner had waiting for a slot after the last call (an upper
        # bound until the next call: only the driver adds to a wait queue).
        self._impact_learner_waiting = 0
        # When the next loop must call `impact_update` even without new train batches.
        self._impact_update_due, self._impact_last_update = True, -math.inf
        # Env steps in each fragment (episode list) not yet handed to a learner (common.steps).
        self._impact_fragment_steps: dict[ray.ObjectRef, int] = {}

    @override(APPO)
    def step(self):
        """One ``train()`` iteration; the learner threads are held from its end to the next one
        (:meth:`hold_learners`, before the guard's finite-weights check reads the weights)."""
        # The iteration's first loop calls `impact_update`, which resumes the held threads.
        self._impact_update_due = True
        try:
            return super().step()
        except BaseException:
            if self.config.learner_thread:
                # No new draws; the running updates finish on their own (or fail with the error,
                # which is the one to report).
                with contextlib.suppress(Exception):
                    self._impact_foreach_learner(lambda learner: learner.stop_draws(), what="stop_draws")
            raise

    @override(FiniteParametersGuard)
    def hold_learners(self) -> None:
        """Holds the learner threads at an agreed draw until the next ``training_step``.

        Every learner stops drawing and reports the draws it started, then all draw on to the
        largest count and wait for their updates (with several learners an update is an
        all-reduce, so a learner held while another is inside the same update would block both
        forever; see ``IMPACTLearner.stop_draws``). Between iterations (the finite-weights
        check, evaluation, checkpoints, a race's stopped timer) the weights then stand still.
        """
        if self.config.learner_thread:
            target = max(self._impact_foreach_learner(lambda learner: learner.stop_draws(), what="stop_draws"))
            self._impact_foreach_learner(
                lambda learner, _t=target: learner.pause_thread(after_draws=_t), what=f"pause_thread({target})"
            )

    def _impact_foreach_learner(self, func, *, what: str) -> list[Any]:
        """``func(learner)`` on every learner at once (remote ones concurrently); their results.

        Raises:
            TimeoutError: A remote learner did not answer within :data:`LEARNER_WAIT_TIMEOUT_S`
                (``what`` names the call).
        """
        group = self.learner_group
        results = list(group.foreach_learner(func, timeout_seconds=None if group.is_local else LEARNER_WAIT_TIMEOUT_S))
        if not group.is_local and len(results) < len(group):
            answered = sorted(r.actor_id for r in results)
            raise TimeoutError(
                f"IMPACT_EXT: {len(group) - len(results)} of {len(group)} learners did not answer "
                f"`{what}` within {LEARNER_WAIT_TIMEOUT_S:.0f} s (answered: {answered}); a learner "
                "may be stuck in an update (with several learners: in an all-reduce whose peer failed)"
            )
        return [r.get() for r in results]

    @override(APPO)
    def training_step(self) -> None:
        """One pass of the driver's loop: collect worker batches, hand them to the Learner, ship weights.

        With the learner thread (default) the Learner call returns at once: draws, updates
        (Algorithm 1 lines 6-11) and weight snapshots (line 12) run in the learner's thread, and
        this loop only moves data; a loop without new train batches only takes the newest
        snapshot (``take_weights``, see :data:`LEARNER_RESULTS_PERIOD_S`). Without it, the call
        draws and updates before returning.
        """
        # Worker-i lines 1-6: asynchronous sampling; take whatever is ready.
        with self.metrics.log_time((TIMERS, SAMPLE_TIMER)):
            episode_refs, connector_states, env_runner_metrics = self._impact_sample()
            for ref, metrics in zip(episode_refs, env_runner_metrics, strict=True):
                self._impact_fragment_steps[ref] = steps_in_episodes(metrics)
            self.metrics.aggregate(env_runner_metrics, key=ENV_RUNNER_RESULTS)
            self.metrics.log_value((ENV_RUNNER_RESULTS, MEAN_NUM_EPISODE_LISTS_RECEIVED), len(episode_refs))

        # Group fragments into train batches of M env steps (IMPALA's packing), and split them
        # among the learners (each learner its own C(N, K)).
        packages = _compat.pre_queue_episode_refs(
            self, episode_refs, package_size=self.config.train_batch_size_per_learner
        )
        shares = self._impact_shares(packages)
        if episode_refs:  # the breakdown moves only with new fragments (most loops bring none)
            self._impact_log_steps(shares)
        if not shares[0] and not self.config.learner_thread and not self._impact_buffer_has_draws:
            return
        now = time.monotonic()
        if (
            self.config.learner_thread
            and not shares[0]
            and not self._impact_update_due
            and now - self._impact_last_update < LEARNER_RESULTS_PERIOD_S
        ):
            # No new train batch (most loops: they bring fragments of S env steps, a train batch
            # holds M): only the newest weights snapshot, without the learners' metrics reduction.
            states = self._impact_foreach_learner(lambda learner: learner.take_weights(), what="take_weights")
            rl_module_state = next((state for state in states if state is not None), None)
            if rl_module_state is not None:
                self._impact_broadcast(rl_module_state, connector_states)
            return
        self._impact_update_due, self._impact_last_update = False, now

        timesteps = {
            NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0
            ),
            NUM_ENV_STEPS_TRAINED_LIFETIME: self.metrics.peek(
                (LEARNER_RESULTS, ALL_MODULES, NUM_ENV_STEPS_TRAINED_LIFETIME), default=0
            ),
        }
        # No episode may have finished yet (several envs per runner on long episodes): RLlib
        # 2.60's `peek(..., default=None)` raises KeyError (None means "no default" there), so
        # peek with NaN and pass None ("no reward this update") to reward-driven optimizers.
        reward = self.metrics.peek((ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN), default=math.nan)
        if reward is None or not math.isfinite(reward):
            reward = None
        # Algorithm 1 lines 6-12 run in the Learner (where the buffer lives).
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            outs = self._impact_foreach_learner(
                lambda learner, _s=shares, _t=timesteps, _r=reward: learner.impact_update(
                    packages=_s[_compat.learner_index(learner)], timesteps=_t, reward=_r
                ),
                what="impact_update",
            )
        rl_module_state = None
        learner_results = []
        self._impact_learner_waiting = max(report.num_waiting for report in outs)
        for report in outs:  # IMPACTLearner.UpdateReport
            self._impact_buffer_has_draws = report.num_draws_left > 0
            if report.rl_module_state is not None:
                rl_module_state = report.rl_module_state
            if report.results:
                learner_results.append(report.results)
        if learner_results:
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)

        # Algorithm 1 line 12 / Worker-i line 7: broadcast the weights. The learner checked the
        # snapshot for NaN/inf when it took it (never the live weights here: with the learner
        # thread they may be in the middle of an optimizer step).
        if rl_module_state is not None:
            # The connector states of this loop's fragments, as RLlib's IMPALA merges them.
            self._impact_broadcast(rl_module_state, connector_states)

    def _impact_shares(self, packages: list[list[ray.ObjectRef]]) -> list[list[list[ray.ObjectRef]]]:
        """The new train batches, split among the learners: ``shares[i]`` goes to learner i.

        One learner takes them all (its wait queue drops the oldest when full). Several learners
        (torch DDP: every update is an all-reduce, so all must run the same number of updates)
        each get the same number per call, and never more than their wait queue has room for,
        so their buffers traverse identically and never drop: the remainder of an uneven split
        and the batches there is no room for wait here for the next call (logged as
        ``circular_buffer_num_held_back``); beyond ``circular_buffer_queue_size`` per learner
        the oldest are dropped here instead, counted in
        ``circular_buffer_num_dropped_by_driver_lifetime``.
        """
        num_learners = max(1, self.config.num_learners)
        if num_learners == 1:
            return [packages]
        pending = self._impact_pending
        pending.extend(packages)
        queue_size = self.config.circular_buffer_queue_size
        room = max(0, queue_size - self._impact_learner_waiting)
        per_learner = min(len(pending) // num_learners, room)
        shares = [[pending.popleft() for _ in range(per_learner)] for _ in range(num_learners)]
        dropped = max(0, len(pending) - num_learners * queue_size)
        for _ in range(dropped):
            steps = sum(self._impact_fragment_steps.pop(ref, 0) for ref in pending.popleft())
            self.metrics.log_value((ENV_RUNNER_RESULTS, DRIVER_DROPPED_STEPS_KEY), steps, reduce="lifetime_sum")
        self.metrics.log_value((LEARNER_RESULTS, ALL_MODULES, HELD_BACK_KEY), len(pending), window=1)
        self.metrics.log_value((LEARNER_RESULTS, ALL_MODULES, DRIVER_DROPPED_KEY), dropped, reduce="lifetime_sum")
        return shares

    def _impact_log_steps(self, shares: list[list[list[ray.ObjectRef]]]) -> None:
        """Where the sampled env steps went (common.steps): handed to a learner (used), dropped by
        the driver or a learner's full wait queue, or still being packed / held back (pending)."""
        steps = self._impact_fragment_steps
        for share in shares:
            for package in share:
                for ref in package:
                    steps.pop(ref, None)
        pending = sum(steps.get(ref, 0) for ref in self._episode_packs_being_built)
        pending += sum(steps.get(ref, 0) for package in self._impact_pending for ref in package)
        m = self.metrics
        wasted = m.peek((ENV_RUNNER_RESULTS, DRIVER_DROPPED_STEPS_KEY), default=0)
        wasted += m.peek((LEARNER_RESULTS, ALL_MODULES, LEARNER_DROPPED_STEPS_KEY), default=0)
        log_all_used(m, wasted=int(wasted), pending=int(pending))

    def _impact_sample(self):
        """Fetches ready worker results (relaunching sampling on them), or samples locally."""
        if self.env_runner_group.num_healthy_remote_workers() > 0:
            learner_busy = self._impact_buffer_has_draws and not self.config.learner_thread
            timeout = 0.0 if learner_busy else self.config.timeout_s_sampler_manager
            results = self.env_runner_group.foreach_env_runner_async_fetch_ready(
                func="sample_get_state_and_metrics",
                tag="impact_sample",
                timeout_seconds=timeout,
                return_obj_refs=False,
            )
            episode_refs, connector_states, metrics = [], [], []
            for episodes_ref, states, m in results:
                episode_refs.append(episodes_ref)
                connector_states.append(states)
                metrics.append(m)
            return episode_refs, connector_states, metrics
        # No remote workers (num_env_runners=0): the local runner samples synchronously.
        episodes = self.env_runner.sample()
        states = self.env_runner.get_state(
            components=[COMPONENT_ENV_TO_MODULE_CONNECTOR, COMPONENT_MODULE_TO_ENV_CONNECTOR]
        )
        return [ray.put(episodes)], [states], [self.env_runner.get_metrics()]

    def _impact_broadcast(self, rl_module_state: dict[str, Any], connector_states: list[dict]) -> None:
        """Ships learner weights (and merged connector states) to the workers."""
        self.metrics.log_value(NUM_SYNCH_WORKER_WEIGHTS, 1, reduce="sum")
        env_steps = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        kwargs = dict(
            config=self.config,
            connector_states=connector_states,
            rl_module_state=rl_module_state,
            env_steps_sampled=env_steps,
            env_to_module=self.env_to_module_connector,
            module_to_env=self.module_to_env_connector,
        )
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            if self._env_runner_state_server is not None:
                # Workers pull the newest state at their next sample() (Worker-i line 7).
                state = self.env_runner_group.get_merged_env_runner_state(**kwargs)
                self._env_runner_state_server.push.remote(state)
            else:
                self.env_runner_group.sync_env_runner_states(**kwargs)
