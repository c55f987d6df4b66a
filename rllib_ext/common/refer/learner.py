"""The Learner part of Algorithm 1 (paper 003, App. C) shared by VRACER_EXT, DDPG_EXT, NAF_EXT.

The Learner owns the replay memory (RM, :class:`~rllib_ext.common.refer.memory.ReplayMemory`) and
the ReF-ER state (:class:`~rllib_ext.common.refer.rules.ReFER`: β, t). :meth:`ReFERLearner.train_on_episodes`
receives the env runners' episode chunks and runs Algorithm 1 from "store" to "update β":

* completed episodes enter the RM (algorithm hook :meth:`_score_episode` adds V and ρ at
  storage time where the algorithm needs them);
* once the RM holds N_start steps: the state statistics are fixed (App. B, Eq. 14-15, once)
  and training starts; t counts env steps from then on (Algorithm 1's warm-up loop does not
  advance t);
* one gradient step per F env steps; each: refresh σ_r every ``reward_scale_interval`` steps
  (Eq. 16), anneal c_max and η to t = F·k (Eq. 13; η only with ReF-ER) and PER's β to k,
  sample B steps, update (hook :meth:`_update_on_sample`: the algorithm's loss applies
  Rules 1-2), write ρ/V/targets back (hook :meth:`_write_back`), update β from n_far/N
  (Eq. 12; step ``refer_beta_rate``).

Metrics: the per-step ones (the minibatch statistics of the algorithm's loss, the loss,
RLlib's trained-step counters) are accumulated over the gradient steps of one
:meth:`train_on_episodes` call and logged once at its end: the minibatch statistics and
``total_loss`` as their mean over the call's steps, the counters as their sums,
``far_policy_fraction`` (n_far/N of the whole memory) as its value after the last step.

Checkpoints: β, t, the gradient-step count k, whether the state statistics were fixed and the
reward scale go through :meth:`get_state` (key ``"refer"``); the state statistics are module
buffers (part of the RLModule's state). The RM's contents (2^18 steps of states, actions and
statistics) are checkpointed only with ``checkpoint_replay``; without, a restored algorithm
refills N_start steps before its next gradient step, then continues with the restored β and
annealing step.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from ray.rllib.core.learner.learner import Learner
from ray.rllib.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import ALL_MODULES
from ray.rllib.utils.typing import ModuleID

from rllib_ext._compat import update_without_metrics_reduce
from rllib_ext.common.offpolicy.learner import ReplayLearner
from rllib_ext.common.refer.config import _refer_eta
from rllib_ext.common.refer.episodes import EpisodeAssembler
from rllib_ext.common.refer.memory import ReplayMemory, per_beta_schedule
from rllib_ext.common.refer.rules import ReFER

STATE_KEY = "refer"

BETA_KEY = "refer_beta"
C_MAX_KEY = "refer_c_max"
LR_KEY = "refer_lr"
FAR_FRACTION_KEY = "far_policy_fraction"
REPLAY_SIZE_KEY = "replay_size"
REWARD_SCALE_KEY = "reward_scale"
NUM_GRAD_STEPS_KEY = "num_gradient_steps_lifetime"
MEAN_KL_KEY = "mean_kl"
ZEROED_KEY = "zeroed_grad_fraction"
BATCH_FAR_KEY = "batch_far_policy_fraction"
MEAN_RHO_KEY = "mean_rho"
DROPPED_EPISODES_KEY = "episodes_dropped_unfinished_lifetime"
PER_BETA_KEY = "per_beta"


class ReFERLearner(ReplayLearner):
    """Owns the RM and the ReF-ER state; runs Algorithm 1's store/update loop (module docstring).

    Subclasses implement the loss (``compute_loss_for_module``), which reads
    :attr:`refer` (β, c_max, the active rules) and leaves per-sample outputs in
    :attr:`_stash` for :meth:`_write_back`.
    """

    STATE_KEY = STATE_KEY
    REPLAY_STATE_KEY = "memory"
    #: A :class:`~rllib_ext.common.refer.config.ReFERConfig`, whose settings the settings layer sets
    #: (not declared attributes that mypy could see).
    config: Any

    @override(Learner)
    def build(self) -> None:
        """RLlib's build, then the RM, the chunk assembler and the ReF-ER state."""
        super().build()
        c = self.config
        self.memory = ReplayMemory(
            capacity=c.replay_capacity,
            gamma=c.gamma,
            mode=c.replay_mode,
            per_alpha=c.per_alpha,
            per_beta=c.per_beta,
            seed=c.seed,
            retrace_tolerance=c.retrace_tolerance,
            compiled_targets=c.compile_update,
        )
        self.assembler = EpisodeAssembler()
        self.refer = ReFER(
            mode=c.replay_mode, C=c.refer_C, A=c.refer_A, D=c.refer_D, eta=_refer_eta(c), beta_rate=c.refer_beta_rate
        )
        self._k = 0  # gradient steps (Algorithm 1's k)
        self._env_steps = 0  # env steps since training started
        self._state_stats_set = False
        self._stash: dict[str, Any] = {}
        # Per-step metrics of the current train_on_episodes call: key -> [sum, count] (see the module docstring).
        self._step_sums: dict[tuple[ModuleID, tuple[str, ...]], list[Any]] = {}
        self._far_fraction: float | None = None

    # ------------------------------------------------------------------ Algorithm 1
    @property
    def replay(self) -> ReplayMemory:
        """The RM (the replay of :class:`~rllib_ext.common.offpolicy.learner.ReplayLearner`)."""
        return self.memory

    @override(ReplayLearner)
    def _store(self, episodes: list[Any]) -> int:
        """Stores completed episodes; once the RM holds N_start steps, one gradient step is due per F env steps."""
        new_steps = sum(len(e) for e in episodes)
        for ep in self.assembler.add(episodes):  # Algorithm 2: store whole episodes
            episode: dict[str, Any] = ep
            self.memory.add_episode(**episode, **self._score_episode(episode))
        if len(self.memory) < self.config.n_start:
            return 0
        if not self._state_stats_set:  # App. B: statistics after N_start observations
            self._set_state_stats(*self.memory.state_stats())
            self._state_stats_set = True
            self._weights_changed = True
        self._env_steps += new_steps
        return max(0, int(self._env_steps / self.config.steps_per_update) - self._k)  # t < F·k

    @override(ReplayLearner)
    def _take_updates(self, num_updates: int) -> None:
        """``num_updates`` passes of Algorithm 1's inner loop."""
        for _ in range(num_updates):
            self._gradient_step()

    @override(ReplayLearner)
    def _log_replay_metrics(self) -> None:
        """The per-step means of the call, n_far/N, and the ReF-ER, RM and assembler state."""
        self._log_step_metrics()
        m = self.metrics
        m.log_value((ALL_MODULES, REPLAY_SIZE_KEY), len(self.memory), window=1)
        m.log_value((ALL_MODULES, BETA_KEY), self.refer.beta, window=1)
        m.log_value((ALL_MODULES, C_MAX_KEY), self.refer.c_max, window=1)
        m.log_value((ALL_MODULES, LR_KEY), self.refer.lr, window=1)
        m.log_value((ALL_MODULES, NUM_GRAD_STEPS_KEY), self._k, window=1)
        m.log_value((ALL_MODULES, REWARD_SCALE_KEY), self.memory.reward_scale, window=1)
        m.log_value((ALL_MODULES, DROPPED_EPISODES_KEY), self.assembler.num_dropped_episodes, window=1)
        if self.config.replay_mode == "per":
            m.log_value((ALL_MODULES, PER_BETA_KEY), self.memory.per_beta, window=1)

    def _gradient_step(self) -> None:
        """One pass of Algorithm 1's inner loop: sample B, update, write back, update β."""
        c = self.config
        if self._k % c.reward_scale_interval == 0:
            self.memory.update_reward_scale()  # App. B, Eq. (16)
        self.refer.t = int(c.steps_per_update * self._k)  # t = F·k for Eq. (13)
        self._set_learning_rate_factor(self.refer.lr / self.refer.eta)  # η(t), Eq. (13)
        if c.replay_mode == "per":  # PER's β → 1 (Schaul et al. 2016 §3.4)
            self.memory.per_beta = per_beta_schedule(c.per_beta, self._k, c.per_beta_anneal_steps)
        sample = self.memory.sample(c.train_batch_size_per_learner)
        self._stash = {}
        self._update_on_sample(sample)
        self._write_back(sample)
        far_fraction = self.memory.far_fraction(self.refer.c_max)  # n_far / N
        self.refer.update_beta(far_fraction)  # Eq. (12)
        self._far_fraction = far_fraction
        self._k += 1

    def _update_on_sample(self, sample: dict[str, np.ndarray]) -> None:
        """One gradient step of the algorithm's loss on the minibatch ``sample``.

        This default goes through RLlib's ``Learner.update`` (batch conversion, the module's
        ``forward_train``, ``compute_loss_for_module``, ``compute_gradients``,
        ``postprocess_gradients``, ``apply_gradients``, ``after_gradient_based_update``);
        :class:`~rllib_ext.common.refer.torch_learner.ReFERTorchLearner` takes the same steps
        without the generic batch handling.
        """
        update_without_metrics_reduce(self, self._to_batch(sample))

    @staticmethod
    def _to_batch(sample: dict[str, np.ndarray]) -> MultiAgentBatch:
        cols = {k: v for k, v in sample.items() if k != "idx"}
        return MultiAgentBatch({DEFAULT_POLICY_ID: SampleBatch(cols)}, env_steps=len(sample["idx"]))

    # ------------------------------------------------------------------ metrics
    def _accumulate_metric_vector(self, module_id: ModuleID, names: tuple[str, ...], values: Any) -> None:
        """Adds one gradient step's metric vector (``values[i]`` is ``names[i]``) to the call's sums.

        ``values`` is a tensor or an array; the sums stay one (so no per-step read into Python:
        issue 42) until :meth:`_log_step_metrics` logs their means.
        """
        entry = self._step_sums.get((module_id, names))
        if entry is None:
            self._step_sums[(module_id, names)] = [values, 1]
        else:
            entry[0] = entry[0] + values
            entry[1] += 1

    def _log_step_metrics(self) -> None:
        """Logs the accumulated per-step metrics (means over the steps since the last call) and n_far/N."""
        for (module_id, names), (total, count) in self._step_sums.items():
            for name, value in zip(names, total.tolist(), strict=True):
                self.metrics.log_value((module_id, name), value / count, window=1)
        self._step_sums = {}
        if self._far_fraction is not None:
            self.metrics.log_value((ALL_MODULES, FAR_FRACTION_KEY), self._far_fraction, window=1)

    @property
    def num_gradient_steps(self) -> int:
        """k, the gradient steps taken so far."""
        return self._k

    # ------------------------------------------------------------------ algorithm hooks
    def _score_episode(self, episode: dict[str, np.ndarray]) -> dict[str, Any]:
        """Extra :meth:`ReplayMemory.add_episode` arguments computed at storage time.

        Default: none (ρ = 1, V = 0). V-RACER returns ``values``, ``rho`` and ``v_boot``.
        """
        return {}

    def _write_back(self, sample: dict[str, np.ndarray]) -> None:
        """Writes the minibatch's new ρ and TD errors (:attr:`_stash` ``rho``, ``td``) into the RM.

        The default serves the Q-learners (DDPG, NAF: no stored value targets); V-RACER
        overrides it to also store V and run Eq. (8).
        """
        self.memory.write_back(sample["idx"], rho=self._stash["rho"], td_error=self._stash["td"], update_targets=False)

    @abc.abstractmethod
    def _set_state_stats(self, mean: np.ndarray, std: np.ndarray) -> None:
        """Sets μ_s, σ_s (App. B) in the module(s)."""

    @abc.abstractmethod
    def _set_learning_rate_factor(self, factor: float) -> None:
        """Sets every optimizer's learning rate to its initial value times ``factor``."""

    # ------------------------------------------------------------------ checkpoints
    @override(ReplayLearner)
    def _counter_state(self) -> dict[str, Any]:
        """β, t (the ReF-ER state), k, env steps, whether the state statistics are fixed, the reward scale."""
        return {
            **self.refer.get_state(),
            "k": self._k,
            "env_steps": self._env_steps,
            "state_stats_set": self._state_stats_set,
            "reward_scale": self.memory.reward_scale,
        }

    @override(ReplayLearner)
    def _set_counter_state(self, state: dict[str, Any]) -> None:
        self.refer.set_state(state)
        self._k = int(state["k"])
        self._env_steps = int(state["env_steps"])
        self._state_stats_set = bool(state["state_stats_set"])
        self.memory.reward_scale = float(state["reward_scale"])  # the RM's own state, when restored, has it too
