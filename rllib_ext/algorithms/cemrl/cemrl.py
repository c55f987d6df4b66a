"""CEMRL_EXT: CEM-RL (Pourchot & Sigaud 2019), the synchronous baseline of paper 001 (Table 1).

Paper 001 §2.3–2.4 and §4.1 (``../shared/papers/001_6bf500f1c5f7a9b5.txt``); the reference
implementations are apourchot/CEM-RL and the P-CEM-RL of KyunghyunLee/aes-rl. One
``training_step`` is one generation:

1. Sample ``population_size`` (10) individuals from N(μ, diag σ²) (antithetic pairs).
2. Once ``rl_start_steps`` env steps are done, the first ``rl_population`` (5, half) are RL
   individuals: for each, the shared critic is trained for (last generation's steps /
   rl_population) steps with that individual as the TD3 target actor, then the individual is
   trained against the critic for ``rl_actor_steps`` (``"auto"``: last generation's steps) TD3
   actor steps with a fresh Adam — CEM-RL's schedule.
3. Every individual is evaluated for one episode (action noise ``action_noise``, 0 as both
   reference codes run it; paper 001 App. C.2's 0.1 is an option), filling the
   replay actor), and sep-CEM updates μ and σ² from the elites (Eq. 1; the variance in the
   reference codes' form (1/K_e)·Σλ_i(z_i − μ_t)² + ε by default, Eq. 2 as printed with
   ``cem_variance="eq2"``; :class:`~rllib_ext.common.erl.population.SepCEM`).

``mode``:

- ``"serial"`` (CEM-RL): one individual at a time — train its critic and actor, evaluate it, then
  the next; one runner is busy at any time whatever ``num_env_runners`` is.
- ``"parallel"`` (P-CEM-RL): the critic steps of all RL individuals first (they are sequential
  by nature), then all individuals are trained/evaluated at once across the runners, and the
  generation waits for the slowest — the idle time AES-RL removes.

**Warm-up generations.** Until ``initial_steps`` env steps, individuals act uniformly at random
and sep-CEM is still told about them, as aes-rl's CEM-RL and P-CEM-RL do (``algorithm/cemrl.py``:
``random_action=True`` while ``total_steps <= initial_steps``, then ``population.tell``).
apourchot's CEM-RL never acts at random (``es_grad.py``: ``start_steps`` only delays the RL
actors): that is ``initial_steps=0`` with ``rl_start_steps=10000``.

A failed episode (the env raised or returned NaN) is re-run (up to ``max_retries`` times), then
the individual gets fitness −inf; both are counted.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BLACKBOX
from rllib_ext.common.blackbox.protocol import IndividualJob
from rllib_ext.common.erl import ERLAlgorithm, ERLConfig, ERLResult
from rllib_ext.common.erl.population import SepCEM
from rllib_ext.settings import Setting, changed

MODES = ("serial", "parallel")


class CEMRLConfig(ERLConfig):
    """CEMRL_EXT's settings (CEM-RL's defaults; the ERL ones in :class:`ERLConfig`)."""

    SETTINGS = {
        "mode": Setting("serial", choices=MODES, doc="`serial` (CEM-RL) or `parallel` (P-CEM-RL)"),
        "population_size": Setting(10, int, ge=2, source="10", doc="individuals per generation"),
        "rl_population": Setting(5, int, ge=0, source="5 (half)", doc="RL individuals per generation"),
        "num_elites": Setting(
            None, int, ge=1, also=(None,), symbol="K_e", shown="None (half the population)", doc="elites of sep-CEM"
        ),
        "cem_weights": Setting(
            "log",
            choices=("log", "equal"),
            symbol="λ_i",
            source="`log` (Eq. 1)",
            doc="`log` (log(1 + K_e)/i, normalised) or `equal`",
        ),
        "damp_init": Setting(
            1e-3, float, ge=0, symbol="ε", source="Eq. 1–2", doc="initial ε, added to σ² (apourchot `sepCEM`)"
        ),
        "damp_limit": Setting(1e-5, float, ge=0, symbol="ε_limit", source="Eq. 1–2", doc="the limit ε decays to"),
        "damp_tau": Setting(
            0.95,
            float,
            ge=0,
            le=1,
            symbol="τ",
            source="apourchot 0.95, aes-rl 0.90",
            doc="ε ← τ·ε + (1 − τ)·ε_limit per generation, before it is added",
        ),
        "cem_variance": changed(
            doc="σ² = (1/K_e)·Σλ_i(z_i − μ_t)² + ε (`reference`, both codes) or Σλ_i(z_i − μ_t)² + ε (`eq2`)"
        ),
        "antithetic": Setting(True, bool, doc="± pairs"),
        "max_retries": Setting(2, int, ge=0, doc="re-runs of a failed episode before fitness −inf"),
        "rl_batch_size": changed(default=100, source="100 (CEM-RL)"),
        "rl_actor_steps": changed(
            source="last generation's env steps (CEM-RL)", doc="TD3 actor steps per RL individual"
        ),
        "num_env_runners": changed(default=1, doc="runners (`serial` uses one at a time)"),
        "critic_num_gpus": changed(
            source="— (apourchot trains on a GPU when there is one)",
            doc="GPUs for the shared critic's worker (as AESRL_EXT's)",
        ),
        "num_gpus_per_env_runner": changed(
            source="— (apourchot trains its actors on a GPU when there is one)",
            doc="a share of a GPU per env runner, on which it trains its RL individuals' actors (as AESRL_EXT's)",
        ),
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or CEMRL)

    @override(ERLConfig)
    def validate(self) -> None:
        super().validate()
        if self.antithetic and self.population_size % 2:
            self._value_error(f"antithetic sampling needs an even population_size, got {self.population_size}")
        if self.rl_population > self.population_size:
            self._value_error(f"rl_population must be an integer in [0, population_size], got {self.rl_population!r}")
        if self.num_elites is not None and self.num_elites > self.population_size:
            self._value_error(f"num_elites must be None or an integer in [1, population_size], got {self.num_elites!r}")

    def make_population(self, mu: np.ndarray) -> SepCEM:
        """The sep-CEM population over μ_0 with these settings (Eq. 1–2, ``cem_variance``)."""
        return SepCEM(
            mu,
            sigma_init=self.sigma_init,
            population_size=self.population_size,
            num_elites=self.num_elites,
            weights=self.cem_weights,
            damp_init=self.damp_init,
            damp_limit=self.damp_limit,
            damp_tau=self.damp_tau,
            antithetic=self.antithetic,
            variance=self.cem_variance,
        )


class CEMRL(ERLAlgorithm):
    """CEMRL_EXT (see the module docstring)."""

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> CEMRLConfig:
        return CEMRLConfig()

    @override(ERLAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        self.cem = self.config.make_population(self.mu)
        self.prev_generation_steps = 0
        self.counters.update({"individuals_failed": 0, "individual_retries": 0})

    def _train_critic(self, steps: int, actor: np.ndarray) -> None:
        if steps > 0:
            self.critic_result(self.critic.train.remote(int(steps), actor))

    def _job(self, z: np.ndarray, rl: bool) -> IndividualJob:
        cfg = self.config
        rl = rl and self.critic_ref is not None
        steps = self.prev_generation_steps if cfg.rl_actor_steps == "auto" else int(cfg.rl_actor_steps)
        return IndividualJob(
            id=self.pool.new_job_id(),
            params_ref=[ray.put(z)],
            random_actions=self.counters["individual_steps"] < cfg.initial_steps,
            rl_steps=max(int(steps), 1) if rl else 0,
            critic_ref=[self.critic_ref] if rl else None,
        )

    def _run(self, jobs: list[IndividualJob]) -> dict[int, ERLResult]:
        """Runs the jobs (all at once), re-running failed episodes; results by job id."""
        pending = {j.id: (j, 0) for j in jobs}
        for j in jobs:
            self.pool.submit([j])
        done: dict[int, ERLResult] = {}
        self.watch(True)
        while pending:
            ok, failed = self.collect(timeout_s=0.05)
            for r in ok:
                if r.id in pending:
                    pending.pop(r.id)
                    done[r.id] = r
                else:  # not awaited (any more): its steps are of no use
                    self.steps.wasted += r.length
            for r in failed:
                if r.id not in pending:
                    continue
                job, tries = pending.pop(r.id)
                if tries < self.config.max_retries:
                    self.counters["individual_retries"] += 1
                    pending[job.id] = (job, tries + 1)
                    self.pool.submit([job])
                else:
                    self.counters["individuals_failed"] += 1
                    r.ret, r.length = float("-inf"), 0
                    done[r.id] = r
            self.watch(bool(ok or failed), awaiting=f"{len(pending)} of {len(jobs)} individuals of generation")
        return done

    @override(Algorithm)
    def training_step(self) -> None:
        self.check_can_train()
        cfg = self.config
        since, busy_before = self.pool.snapshot()
        individuals = self.cem.ask(self.next_batch_seed())
        use_rl = self.counters["individual_steps"] >= cfg.effective_rl_start_steps and self.prev_generation_steps > 0
        n_rl = cfg.rl_population if use_rl else 0
        critic_steps = self.prev_generation_steps // max(cfg.rl_population, 1)
        results: list[ERLResult] = []
        if cfg.mode == "serial":
            for i, z in enumerate(individuals):
                if i < n_rl:
                    self._train_critic(critic_steps, z)
                results += self._run([self._job(z, i < n_rl)]).values()
        else:
            for z in individuals[:n_rl]:
                self._train_critic(critic_steps, z)
            jobs = [self._job(z, i < n_rl) for i, z in enumerate(individuals)]
            by_id = self._run(jobs)
            results = [by_id[j.id] for j in jobs]
        fitness, evaluated = [], []
        for z, r in zip(individuals, results, strict=True):
            params = r.params
            if params is not None and not np.isfinite(params).all():  # e.g. trained on a diverged critic
                self.counters["individuals_failed"] += 1
                params, r.ret = None, float("-inf")
            evaluated.append(params if params is not None else z)
            fitness.append(r.ret if np.isfinite(r.ret) else float("-inf"))
        self.cem.tell(np.stack(evaluated), np.asarray(fitness))  # Eq. (1) and the variance (cem_variance)
        self.mu, self.var = self.cem.mu, self.cem.var
        self.check_finite_population()
        self.update_index += 1
        self.counters["n_rl"] += sum(1 for r in results if r.rl)
        self.counters["n_es"] += sum(1 for r in results if not r.rl)
        steps = int(sum(r.length for r in results))
        self.steps.used += steps
        self.counters["individual_steps"] += steps
        self.prev_generation_steps = steps
        self.publish()
        finite = [r for r in results if np.isfinite(r.ret)]
        self.log_batch(finite, since, busy_before)
        m = self.metrics
        m.log_value((BLACKBOX, "generation_s"), time.perf_counter() - since, reduce="mean", window=1)
        m.log_value((BLACKBOX, "cem_damp"), self.cem.damp, reduce="mean", window=1)
        for key in ("individuals_failed", "individual_retries"):
            m.log_value((BLACKBOX, key + "_lifetime"), self.counters[key], reduce="max", window=1)
        if finite:
            m.log_value((BLACKBOX, "best_individual_return"), max(r.ret for r in finite), reduce="mean", window=1)
        self.log_common()
        self.sync_mu_to_learner()

    @override(ERLAlgorithm)
    def _extra_state(self) -> dict[str, Any]:
        return {
            **super()._extra_state(),
            "cem": self.cem.get_state(),
            "prev_generation_steps": self.prev_generation_steps,
        }

    @override(ERLAlgorithm)
    def _set_extra_state(self, state: dict[str, Any]) -> None:
        super()._set_extra_state(state)
        self.cem.set_state(state["cem"])
        self.mu, self.var = self.cem.mu, self.cem.var
        self.prev_generation_steps = int(state["prev_generation_steps"])
