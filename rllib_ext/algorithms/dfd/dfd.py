"""DFD_EXT: asynchronous delayed finite differences (paper 000, Algorithms 1 and 2).

Paper: ``../shared/papers/000_918eb0e7bb8ca864.txt`` ("A Scalable Finite Difference Method for
Deep Reinforcement Learning"). Names follow the paper:

- u: update index; θ_u: parameters; σ (``noise_stdev``); N (``episodes_per_batch``).
- A return is (R(α), seed of ε, T, u) with α = θ_u + σε (Algorithm 2).
- n_i = u − u_i: delay of return i; ``u_max`` (U_max): returns with n_i > U_max are dropped.
- λ_i = σε_i + θ_{u−n_i} − θ_u (Eq. 16–17); g_DFD = (1/N) Σ [R(α_i) − R(θ_u)] λ_i / ‖λ_i‖² (Eq. 18)
  on batch-standardized rewards (Algorithm 1), R(θ_u) ≈ mean of the current-policy returns (Eq. 23).
- ``delayed_returns=False`` is the FD ablation (Eq. 10): delayed returns are dropped.

Runners never wait (Algorithm 2): the async pool keeps ``jobs_in_flight_per_env_runner`` calls on
every runner, each evaluating perturbations of the newest θ published when the call was sent; a
runner switches to a newer θ only between calls, i.e. at an episode boundary (no episode is cut
short). The learner (Algorithm 1) accepts every return until it has at least N, updates with
exactly N and carries the extra returns over to the next update (App. A.2).

Optimizers by name (``rllib_ext.optim``): ``adam`` (default), ``sgd`` (Eq. 2), ``msgd`` (Eq. 19),
``dsgd`` (Eq. 20–22; it is fed R̄, the running mean of the unperturbed evaluations, as ES_EXT is:
:meth:`~rllib_ext.common.blackbox.BlackBoxAlgorithm.observe_evaluations`).
"""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.dfd.estimator import ParameterHistory, ReturnBuffer, dfd_gradient
from rllib_ext.common.blackbox import BLACKBOX, BlackBoxAlgorithm, BlackBoxConfig
from rllib_ext.settings import Setting, changed

# Perturbation ids per update: (batch seed of u, JOB_ROWS, running index).
JOB_ROWS = 1 << 20


class DFDConfig(BlackBoxConfig):
    """Config of DFD_EXT; other settings on :class:`BlackBoxConfig`.

    σ, N, η0, U_max, the network and the observation filter default to paper 000 Table 3's values;
    the optimizer (Adam, not DSGD) and the policy head (deterministic, not the 2A Gaussian) do not:
    ``configs/dfd.yaml`` sets Table 3's and says why each differs.

    Rewards are standardized per batch by Algorithm 1 itself, so ``return_shaping`` is fixed to
    ``standardize``; the sampler defaults to i.i.d. Gaussian ε (Algorithm 2).
    """

    SETTINGS = {
        "u_max": Setting(
            3, float, gt=0, symbol="U_max", source="3 (Table 3)", doc="largest delay n_i whose return is still used"
        ),
        "delayed_returns": Setting(True, bool, doc="True: DFD (Eq. 18); False: FD ablation (Eq. 10)"),
        "sampler": changed(default="gaussian", doc="i.i.d. Gaussian ε (Algorithm 2)"),
        "return_shaping": changed(default="standardize", doc="fixed: Algorithm 1 standardizes per batch"),
        "perturbations_per_call": changed(default=1, doc="perturbations per remote call"),
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or DFD)

    @override(BlackBoxConfig)
    def validate(self) -> None:
        super().validate()
        if self.sampler not in ("gaussian", "antithetic", "gcmc"):
            # DFD draws an open-ended stream of perturbations per update; these samplers
            # regenerate any row in O(d) (orthogonal/QMC build blocks of a fixed batch).
            self._value_error(f"DFD_EXT supports samplers gaussian, antithetic, gcmc; got {self.sampler!r}")
        if self.return_shaping != "standardize":
            self._value_error(
                "DFD standardizes each batch's rewards itself (paper 000 Algorithm 1): "
                f"return_shaping must be 'standardize', got {self.return_shaping!r}"
            )


