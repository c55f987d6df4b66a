"""AESRL_EXT: Asynchronous Evolution Strategy–Reinforcement Learning (paper 001, Algorithm 1).

Lee, Lee, Shin & Kweon, "An Efficient Asynchronous Method for Integrating Evolutionary and
Gradient-based Policy Search" (NeurIPS 2020), ``../shared/papers/001_6bf500f1c5f7a9b5.txt``.

Algorithm 1 (App. B) as this driver runs it (``training_step`` is one pass of its while loop):

1. Whenever a runner is idle (a free job slot), sample an individual z ~ N(μ, diag σ²) (line 8,
   sent as a seed). With probability p_rl (Eq. 3, :func:`~rllib_ext.algorithms.aesrl.
   population.p_rl`), once ``rl_start_steps`` env steps are done and the critic has been
   trained, it is an RL individual: the runner first trains it against the current critic
   weights (TD3 actor loss, lines 13–17); else an ES individual (line 20). Either way it is
   evaluated with action noise a_noise (``action_noise``, default 0 as the reference runs it),
   filling the replay actor (line 23, Algorithm 2).
2. The shared critic trains continuously in the critic worker (line 3): one ``train`` call of
   ``critic_steps_per_call`` steps is always in flight, with μ as the TD3 target actor (the
   reference code's choice), as long as critic steps ≤ ``critic_steps_per_env_step`` × env steps
   (the reference trains while critic steps < total steps). A call returns after about
   ``critic_call_s`` seconds (1 s) even short of its steps, so that weights reach the RL
   individuals that often however slow the critic's core is; the seconds from ``rl_start_steps``
   to the first weights are ``blackbox/rl_first_critic_wait_s``. On a machine with spare cores the
   critic keeps up by itself; on a small one (2 cores: the runners take them) it falls far behind
   the env steps. ``critic_min_steps_per_env_step`` > 0 (default 0, the paper's free-running
   critic) then holds new individuals back while the critic has fewer than that many steps per
   env step since ``rl_start_steps`` (less one call), for comparisons at an equal critic budget
   (TD3_EXT and CEM-RL make about one per env step); the time held is
   ``blackbox/critic_wait_s_lifetime``.
3. When an individual finishes (lines 28–33): the population is updated with (z, f(z)) by the
   chosen mean and variance rules (§3.3–3.4, :class:`~rllib_ext.algorithms.aesrl.population.
   AsyncPopulation`), its steps are counted, and μ, σ² (update u + 1) are published.

**Warm-up individuals.** Until ``initial_steps`` env steps, individuals act uniformly at random
(they fill the replay for the critic). The reference (aes-rl ``algorithm/aesrl.py``, the ES
branch and the ``eval_type`` handling) samples them from N(μ, σ²) like any individual, evaluates
μ ``num_evals`` = 5 times after each, and tells the population — so they move μ and σ² although
their return does not depend on z, and each costs 5 μ episodes. That is the default
(``warmup_updates_population=True``); ``False`` counts their steps and keeps their transitions but
neither tells them nor evaluates μ for them (counted under ``blackbox/warmup_individuals_lifetime``
either way). Neither counts towards Eq. (3)'s n_rl/n_es (the reference counts ES individuals only
from ``initial_steps`` on).

**f(μ).** The fitness-based rules need the fitness of the current mean, which the paper does not
say how to get. ``mean_fitness``:

- ``"reevaluate"`` (default, the reference code): after each individual, μ (as it is then) is
  evaluated for ``mean_eval_episodes`` (5) episodes on a runner, under the same ``action_noise``
  as the individuals (both noise-free by default, as in the reference), and the individual is
  told once they finish. Accurate, but costs 5 episodes per individual; these episodes are counted
  in RLlib's sampled env steps (as evaluation steps, ``env_runners/env_steps_evaluation_lifetime``)
  and under ``blackbox/mean_eval_env_steps_lifetime``; ``initial_steps``, ``rl_start_steps`` and
  the critic cap use the individuals' steps (``blackbox/individual_steps_lifetime``).
- ``"interpolate"``: μ is evaluated once at the start; afterwards f(μ) follows Eq. (4)'s
  interpolation, f(μ_{t+1}) ≈ (1 − p)·f(μ_t) + p·f(z) — no extra episodes, but biased (f is not
  linear, and one noisy f(z) moves it). Every ``mean_eval_interval`` updates (0: never) μ is
  re-evaluated to re-anchor it.

Metrics (``blackbox/``): ``p_rl``, ``n_rl_lifetime``, ``n_es_lifetime``, ``p_mean`` (mean
update ratio), ``mean_rule_scale`` (the r or f_b the last update used: Table 5's, the setting, or
the adaptive scale), ``p_rl_individuals`` / ``p_es_individuals`` (mean p by kind, App. G),
``sigma_mean``/``sigma_max``, ``f_mu``, ``critic_updates_per_s``, ``worker_utilization``,
``replay_size``, plus RLlib's episode-return keys over the individuals.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import time
from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.aesrl.population import (
    ADAPTIVE,
    MEAN_RULES,
    VARIANCE_RULES,
    AsyncPopulation,
    p_rl,
)
from rllib_ext.common.blackbox import BLACKBOX
from rllib_ext.common.blackbox.protocol import EvaluationJob, IndividualJob
from rllib_ext.common.erl import ERLAlgorithm, ERLConfig, ERLResult
from rllib_ext.settings import Setting

logger = logging.getLogger(__name__)

MEAN_FITNESS = ("reevaluate", "interpolate")
# Paper 001 Table 5: the range r (fixed-range rules) and the baseline magnitude |f_b| (baseline
# rules: +|f_b| relative, −|f_b| absolute) per task, "about 1/6 of the maximum reward" (App. C).
# Keys are task names, matched exactly against the env id without namespace and version
# (HalfCheetah-v2 in the paper, -v5 here; HumanoidStandup is not Humanoid).
TABLE_5 = {"HalfCheetah": 2000.0, "Hopper": 600.0, "Walker2d": 860.0, "Ant": 960.0, "Swimmer": 48.0, "Humanoid": 960.0}
# App. C: p_desired 0.5 for every task but Swimmer (0.1: RL gradients are deceptive there).
P_DESIRED = {"Swimmer": 0.1}
SCALE_SETTINGS = ("auto", ADAPTIVE)


def task_name(env) -> str:
    """The task of an env id: ``"gymnasium/HalfCheetah-v5"`` → ``"HalfCheetah"`` ("" if not a string)."""
    if not isinstance(env, str):
        return ""
    name = env.split("/")[-1]
    versioned = re.fullmatch(r"(.+)-v\d+", name)
    return versioned.group(1) if versioned else name


class AESRLConfig(ERLConfig):
    """AESRL_EXT's settings (defaults: paper 001 §3, App. C; the ERL ones in :class:`ERLConfig`)."""

    SETTINGS = {
        "mean_rule": Setting(
            "baseline_relative",
            choices=MEAN_RULES,
            source="`baseline_relative` (§3.3, Eq. 10)",
            doc="`one_plus_one`, `rank`, `fixed_linear`, `fixed_sigmoid`, `baseline_absolute`, `baseline_relative`",
        ),
        "variance_rule": Setting(
            "online_adaptive",
            choices=VARIANCE_RULES,
            source="`online_adaptive` (§3.4, Eq. 11–12)",
            doc="`success_rule`, `online_fixed`, `online_adaptive`, `elite` (with `rank` only)",
        ),
        "fixed_range": Setting(
            "auto",
            float,
            also=SCALE_SETTINGS,
            symbol="r",
            source="Table 5",
            doc="range of the fixed-range rules (Eq. 6, 8): `'auto'` (Table 5, else adaptive), `'adaptive'` or a "
            "number",
        ),
        "fitness_baseline": Setting(
            "auto",
            float,
            also=SCALE_SETTINGS,
            symbol="f_b",
            source="Table 5 (+r relative, −r absolute)",
            doc="baseline of Eq. 9, 10: `'auto'`, `'adaptive'` (Eq. 10 only) or a number",
        ),
        "adaptive_scale_window": Setting(
            20, int, ge=1, source="— (ours)", doc="the adaptive r / f_b: mean |f(z) − f(μ)| over this many individuals"
        ),
        "adaptive_scale_factor": Setting(1.0, float, gt=0, source="— (ours)", doc="the adaptive r / f_b: its factor"),
        "warmup_updates_population": Setting(
            True,
            bool,
            source="— (reference: True)",
            doc="whether random-action warm-up individuals update μ, σ² (and cost f(μ) episodes)",
        ),
        "p_positive": Setting(1.0, float, ge=0, le=1, symbol="p_sg", doc="Eq. 7, for a better individual"),
        "p_negative": Setting(
            0.0, float, ge=0, le=1, symbol="p_sg", source="0 (App. C)", doc="Eq. 7, for a worse individual"
        ),
        "online_n": Setting(10.0, float, gt=0, symbol="n", doc="n of `online_fixed`"),
        "rank_population": Setting(10, int, ge=1, symbol="n", doc="n of `rank`"),
        "success_window": Setting(10, int, ge=1, doc="the 1/5 success rule: its window"),
        "success_threshold": Setting(
            0.2, float, ge=0, le=1, source="1/5 (App. C)", doc="the 1/5 success rule: its threshold"
        ),
        "success_factor": Setting(0.85, float, gt=0, le=1, doc="the 1/5 success rule: its factor"),
        "k_rl": Setting(50.0, float, gt=0, symbol="K_rl", source="50 (App. C)", doc="P gain of Eq. 3"),
        "p_desired": Setting(
            "auto",
            float,
            ge=0,
            le=1,
            also=("auto",),
            source="0.5; Swimmer 0.1 (App. C)",
            doc="target RL fraction of Eq. 3",
        ),
        "mean_fitness": Setting(
            "reevaluate", choices=MEAN_FITNESS, doc="how f(μ) is estimated: `reevaluate` or `interpolate` (Eq. 4)"
        ),
        "mean_eval_episodes": Setting(
            5,
            int,
            ge=1,
            source="— (reference: 5)",
            doc="episodes per f(μ) evaluation (with `action_noise`, like f(z))",
        ),
        "mean_eval_interval": Setting(
            0, int, ge=0, doc="`interpolate`: re-anchor f(μ) every this many updates (0: never)"
        ),
        "critic_steps_per_call": Setting(
            500, int, ge=1, source="— (reference: 1000)", doc="critic steps per call to the critic worker"
        ),
        "critic_call_s": Setting(
            1.0,
            float,
            gt=0,
            also=(None,),
            doc="a critic call returns after about this many seconds, even short of its steps (None: no bound)",
        ),
        "critic_steps_per_env_step": Setting(1.0, float, gt=0, doc="cap on critic steps per env step"),
        "critic_min_steps_per_env_step": Setting(
            0.0, float, ge=0, doc="floor: hold individuals back while the critic is behind (0: none)"
        ),
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or AESRL)

    @override(ERLConfig)
    def validate(self) -> None:
        super().validate()
        if self.variance_rule == "elite" and self.mean_rule != "rank":
            self._value_error("variance_rule 'elite' is the rank rule's own variance: use it with mean_rule 'rank'")
        self._validate_scale()
        if self.critic_min_steps_per_env_step > self.critic_steps_per_env_step:
            self._value_error(
                f"critic_min_steps_per_env_step must be in [0, critic_steps_per_env_step "
                f"({self.critic_steps_per_env_step})], got {self.critic_min_steps_per_env_step!r}"
            )
        if self.mean_rule == "rank" and self.rank_population < 2:
            self._value_error("rank_population must be >= 2 for the rank rule")

    def _validate_scale(self) -> None:
        """fixed_range / fitness_baseline: the number the mean rule needs (their kinds are in the table)."""
        r, fb = self.effective_fixed_range, self.effective_fitness_baseline
        if r != ADAPTIVE and r <= 0:
            self._value_error(f"fixed_range (r) must be > 0 (Eq. 6, 8), got {r!r}")
        if self.mean_rule == "baseline_relative" and fb != ADAPTIVE and fb <= 0:
            self._value_error(f"fitness_baseline (f_b) must be > 0 for baseline_relative (Eq. 10), got {fb!r}")
        if self.mean_rule == "baseline_absolute" and fb == ADAPTIVE:
            why = (
                "is 'adaptive'"
                if self.fitness_baseline == ADAPTIVE
                else f"is 'auto' and {self.env!r} has no Table 5 value"
            )
            self._value_error(
                f"fitness_baseline {why}: the absolute baseline (Eq. 9) is a return level and has no adaptive "
                f"form; set fitness_baseline to a number (Table 5 uses about −1/6 of the maximum return)"
            )

    @property
    def effective_fixed_range(self) -> float | str:
        """r: the setting, Table 5's value for the env, or ``"adaptive"`` (no Table 5 entry)."""
        if self.fixed_range == "auto":
            return TABLE_5.get(task_name(self.env), ADAPTIVE)
        return self.fixed_range

    @property
    def effective_fitness_baseline(self) -> float | str:
        """f_b: the setting, Table 5's (+r relative, −r absolute), or ``"adaptive"`` (no Table 5 entry)."""
        if self.fitness_baseline != "auto":
            return self.fitness_baseline
        r = TABLE_5.get(task_name(self.env))
        if r is None:
            return ADAPTIVE
        return -r if self.mean_rule == "baseline_absolute" else r

    @property
    def effective_p_desired(self) -> float:
        return P_DESIRED.get(task_name(self.env), 0.5) if self.p_desired == "auto" else self.p_desired

    def make_population(self, mu: np.ndarray) -> AsyncPopulation:
        return AsyncPopulation(
            mu,
            sigma_init=self.sigma_init,
            mean_rule=self.mean_rule,
            variance_rule=self.variance_rule,
            fixed_range=self.effective_fixed_range,  # f_b = 0 is a valid absolute baseline: no `or` here
            fitness_baseline=self.effective_fitness_baseline,
            scale_window=self.adaptive_scale_window,
            scale_factor=self.adaptive_scale_factor,
            p_positive=self.p_positive,
            p_negative=self.p_negative,
            online_n=self.online_n,
            rank_population=self.rank_population,
            success_window=self.success_window,
            success_threshold=self.success_threshold,
            success_factor=self.success_factor,
            var_limit=self.var_limit,
            cem_variance=self.cem_variance,
        )


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Pending:
    """An individual in flight: its job is on a runner, its fitness not back yet.

    Attributes:
        z: Its parameters, drawn from the N(μ, σ²) of the version its job runs with (an RL
            individual's runner trains from this z and sends the trained one back).
        rl: Whether it is an RL individual (TD3 actor steps before its episodes).
        warmup: Whether it acts uniformly at random (before ``initial_steps``).
    """

    z: np.ndarray
    rl: bool
    warmup: bool


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Finished:
    """An individual whose episodes are done, to be told to the population (Algorithm 1 lines 28–33).

    Attributes:
        z: The parameters it ran with (the trained ones for an RL individual).
        fitness: f(z), its mean episode return.
        rl: Whether it is an RL individual.
        length: Its env steps (counted as used when it is told).
    """

    z: np.ndarray
    fitness: float
    rl: bool
    length: int


