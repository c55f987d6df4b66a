"""IMPACT's Learner: the circular buffer, the draw/update loop, target syncs and the KL coefficient.

Framework-neutral part of Algorithm 1 (paper 004), lines 4 and 6-12:

* line 4: the circular buffer C(N, K) lives here (see ``circular_buffer.py`` for why here and
  not in a replay actor);
* line 6-7: :meth:`IMPACTLearner.impact_update` draws batches; on a batch's first draw (k = 0)
  the framework subclass evaluates it on the target network and stores that output in the
  batch (:meth:`IMPACTLearner._attach_target_outputs`);
* line 8-9: one gradient step per draw through RLlib's ``Learner.update``;
* line 10: the buffer discards a batch after its K-th draw;
* line 11: the target network is synced every n = ``target_update_interval`` learner updates,
  and the KL coefficient is adapted toward ``kl_target`` from the mean KL(πtarget‖πθ) measured
  since the previous sync (PPO's per-iteration rule, one "iteration" being one target period);
* line 12: every ``broadcast_interval`` updates the module weights are returned to the
  Algorithm, which ships them to the workers.

The draws and updates run in the learner's own thread (Figure 1c, ``learner_thread``):
:class:`~rllib_ext.algorithms.impact.learner_thread.LearnerThread` starts, pauses and stops it and
hands its errors to the driver; this class holds the locks around what the thread changes.

Several learners (``num_learners >= 2``, torch DDP: each backward pass all-reduces the gradients,
so every learner must run the same updates in the same order or one blocks forever): the driver
hands every learner the same number of train batches per call, and never more than its wait
queue takes (``impact.py``), so the buffers traverse identically; the learners pause at an agreed
draw count (:meth:`IMPACTLearner.stop_draws`, :meth:`IMPACTLearner.pause_thread`); a module
missing from one learner's drawn batch is left out of that update on every learner
(:meth:`IMPACTLearner._modules_on_every_learner`); the KL statistics behind η are summed over
the learners at each target sync, so η stays the same on all; only the first learner snapshots
weights for the workers.

Everything a checkpoint must carry beyond RLlib's components (KL coefficients, update and sync
counters) goes through :meth:`get_state` / :meth:`set_state`; the target network's weights are
part of the RLModule's state. The buffer's contents are transient (like APPO's) and are not
checkpointed.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import threading
from collections import defaultdict
from typing import Any

import ray
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.annotations import override
from ray.rllib.utils.lambda_defaultdict import LambdaDefaultDict
from ray.rllib.utils.metrics import ALL_MODULES, NUM_ENV_STEPS_SAMPLED_LIFETIME
from ray.rllib.utils.schedules.scheduler import Scheduler
from ray.rllib.utils.typing import ModuleID, StateDict

from rllib_ext import _compat
from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer
from rllib_ext.algorithms.impact.learner_thread import LearnerThread
from rllib_ext.algorithms.impact.losses import adapt_kl_coeff
from rllib_ext.common.waits import ACTOR_CALL_TIMEOUT_S

logger = logging.getLogger(__name__)

# Columns the learner adds to a batch at its first draw (k = 0), Algorithm 1 line 7.
TARGET_LOGP = "impact_target_logp"
TARGET_DIST_INPUTS = "impact_target_action_dist_inputs"

# Metric keys beyond RLlib's (per module unless under ALL_MODULES).
KL_KEY = "mean_kl_loss"
KL_COEFF_KEY = "curr_kl_coeff"
ENTROPY_COEFF_KEY = "curr_entropy_coeff"
NUM_TARGET_SYNCS_KEY = "num_target_syncs_lifetime"
NUM_LEARNER_UPDATES_KEY = "num_learner_updates_lifetime"
BUFFER_FILL_KEY = "circular_buffer_fill"
BUFFER_HELD_KEY = "circular_buffer_num_batches_held"
MEAN_DRAWS_KEY = "circular_buffer_mean_draws_per_batch"
DROPPED_KEY = "circular_buffer_num_dropped_lifetime"
BUFFER_WAITING_KEY = "circular_buffer_num_waiting"
NUM_BROADCASTS_KEY = "num_weight_broadcasts_lifetime"
#: Per module: drawn module batches left out of an update because another learner's draw had no
#: data for that module (several learners, multi-agent).
SKIPPED_MODULE_KEY = "num_module_batches_skipped_lifetime"
#: Draws not trained on at all because no module had data on every learner (several learners).
SKIPPED_DRAWS_KEY = "num_draws_skipped_lifetime"
#: Env steps of the batches a full wait queue dropped before their first draw (booked as wasted
#: by the driver, ``common.steps``).
LEARNER_DROPPED_STEPS_KEY = "circular_buffer_env_steps_dropped_lifetime"
STATE_KEY = "impact"
#: Bound on any one wait for the learners (a call, a learner thread's pause): past it the wait
#: fails with an error naming what it waited for: the package's one bound on a call to another actor
#: (``common.waits``), as long as torch's collective timeout (Ray Train's default, 30 min), after
#: which a learner stuck in an all-reduce fails on its own.
LEARNER_WAIT_TIMEOUT_S = ACTOR_CALL_TIMEOUT_S
# Key of the update count a weights copy was taken at (removed before it is published).
_SNAPSHOT_UPDATE = "_impact_snapshot_update"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class UpdateReport:
    """What :meth:`IMPACTLearner.impact_update` did since its previous call (learner → driver).

    Attributes:
        results: The learner's reduced metrics (RLlib's ``MetricsLogger.reduce()``), under the
            same keys as before (:data:`NUM_LEARNER_UPDATES_KEY`, :data:`BUFFER_FILL_KEY`, ...).
        num_updates: Learner updates since the previous call.
        num_draws_left: Draws the held and waiting batches still allow.
        num_waiting: Batches waiting for a slot at the end of the call: a bound until the next
            call (only these calls add to the wait queue), so the driver hands several learners
            no more than their wait queue takes.
        rl_module_state: The newest weights snapshot not yet returned, or None (with several
            learners only the first one snapshots).
    """

    results: dict[str, Any]
    num_updates: int
    num_draws_left: int
    num_waiting: int
    rl_module_state: dict[str, Any] | None = None


class IMPACTLearner(Learner):
    """Learner holding C(N, K) and running Algorithm 1 lines 6-12 (see module docstring).

    Framework subclasses implement :meth:`_attach_target_outputs` and the loss.
    """

    @override(Learner)
    def build(self) -> None:
        """Builds RLlib's learner, then the buffer, target networks and KL coefficients."""
        super().build()
        self._buffer = CircularBuffer(
            num_batches=self.config.circular_buffer_num_batches,
            iterations_per_batch=self.config.circular_buffer_iterations_per_batch,
            queue_size=self.config.circular_buffer_queue_size,
        )
        # The learner thread logs metrics while the caller of impact_update reduces them, and
        # trains while get_state/set_state (checkpoints, broadcasts) read or write the weights.
        _compat.set_metrics_lock(self.metrics, threading.RLock())
        self._update_lock = threading.RLock()
        self._weights_lock = threading.Lock()
        self._learner_thread = LearnerThread(
            self._buffer, self._update_on, name=f"IMPACT_EXT: learner {_compat.learner_index(self)}'s thread"
        )
        self._timesteps: dict[str, Any] = {}
        self._reward: float | None = None
        self._weights: dict[str, Any] | None = None  # the newest snapshot to broadcast
        self._broadcast_due = False
        self._updates_returned = 0
        # Algorithm 1 line 2: (θ', w') <- (θ, w).
        self.module.foreach_module(
            lambda mid, mod: mod.make_target_networks() if isinstance(mod, TargetNetworkAPI) else None
        )
        self.curr_kl_coeffs_per_module: dict[ModuleID, Any] = LambdaDefaultDict(
            lambda module_id: _compat.tensor_variable(
                self, float(self.config.get_config_for_module(module_id).kl_coeff)
            )
        )
        self.entropy_coeff_schedulers_per_module: dict[ModuleID, Scheduler] = LambdaDefaultDict(
            lambda module_id: Scheduler(
                fixed_value_or_schedule=self.config.get_config_for_module(module_id).entropy_coeff,
                framework=self.framework,
                device=self.device,
            )
        )
        self._num_updates = 0
        self._num_target_syncs = 0
        # Sum (a device tensor: no GPU->CPU sync per update) and count of the per-update mean KL
        # since the last target sync, per module; read once per target period.
        self._kl_sum: dict[ModuleID, Any] = defaultdict(float)
        self._kl_count: dict[ModuleID, int] = defaultdict(int)
        # Mean KL of the latest update per module, set by the loss (a tensor).
        self._last_kl: dict[ModuleID, Any] = {}

    # ------------------------------------------------------------------------------------
    # Algorithm 1, learner side.
    # ------------------------------------------------------------------------------------
    def impact_update(
        self,
        *,
        packages: list[list[ray.ObjectRef]],
        timesteps: dict[str, Any],
        max_updates: int | None = None,
        reward: float | None = None,
    ) -> UpdateReport:
        """Hands worker batches to C(N, K); returns what the learner did since the last call.

        With ``learner_thread`` (the default, Figure 1c) the draws and updates run in the
        learner's own thread, which this call starts on first use: the call only queues the
        batches and returns at once, so the driver goes on sampling while the learner trains.
        Without it, the call itself draws and updates until the cursor's slot is empty and no
        batch waits (or ``max_updates``), the learner inside ``training_step``.

        Args:
            packages: Train batches, each a list of references to the episode lists one
                worker ``sample()`` returned (IMPALA's packing to M env steps).
            timesteps: RLlib's timesteps dict (sampled/trained lifetime env steps); the
                updates after this call see it.
            max_updates: Without the learner thread, an optional cap on this call's updates.
            reward: The workers' latest mean episode return, reported before each step to
                optimizers that adapt their step to the reward (``report_reward``, e.g.
                rllib_ext.optim's DSGD, paper 000 §4.1); ignored by the others.

        Returns:
            The :class:`UpdateReport` of what the learner did since the previous call.

        Raises:
            Whatever stopped the learner thread (e.g. FloatingPointError for non-finite weights).
        """
        self._learner_thread.raise_error()
        for refs in packages:
            training_data = TrainingData(episodes_refs=refs)
            training_data.solve_refs()
            env_steps = sum(len(e) for e in training_data.episodes)  # before the connector's phantom steps
            batch = _compat.make_batch_if_necessary(self, training_data)
            batch.rllib_ext_env_steps = env_steps
            if self._buffer.put(batch):  # line 6 input; a full wait queue drops its oldest batch
                self.metrics.log_value((ALL_MODULES, DROPPED_KEY), 1, reduce="lifetime_sum")
                wasted = self._buffer.last_dropped.rllib_ext_env_steps  # env steps never trained on (common.steps)
                self.metrics.log_value((ALL_MODULES, LEARNER_DROPPED_STEPS_KEY), wasted, reduce="lifetime_sum")
        self._timesteps, self._reward = dict(timesteps), reward

        if self.config.learner_thread:
            self._learner_thread.resume()
        else:
            self._learner_thread.run_in_caller(max_steps=max_updates)  # line 6 and the updates
            if self._broadcast_due:
                self._snapshot_weights()

        # Lifetime counters appear in the results from the first call on.
        for key in (NUM_TARGET_SYNCS_KEY, NUM_LEARNER_UPDATES_KEY, DROPPED_KEY, LEARNER_DROPPED_STEPS_KEY):
            self.metrics.log_value((ALL_MODULES, key), 0, reduce="lifetime_sum")
        draws = self._buffer.pop_evicted_draw_counts()
        if draws:
            self.metrics.log_value((ALL_MODULES, MEAN_DRAWS_KEY), sum(draws) / len(draws), window=1)
        self.metrics.log_value((ALL_MODULES, BUFFER_FILL_KEY), self._buffer.fill, window=1)
        self.metrics.log_value((ALL_MODULES, BUFFER_HELD_KEY), len(self._buffer), window=1)
        self.metrics.log_value((ALL_MODULES, BUFFER_WAITING_KEY), self._buffer.num_waiting, window=1)

        # Only these calls add to the wait queue: until the next one this bounds it from above.
        num_waiting = self._buffer.num_waiting
        updates = self._num_updates
        new_updates, self._updates_returned = updates - self._updates_returned, updates
        rl_module_state = self.take_weights()
        return UpdateReport(
            results=self.metrics.reduce(),
            num_updates=new_updates,
            num_draws_left=self._buffer.num_draws_left,
            num_waiting=num_waiting,
            rl_module_state=rl_module_state,
        )

    def take_weights(self) -> dict[str, Any] | None:
        """The newest weights snapshot not yet returned (or None), without reducing metrics.

        The driver calls this in the loops that bring no new train batch (most of them: a loop
        collects fragments of S env steps, a train batch holds M), instead of
        :meth:`impact_update`, whose metrics reduction costs ~1 ms in the learner's process.
        Snapshots are checked finite before they are published (:meth:`_snapshot_weights`).

        Raises:
            Whatever stopped the learner thread (e.g. FloatingPointError for non-finite weights).
        """
        self._learner_thread.raise_error()
        with self._weights_lock:
            rl_module_state, self._weights = self._weights, None
        if rl_module_state is not None:
            self.metrics.log_value((ALL_MODULES, NUM_BROADCASTS_KEY), 1, reduce="lifetime_sum")
        return rl_module_state

    def _update_on(self, batch, k: int) -> None:
        """Algorithm 1 lines 7-12 for one drawn batch (``k``: its earlier draws); the learner
        thread's step (or the caller's, without it), which releases the draw afterwards."""
        snapshot = None
        with self._update_lock:
            if k == 0:
                self._attach_target_outputs(batch)  # line 7
            if self.distributed:
                batch = self._modules_on_every_learner(batch)
                if batch is None:
                    return
            if self._reward is not None:
                for optimizer in self._named_optimizers.values():
                    if hasattr(optimizer, "report_reward"):
                        optimizer.report_reward(self._reward)
            # Lines 8-9 (the loss is the framework subclass'); line 10 in the buffer, line 11
            # in `after_gradient_based_update`.
            _compat.update_without_metrics_reduce(self, batch, timesteps=self._timesteps)
            # Line 12: a broadcast every t_frequency updates.
            if self._num_updates % self.config.broadcast_interval == 0 and _compat.learner_index(self) == 0:
                # With several learners the weights are equal after each update (DDP); the
                # first learner's snapshot serves all (as RLlib's IMPALA/APPO learners do).
                self._broadcast_due = True
            # The thread snapshots only when the driver has taken the previous snapshot: the
            # driver ships at most one per loop, so more would be copied and put for nothing
            # (on the learner's hot path). A due broadcast waits for the next update after that.
            if self.config.learner_thread and self._broadcast_due and self._weights is None:
                snapshot = self._copy_weights()
        if snapshot is not None:
            self._publish_weights(snapshot)  # the finite check, outside the update lock

    def _modules_on_every_learner(self, batch):
        """The drawn batch with the modules every learner's drawn batch has, in the module order
        (or None when there are none).

        With DDP a module's backward pass is an all-reduce among the learners, so the learners
        must train the same modules in the same order:

        * The learners' draws are the same batches by position, not by content: in a
          multi-agent env one learner's batch can lack a module (no agent mapped to it acted in
          those env steps). One all-reduce over the trainable modules' presence per update
          decides; what is left out is counted (:data:`SKIPPED_MODULE_KEY`,
          :data:`SKIPPED_DRAWS_KEY`).
        * RLlib runs the forward passes and losses in the batch's module order, which follows
          the order the agents appear in the drawn episodes. Two learners with different orders
          issue their modules' all-reduces in different orders, and DDP then averages one
          module's gradients with another module's of the same shape (silently: measured with
          two CartPole policies, the learners' weights drifted apart). The batch is rebuilt in
          the MultiRLModule's order, which every learner has from the driver's spec.
        """
        if not self.config.is_multi_agent:
            return batch  # one module, in every batch (decided by the config: the same on all learners)
        module_ids = [mid for mid in self.module.keys() if self.should_module_be_updated(mid)]
        present = self._all_reduce([float(mid in batch.policy_batches) for mid in module_ids], op="min")
        keep = [mid for mid, p in zip(module_ids, present, strict=True) if p > 0]
        for mid in module_ids:
            if mid in batch.policy_batches and mid not in keep:
                self.metrics.log_value((mid, SKIPPED_MODULE_KEY), 1, reduce="lifetime_sum")
        if not keep:
            self.metrics.log_value((ALL_MODULES, SKIPPED_DRAWS_KEY), 1, reduce="lifetime_sum")
            return None
        # A new batch: the stored one keeps every module for its later draws.
        return MultiAgentBatch({mid: batch.policy_batches[mid] for mid in keep}, batch.env_steps())

    def _snapshot_weights(self) -> None:
        """Copies the weights to broadcast and publishes them for the Algorithm to take.

        Non-finite weights are never published: FloatingPointError (from the thread, handed to
        the driver by its next call). See :meth:`_copy_weights` and :meth:`_publish_weights`.
        """
        self._publish_weights(self._copy_weights())

    def _copy_weights(self) -> dict[str, Any]:
        """The module weights to broadcast, copied into the object store (``ray.put``).

        Taken and copied between updates, under the update lock: the state's arrays share
        memory with the live parameters, which the next update changes in place (with the
        learner thread, while the driver is elsewhere).
        """
        with self._update_lock:
            state = self.get_state(
                components=[
                    COMPONENT_RL_MODULE + "/" + mid for mid in self.module.keys() if self.should_module_be_updated(mid)
                ],
                inference_only=True,
            )
            state[COMPONENT_RL_MODULE] = ray.put(state[COMPONENT_RL_MODULE])
            self._broadcast_due = False
            state[_SNAPSHOT_UPDATE] = self._num_updates
            return state

    def _publish_weights(self, state: dict[str, Any]) -> None:
        """Checks the weights a copy was taken from for NaN/inf, then publishes the copy.

        The check (:meth:`_nonfinite_weights`: one fused reduction over the parameters on
        their device, one sync) runs outside the update lock, so the driver's checkpoints and
        the next update's lock wait only for the copy. It reads the live parameters, which
        equal the copy: only the caller (the learner thread, or ``impact_update`` without it)
        updates them, and it does so after this returns; a ``set_state`` in between (a
        restore) waits for the thread's pause between iterations.

        Raises:
            FloatingPointError: Some weights are NaN or ±inf (nothing is published).
        """
        update = state.pop(_SNAPSHOT_UPDATE)
        bad = self._nonfinite_weights([mid for mid in self.module.keys() if self.should_module_be_updated(mid)])
        if bad:
            raise FloatingPointError(
                f"IMPACT_EXT: non-finite (NaN/inf) weights after update {update} — "
                f"{', '.join(bad)}. They are not broadcast to the env runners; lower the learning "
                "rate (or clip gradients), check the env's observations and rewards, and restore "
                "the last checkpoint."
            )
        with self._weights_lock:
            self._weights = state

    @abc.abstractmethod
    def _nonfinite_weights(self, module_ids: list[ModuleID]) -> list[str]:
        """Names ("module/parameter") of the modules' parameters holding a NaN or ±inf ([] if none)."""

    # ------------------------------------------------------------------------------------
    # The learner thread (Figure 1c: the learner never waits for workers, workers never wait
    # for the learner).
    # ------------------------------------------------------------------------------------
    def stop_draws(self) -> int:
        """Lets the learner thread start no new draw (without waiting for the running update).

        First half of the pause at the end of each ``train()``: the Algorithm asks every learner
        for its draws started, then :meth:`pause_thread` with the largest of them. Waiting here
        for the running update could deadlock several learners: one learner held between
        updates while another waits inside its update for the first one's all-reduce.

        Returns:
            The draws started so far, the running one included.
        """
        return self._learner_thread.stop_draws()

    def pause_thread(self, after_draws: int | None = None) -> None:
        """Lets the learner thread draw on up to ``after_draws`` draws, waits for its updates,
        then holds it until the next :meth:`impact_update`.

        The Algorithm calls this at the end of each ``train()`` (after :meth:`stop_draws`, with
        the largest count of any learner): between iterations (evaluation, checkpoints, a race's
        timer stopped) the weights stand still, and several learners stop after the same update.

        Args:
            after_draws: The draws (lifetime, :meth:`stop_draws`' count) to finish before
                holding; None: hold after the running update.

        Raises:
            Whatever stopped the learner thread, if it stops before reaching ``after_draws``.
            TimeoutError: The thread neither paused nor stopped within
                ``LEARNER_WAIT_TIMEOUT_S`` (an update that never ends, e.g. an all-reduce
                whose peer learner failed).
        """
        self._learner_thread.pause(
            after_draws,
            timeout_s=LEARNER_WAIT_TIMEOUT_S,
            hint=": with several learners, an all-reduce whose peer learner failed",
        )

    @property
    def learner_thread_alive(self) -> bool:
        """Whether the learner thread runs."""
        return self._learner_thread.alive

    @override(Learner)
    def shutdown(self) -> None:
        """Stops and joins the learner thread."""
        self._learner_thread.stop()  # bounded: learner_thread.STOP_TIMEOUT_S
        super().shutdown()

    @property
    def buffer(self) -> CircularBuffer:
        """The circular buffer C(N, K)."""
        return self._buffer

    @property
    def num_updates(self) -> int:
        """Learner updates so far (t of Algorithm 1)."""
        return self._num_updates

    @property
    def num_target_syncs(self) -> int:
        """Target-network syncs so far."""
        return self._num_target_syncs

    @abc.abstractmethod
    def _attach_target_outputs(self, batch) -> None:
        """Evaluates ``batch`` (a MultiAgentBatch) on the target network and stores the result.

        Adds the columns :data:`TARGET_DIST_INPUTS` and :data:`TARGET_LOGP` to each module's
        batch (Algorithm 1 line 7); later draws of the batch reuse them.
        """

    def sync_target_networks(self) -> None:
        """(θ', w') <- (θ, w) for every module (Algorithm 1 line 11; τ = 1 copies)."""
        for module_id, module in self.module.items():
            module = module.unwrapped()
            if not isinstance(module, TargetNetworkAPI):
                continue
            tau = self.config.get_config_for_module(module_id).tau
            for main_net, target_net in module.get_target_network_pairs():
                update_target_network(main_net=main_net, target_net=target_net, tau=tau)
        self._num_target_syncs += 1
        self.metrics.log_value((ALL_MODULES, NUM_TARGET_SYNCS_KEY), 1, reduce="lifetime_sum")

    def _adapt_kl_coeffs(self) -> None:
        """η <- adapt(η, mean KL since the last target sync) per module (see ``adapt_kl_coeff``).

        With several learners the KL sums and counts are summed over the learners first (one
        all-reduce; every learner syncs at the same update), so η stays the same on all.
        """
        if self.distributed:
            self._sum_kl_over_learners()
        for module_id in list(self._kl_count):
            config = self.config.get_config_for_module(module_id)
            if not config.use_kl_loss or self._kl_count[module_id] == 0:
                continue
            mean_kl = float(self._kl_sum[module_id]) / self._kl_count[module_id]
            var = self.curr_kl_coeffs_per_module[module_id]
            new = adapt_kl_coeff(float(var.item()), mean_kl, config.kl_target)
            self._set_kl_coeff(module_id, new)
            self.metrics.log_value((module_id, KL_COEFF_KEY), new, window=1)
        self._kl_sum.clear()
        self._kl_count.clear()

    def _sum_kl_over_learners(self) -> None:
        module_ids = sorted(self.module.keys())
        local = [float(self._kl_sum.get(mid, 0.0)) for mid in module_ids] + [
            float(self._kl_count.get(mid, 0)) for mid in module_ids
        ]
        total = self._all_reduce(local, op="sum")
        n = len(module_ids)
        for mid, kl_sum, count in zip(module_ids, total[:n], total[n:], strict=True):
            if count > 0:
                self._kl_sum[mid], self._kl_count[mid] = kl_sum, int(round(count))

    @abc.abstractmethod
    def _all_reduce(self, values: list[float], op: str) -> list[float]:
        """``values`` reduced element-wise over the learners (``op``: "sum" or "min").

        A collective: with several learners every learner must call it at the same point of its
        update sequence.
        """

    @abc.abstractmethod
    def _set_kl_coeff(self, module_id: ModuleID, value: float) -> None:
        """Writes ``value`` into the module's KL coefficient variable."""

    # ------------------------------------------------------------------------------------
    # RLlib hooks.
    # ------------------------------------------------------------------------------------
    @override(Learner)
    def before_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Advances the entropy-coefficient schedules (as IMPALA's learner does)."""
        super().before_gradient_based_update(timesteps=timesteps)
        for module_id in self.module.keys():
            value = self.entropy_coeff_schedulers_per_module[module_id].update(
                timestep=timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0)
            )
            self.metrics.log_value((module_id, ENTROPY_COEFF_KEY), value, window=1)

    @override(Learner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Counts the update; every n updates syncs the target network and adapts η (line 11)."""
        super().after_gradient_based_update(timesteps=timesteps)
        self._num_updates += 1
        self.metrics.log_value((ALL_MODULES, NUM_LEARNER_UPDATES_KEY), 1, reduce="lifetime_sum")
        for module_id, kl in self._last_kl.items():
            self._kl_sum[module_id] = self._kl_sum[module_id] + kl  # stays on the device
            self._kl_count[module_id] += 1
        self._last_kl.clear()
        if self._num_updates % self.config.target_update_interval == 0:
            self._adapt_kl_coeffs()
            self.sync_target_networks()

    @override(Learner)
    def add_module(self, *, module_id: ModuleID, module_spec: RLModuleSpec, **kwargs):
        """Adds a module and builds its target networks."""
        spec = super().add_module(module_id=module_id, module_spec=module_spec, **kwargs)
        if isinstance(self.module[module_id].unwrapped(), TargetNetworkAPI):
            self.module[module_id].unwrapped().make_target_networks()
        return spec

    @override(Learner)
    def remove_module(self, module_id: ModuleID, **kwargs):
        """Removes a module and its coefficients."""
        spec = super().remove_module(module_id, **kwargs)
        self.curr_kl_coeffs_per_module.pop(module_id, None)
        self.entropy_coeff_schedulers_per_module.pop(module_id, None)
        return spec

    @classmethod
    @override(Learner)
    def rl_module_required_apis(cls) -> list:
        """IMPACT needs a value function and a target network."""
        return [TargetNetworkAPI, ValueFunctionAPI]

    @override(Learner)
    def get_state(self, components=None, *, not_components=None, **kwargs) -> StateDict:
        """RLlib's learner state plus KL coefficients and update/sync counters (between updates)."""
        with self._update_lock:
            return self._get_state(components, not_components=not_components, **kwargs)

    def _get_state(self, components, *, not_components, **kwargs) -> StateDict:
        state = super().get_state(components, not_components=not_components, **kwargs)
        if _compat.wants_component(self, STATE_KEY, components, not_components):
            state[STATE_KEY] = {
                "kl_coeffs": {mid: float(v.item()) for mid, v in self.curr_kl_coeffs_per_module.items()},
                "num_updates": self._num_updates,
                "num_target_syncs": self._num_target_syncs,
            }
        return state

    @override(Learner)
    def set_state(self, state: StateDict) -> None:
        """Restores RLlib's learner state, KL coefficients and counters (between updates)."""
        with self._update_lock:
            self._set_state(state)

    def _set_state(self, state: StateDict) -> None:
        super().set_state(state)
        impact = state.get(STATE_KEY)
        if impact:
            for mid, value in impact.get("kl_coeffs", {}).items():
                self._set_kl_coeff(mid, value)
            self._num_updates = int(impact.get("num_updates", self._num_updates))
            self._num_target_syncs = int(impact.get("num_target_syncs", self._num_target_syncs))
            self._updates_returned = self._num_updates