class DFD(BlackBoxAlgorithm):
    """Delayed finite differences: runners never idle, delayed returns are used (Eq. 18)."""

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> DFDConfig:
        return DFDConfig()

    @override(BlackBoxAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        self.history = ParameterHistory(int(self.config.u_max))
        self.history.add(self.update_index, self.theta)
        self.returns = ReturnBuffer(self.config.episodes_per_batch, int(self.config.u_max), self.config.delayed_returns)
        self._job_seed = self.next_batch_seed()
        self._job_index = 0

    def _refill(self) -> None:
        """Queues jobs of the newest θ for every free slot (runners never wait, Algorithm 2)."""
        u = self.update_index
        self.pool.drop_queued(lambda call: call.version != u)
        free = self.num_runners * self.config.jobs_in_flight_per_env_runner - self.pool.num_in_flight
        per_call = self.call_size(self.config.episodes_per_batch)
        for _ in range(max(free - self.pool.num_queued, 0)):
            indices = range(self._job_index, self._job_index + per_call)
            self._job_index += per_call
            self.submit_perturbations(self._job_seed, JOB_ROWS, indices)

    @override(Algorithm)
    def training_step(self) -> None:
        self.check_can_train()
        cfg = self.config
        since, busy_before = self.pool.snapshot()
        u = self.update_index
        evals = []
        self._refill()
        self.watch(True)
        dropped_before = self.returns.steps_dropped_stale
        while not self.returns.ready():
            ok, failed = self.collect(timeout_s=0.05)
            evals += [r.ret for r in ok if r.index is None]
            self.returns.add([r for r in ok if r.index is not None], u)
            self._refill()
            self.watch(
                bool(ok or failed),
                awaiting=f"{self.config.episodes_per_batch - len(self.returns.pending)} more returns for update {u}",
            )

        batch = self.returns.take_batch(u)
        self.steps.used += int(sum(r.length for r in batch))
        self.steps.wasted += self.returns.steps_dropped_stale - dropped_before
        rewards = np.array([r.ret for r in batch])
        versions = np.array([r.version for r in batch])
        delays = u - versions
        sigma_eps = self.perturbations(batch)  # each row by its job's path: noise-table slice or seeded
        sigma_eps *= np.float32(cfg.noise_stdev)
        g, info = dfd_gradient(rewards, sigma_eps, delays, self.history, u, versions)
        current = delays == 0
        self.observe_evaluations(evals)  # DSGD's R̄
        stats = self.apply_update(g)
        self.history.add(self.update_index, self.theta)
        self._job_seed, self._job_index = self.next_batch_seed(), 0
        self._refill()

        self.log_batch(batch, since, busy_before)
        m = self.metrics
        m.log_value((BLACKBOX, "delayed_return_fraction"), float((delays > 0).mean()), reduce="mean", window=20)
        m.log_value((BLACKBOX, "mean_delay"), float(delays.mean()), reduce="mean", window=20)
        m.log_value(
            (BLACKBOX, "returns_dropped_stale_lifetime"), self.returns.num_dropped_stale, reduce="max", window=1
        )
        m.log_value((BLACKBOX, "returns_carried_over"), len(self.returns.pending), reduce="mean", window=1)
        m.log_value((BLACKBOX, "batches_without_current_returns"), float(not current.any()), reduce="sum")
        # Every return by its delay where it left the buffer (used or dropped): 0 … U_max, then > U_max.
        counts = self.returns.delay_counts
        for n_i, count in enumerate(counts):
            key = str(n_i) if n_i <= self.returns.u_max else "over_u_max"
            m.log_value((BLACKBOX, "returns_by_delay_lifetime", key), int(count), reduce="max", window=1)
        m.log_value((BLACKBOX, "max_delay_lifetime"), self.returns.delay_max, reduce="max", window=1)
        if evals:
            m.log_value((BLACKBOX, "eval_return_mean"), float(np.mean(evals)), reduce="mean", window=1)
        for key, value in {**stats, **info}.items():
            m.log_value((BLACKBOX, key), value, reduce="mean", window=1)
        if cfg.eval_episodes:
            self.submit_unperturbed(cfg.eval_episodes)

    @override(BlackBoxAlgorithm)
    def _extra_state(self):
        return {
            "history": self.history.get_state(),
            "returns": self.returns.get_state(),
            "job_seed": self._job_seed,
            "job_index": self._job_index,
        }

    @override(BlackBoxAlgorithm)
    def _set_extra_state(self, state) -> None:
        self.history.set_state(state["history"])
        self.returns.set_state(state["returns"])
        self._job_seed, self._job_index = state["job_seed"], state["job_index"]