class AESRL(ERLAlgorithm):
    """AESRL_EXT (see the module docstring): an event-driven driver of individuals.

    The driver keeps the individuals in flight in ``_pending`` (job id → :class:`Pending`), the
    finished ones waiting for f(μ) in ``_awaiting_mean`` (μ's evaluation job id → the
    :class:`Finished` individual it was submitted for, or None) and ``_untold`` (in arrival order).
    Each individual moves through these states (handler in brackets)::

        from                 event                                                 to
        -------------------  ----------------------------------------------------  ------------------------
        (new)                a free job slot [_submit_individual]                  pending
        pending              its job failed [training_step]                        dropped (failed)
        pending              back, z or f(z) non-finite [_on_individual]           dropped (failed)
        pending              back, warm-up, warmup_updates_population=False        kept: steps used, not told
                             [_on_individual]
        pending              back, its mean rule needs no f(μ) [_on_individual]    told
        pending              back, mean_fitness="reevaluate": μ submitted          awaiting_mean
                             [_on_individual]
        pending              back, "interpolate", f(μ) known [_on_individual]      told
        pending              back, "interpolate", no f(μ) yet [_on_individual]     untold
        awaiting_mean        μ's evaluation failed: resubmitted [_on_mean]          awaiting_mean
        awaiting_mean        f(μ) back [_on_mean]                                  told
        untold               any f(μ) back [_on_mean]                              told

    "Told" is :meth:`_tell`: the population update (Algorithm 1 lines 28–33) and μ, σ² published.
    A result whose job is no longer pending is not an individual in flight: its steps are wasted.
    In-flight individuals are not checkpointed (a restored run starts with none).
    """

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> AESRLConfig:
        return AESRLConfig()

    @override(ERLAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        self.init_population()

    @override(ERLAlgorithm)
    def setup(self, config):
        super().setup(config)  # publishes μ_0, so that jobs carry its version
        if self.population.needs_f_mu and self.config.mean_fitness == "interpolate":
            self._submit_mean()  # f(μ_0); "reevaluate" evaluates μ after every individual

    def init_population(self) -> None:
        """The population N(μ, σ²) and the driver's bookkeeping of individuals (after the ERL setup)."""
        self.population = self.config.make_population(self.mu)
        self.population.var = self.var
        self.counters.update(
            {
                "mean_eval_env_steps": 0,
                "individuals_failed": 0,
                "critic_wait_s": 0.0,
                "warmup_individuals": 0,
                "es_before_rl": 0,
            }
        )
        self._pending: dict[int, Pending] = {}  # job id -> an individual in flight
        self._awaiting_mean: dict[int, Finished | None] = {}  # μ's evaluation job id -> the individual to tell
        self._untold: list[Finished] = []  # finished individuals waiting for the first f(μ)
        self._last_steps = collections.deque(maxlen=10)
        self._critic_call = None
        # When rl_start_steps was reached, and the seconds from then to the first critic weights.
        self._rl_start_t: float | None = None
        self._first_critic_wait_s: float | None = None
        self._p_by_kind = {"rl": [], "es": []}
        self._rng = np.random.default_rng(None if self.config.seed is None else int(self.config.seed) + 99)

    # -- submitting ------------------------------------------------------------------------
    def _submit_mean(self, individual: Finished | None = None) -> None:
        """Submits an evaluation of μ (``mean_eval_episodes`` episodes); ``individual`` waits for it."""
        job = EvaluationJob(id=self.pool.new_job_id(), episodes=int(self.config.mean_eval_episodes))
        self.pool.submit([job])
        self._awaiting_mean[job.id] = individual

    def _rl_steps(self) -> int:
        """TD3 actor steps for an RL individual: the setting, or ``"auto"``: the recent individuals' mean length."""
        steps = self.config.rl_actor_steps
        return max(int(sum(self._last_steps)), 1) if steps == "auto" else int(steps)

    def _submit_individual(self) -> None:
        """Samples an individual (RL with probability p_rl, Eq. 3) and submits its job: it is pending."""
        cfg = self.config
        steps = self.counters["individual_steps"]
        rl = False
        if steps >= cfg.effective_rl_start_steps and self.critic_ref is not None:
            prob = p_rl(self.counters["n_rl"], self.counters["n_es"], cfg.k_rl, cfg.effective_p_desired)  # Eq. (3)
            self.metrics.log_value((BLACKBOX, "p_rl"), prob, reduce="mean", window=20)
            rl = bool(self._rng.random() < prob)
            self.counters["n_rl" if rl else "n_es"] += 1
        elif steps >= cfg.initial_steps:
            # An ES individual before RL can start (rl_start_steps, or no critic weights yet: a GPU
            # critic's first answer can take seconds): told like any other, not in Eq. 3's counts.
            self.counters["es_before_rl"] += 1
        seed = self.next_batch_seed()
        job = IndividualJob(
            id=self.pool.new_job_id(),
            seed=seed,
            random_actions=steps < cfg.initial_steps,
            rl_steps=self._rl_steps() if rl else 0,
            critic_ref=[self.critic_ref] if rl else None,
        )
        # z is drawn from the μ, σ² of the version this job is submitted (and run) with.
        self._pending[job.id] = Pending(z=self.population.sample(seed), rl=rl, warmup=job.random_actions)
        self.pool.submit([job])

    def _pump_critic(self) -> None:
        """Takes a finished critic ``train`` call's reply; starts the next one while under the critic cap."""
        cfg = self.config
        if self._critic_call is not None:
            import ray

            ready, _ = ray.wait([self._critic_call], timeout=0)
            if not ready:
                return
            call, self._critic_call = self._critic_call, None
            self.critic_result(call)
            if self._rl_start_t is not None and self.critic_ref is not None and self._first_critic_wait_s is None:
                self._first_critic_wait_s = time.perf_counter() - self._rl_start_t
        steps = self.counters["individual_steps"]
        if steps < cfg.effective_rl_start_steps:
            return
        if self._rl_start_t is None:
            self._rl_start_t = time.perf_counter()
        if self.counters["critic_steps"] + cfg.critic_steps_per_call <= cfg.critic_steps_per_env_step * steps:
            self._critic_call = self.critic.train.remote(int(cfg.critic_steps_per_call), self.mu, cfg.critic_call_s)

    def _critic_behind(self) -> bool:
        """Whether the critic is below its floor of steps per env step (then no new individuals)."""
        cfg = self.config
        floor = cfg.critic_min_steps_per_env_step
        if not floor:
            return False
        since_start = self.counters["individual_steps"] - cfg.effective_rl_start_steps
        return since_start > 0 and self.counters["critic_steps"] + cfg.critic_steps_per_call < floor * since_start

    # -- finishing -----------------------------------------------------------------------------
    def _tell(self, individual: Finished) -> None:
        """Tells the population (z, f(z)) (Algorithm 1 lines 28–33) and publishes μ, σ² (update u + 1)."""
        self.steps.used += individual.length
        pop = self.population
        p = pop.tell(individual.z, individual.fitness)
        if self.config.mean_fitness == "interpolate" and pop.f_mu is not None and p > 0:
            pop.f_mu = (1.0 - p) * pop.f_mu + p * individual.fitness  # Eq. (4) applied to f
        self.mu, self.var = pop.mu, pop.var
        self.check_finite_population()
        self.update_index += 1
        self._p_by_kind["rl" if individual.rl else "es"].append(p)
        m = self.metrics
        m.log_value((BLACKBOX, "p_mean"), p, reduce="mean", window=50)
        if pop.last_scale is not None:  # the r or f_b this update used (Table 5's, the setting's, adaptive)
            m.log_value((BLACKBOX, "mean_rule_scale"), pop.last_scale, reduce="mean", window=1)
        interval = self.config.mean_eval_interval
        if self.config.mean_fitness == "interpolate" and interval and self.update_index % interval == 0:
            self._submit_mean()
        self.publish()

    def _on_individual(self, r: ERLResult) -> None:
        """An individual's result is back: drop it, keep its steps, tell it, or let it wait for f(μ)
        (the class docstring's table)."""
        pending = self._pending.pop(r.id, None)
        if pending is None:  # not (any more) an individual in flight: its steps are of no use
            self.steps.wasted += r.length
            return
        self.counters["individual_steps"] += r.length
        self._last_steps.append(r.length)
        individual = Finished(
            z=r.params if r.params is not None else pending.z, fitness=r.ret, rl=pending.rl, length=r.length
        )
        if not (np.isfinite(individual.z).all() and np.isfinite(individual.fitness)):
            self.steps.wasted += r.length
            self.counters["individuals_failed"] += 1  # e.g. an RL individual trained on a diverged critic
            logger.warning("rllib_ext: AESRL_EXT individual %s has non-finite parameters or fitness; not used", r.id)
            return
        if pending.warmup:
            self.counters["warmup_individuals"] += 1
            if not self.config.warmup_updates_population:
                self.steps.used += r.length  # its transitions fill the replay
                return  # random actions: f(z) says nothing about z; its steps and transitions are kept
        pop = self.population
        if not pop.needs_f_mu:
            self._tell(individual)
        elif self.config.mean_fitness == "reevaluate":
            self._submit_mean(individual)
        elif pop.f_mu is None:
            self._untold.append(individual)
        else:
            self._tell(individual)

    def _on_mean(self, r: ERLResult) -> None:
        """An evaluation of μ is back: f(μ) is set and the individuals waiting for it are told (a
        failed one is submitted again)."""
        if r.id not in self._awaiting_mean:
            return
        individual = self._awaiting_mean.pop(r.id)
        self.counters["mean_eval_env_steps"] += r.length
        if r.failed:  # its failed episodes are counted by collect()
            self._submit_mean(individual)  # f(μ) is still needed: try again
            return
        self.population.f_mu = r.ret
        self.metrics.log_value((BLACKBOX, "f_mu"), r.ret, reduce="mean", window=1)
        untold, self._untold = self._untold, []
        for ind in ([individual] if individual is not None else []) + untold:
            self._tell(ind)

    @override(Algorithm)
    def training_step(self) -> None:
        """One pass of Algorithm 1's loop: keep the critic and every job slot busy, handle the results.

        Lasts at least 0.5 s and tells at least one individual (bounded: 60 s more).
        """
        self.check_can_train()
        since, busy_before = self.pool.snapshot()
        deadline = since + 0.5
        finished = []
        while True:
            self._pump_critic()
            if self._critic_behind():
                t_wait = time.perf_counter()
                ok, failed = self.collect(timeout_s=0.05)
                self.counters["critic_wait_s"] += time.perf_counter() - t_wait
            else:
                for _ in range(self.free_slots()):
                    self._submit_individual()
                ok, failed = self.collect(timeout_s=0.05)
            for r in failed:
                if isinstance(r.job, EvaluationJob):
                    self._on_mean(r)
                elif self._pending.pop(r.id, None) is not None:
                    self.counters["individuals_failed"] += 1
            for r in ok:
                if isinstance(r.job, EvaluationJob):
                    self._on_mean(r)
                else:
                    self._on_individual(r)
                    finished.append(r)
            self.watch(
                bool(ok or failed),
                awaiting=f"{len(self._pending)} individual(s) and {len(self._awaiting_mean)} evaluation(s) of μ",
                busy_elsewhere=self._critic_call is not None,
            )
            # A training_step lasts ≥ 0.5 s and tells at least one individual (as an RLlib
            # training_step makes at least one update, also with min_time_s_per_iteration=None),
            # bounded by 60 s more so that a run that has lost every runner still reports.
            if finished and time.perf_counter() >= deadline:
                break
            if time.perf_counter() >= deadline + 60:
                break
        self._log(finished, since, busy_before)

    def _log(self, finished: list[ERLResult], since: float, busy_before) -> None:
        """Logs this ``training_step``'s individuals, counters and the population's statistics."""
        self.log_batch(finished, since, busy_before)
        m = self.metrics
        m.log_value(
            (BLACKBOX, "mean_eval_env_steps_lifetime"), self.counters["mean_eval_env_steps"], reduce="max", window=1
        )
        m.log_value(
            (BLACKBOX, "individuals_failed_lifetime"), self.counters["individuals_failed"], reduce="max", window=1
        )
        m.log_value((BLACKBOX, "critic_wait_s_lifetime"), self.counters["critic_wait_s"], reduce="max", window=1)
        m.log_value(
            (BLACKBOX, "warmup_individuals_lifetime"), self.counters["warmup_individuals"], reduce="max", window=1
        )
        m.log_value((BLACKBOX, "es_before_rl_lifetime"), self.counters["es_before_rl"], reduce="max", window=1)
        if self._first_critic_wait_s is not None:
            m.log_value((BLACKBOX, "rl_first_critic_wait_s"), self._first_critic_wait_s, reduce="max", window=1)
        for kind, ps in self._p_by_kind.items():
            if ps:
                m.log_value((BLACKBOX, f"p_{kind}_individuals"), float(np.mean(ps)), reduce="mean", window=1)
        self._p_by_kind = {"rl": [], "es": []}
        if self.population.f_mu is not None:
            m.log_value((BLACKBOX, "f_mu"), float(self.population.f_mu), reduce="mean", window=1)
        self.log_common()
        self.sync_mu_to_learner()

    # -- checkpoints ---------------------------------------------------------------------------
    @override(ERLAlgorithm)
    def _extra_state(self) -> dict[str, Any]:
        state = super()._extra_state()
        state["population"] = self.population.get_state()
        state["last_steps"] = list(self._last_steps)
        return state

    @override(ERLAlgorithm)
    def _set_extra_state(self, state: dict[str, Any]) -> None:
        super()._set_extra_state(state)
        self.population.set_state(state["population"])
        self.mu, self.var = self.population.mu, self.population.var
        self._last_steps.clear()
        self._last_steps.extend(state["last_steps"])
