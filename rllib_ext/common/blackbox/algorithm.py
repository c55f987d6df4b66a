"""BlackBoxAlgorithm: the driver side every black-box algorithm shares."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    EPISODE_LEN_MEAN,
    EPISODE_RETURN_MAX,
    EPISODE_RETURN_MEAN,
    EPISODE_RETURN_MIN,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES_LIFETIME,
)

from rllib_ext.common.blackbox.env_runner import EVALUATION_STREAM, PERTURBATION_STREAM
from rllib_ext.common.blackbox.noise_table import NoiseTable, make_noise
from rllib_ext.common.blackbox.obs_filter import ObservationFilter
from rllib_ext.common.blackbox.protocol import EpisodeResult, EvaluationJob, Payload, PerturbationJob
from rllib_ext.common.fault_tolerance import ThrottledEnvRunnerProbe
from rllib_ext.common.guards import FiniteParametersGuard
from rllib_ext.common.steps import StepAccount
from rllib_ext.common.validation import algo_name

if TYPE_CHECKING:
    import gymnasium as gym
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.core.learner.learner_group import LearnerGroup
    from ray.rllib.env.env_runner_group import EnvRunnerGroup
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
    from ray.rllib.utils.typing import StateDict

    from rllib_ext.common.blackbox.config import BlackBoxConfig
    from rllib_ext.common.blackbox.learner import BlackBoxLearner

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

BLACKBOX = "blackbox"  # metrics key prefix of the engine's own metrics


class BlackBoxAlgorithm(FiniteParametersGuard, ThrottledEnvRunnerProbe, Algorithm):
    """Algorithm base of the ES family: θ_u publishing, the job pool, filter merging, metrics.

    Subclasses build their state in :meth:`setup_state` and implement ``training_step`` with
    :meth:`submit_perturbations`,
    :meth:`collect`, :meth:`apply_update` and :meth:`log_batch`. Extra state they keep must be
    added in ``_extra_state`` / ``_set_extra_state`` so checkpoints carry it.

    Env steps (:mod:`rllib_ext.common.steps`): :meth:`collect` adds every step of every reply to
    ``self.steps.total`` (failed episodes up to their failure, results the credit check refused,
    evaluations), books evaluation jobs as ``evaluation`` and failed jobs as ``wasted``; the
    subclass books what its update used (``used``) and what it threw away (``wasted``).
    """

    # Set by Algorithm.setup before setup_state (RLlib types them Optional).
    config: BlackBoxConfig
    metrics: MetricsLogger
    learner_group: LearnerGroup
    env_runner_group: EnvRunnerGroup
    spaces: dict[str, tuple[gym.Space[Any], gym.Space[Any]]]

    #: The shared noise table (``noise_table``), None on the seeded path; its object-store reference.
    noise: NoiseTable | None = None
    _noise_ref: Any = None

    @override(Algorithm)
    def setup(self, config: AlgorithmConfig) -> None:  # type: ignore[override]  # Tune's Trainable.setup: a dict
        from rllib_ext.common.blackbox.pool import AsyncJobPool

        super().setup(config)
        obs_shape = self.spaces[DEFAULT_MODULE_ID][0].shape
        if obs_shape is None:
            raise ValueError(f"{algo_name(self)} needs an observation space with a shape")
        self.obs_filter = ObservationFilter(
            obs_shape, clip=self.config.obs_clip, enabled=bool(self.config.observation_filter)
        )
        self.pool = AsyncJobPool(self.env_runner_group, jobs_in_flight=self.config.jobs_in_flight_per_env_runner)
        self.update_index = 0  # u
        self._eval_seed_counter = (0, 0)  # (u, evaluation episodes of θ_u seeded so far)
        self.batch_seed = int(self.config.batch_seed_offset) + 1_000_003 * int(self.config.seed or 0)
        self.counters = {
            "episodes_failed": 0,
            "episodes_capped": 0,
            "returns_dropped_stale": 0,
            "env_steps": 0,
            "episodes": 0,
            "episodes_logged": 0,
            "useful_runner_s": 0.0,
        }
        self.steps = StepAccount()
        self._t_first_update: float | None = None  # wall clock of the first training_step (updates_per_s)
        self.eval_return_ema: float | None = None  # R̄, DSGD's reward (observe_evaluations)
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.sampler = self.config.make_sampler(self.theta.size)
        if self.config.uses_noise_table:
            cfg = self.config
            self._noise_ref = ray.put(make_noise(cfg.noise_table_size, cfg.noise_table_seed, cfg.noise_table_dtype))
            self.noise = NoiseTable(ray.get(self._noise_ref), self.theta.size, antithetic=self.sampler.antithetic)
        self.setup_state()
        self.publish()  # once, with everything the payload needs

    def setup_state(self) -> None:
        """The subclass's own state, built after the engine's (θ, pool, counters) and before θ_u is
        first published: override it (calling ``super().setup_state()``) rather than ``setup``, so
        that nothing is set before ``super().setup`` and nothing is published twice."""

    # -- helpers ----------------------------------------------------------------------------
    def _on_learner(self, fn: Callable[[BlackBoxLearner], _T]) -> _T:
        """``fn`` of the (one) learner, its result."""

        def call(learner: Learner, *_: Any) -> _T:
            return fn(cast("BlackBoxLearner", learner))

        result: _T = self.learner_group.foreach_learner(call).result_or_errors[0].get()
        return result

    @property
    def num_runners(self) -> int:
        return max(self.pool.num_healthy, 1)

    def make_payload(self) -> Payload:
        """What the runners need of update u: θ_u and the observation filter (the payload hook)."""
        return Payload(theta=self.theta, filter_state=self.obs_filter.get_state())

    def publish(self) -> None:
        """Makes the payload of update u the one of every call submitted from now on."""
        payload = self.make_payload()
        if self._noise_ref is not None:  # the table's reference travels with every payload (once per update)
            payload = dataclasses.replace(payload, noise=self._noise_ref)
        self.pool.publish(self.update_index, payload)
        if self.env_runner is not None:  # the local runner: `rllib evaluate`, restarts sync from it
            self.env_runner.adopt(self.update_index, payload)

    def next_batch_seed(self) -> int:
        self.batch_seed += 1
        return self.batch_seed

    def call_size(self, n: int, kind: str = "PerturbationJob") -> int:
        """Jobs per remote call for a batch of ``n`` jobs of ``kind``: fixed, or ``auto``, sized by work.

        ``auto``: a call carries at least ``min_reply_s`` of runner time (the pool's running mean of a
        job's runner time, :meth:`AsyncJobPool.typical_job_work_s`), so that Ray's per-call cost
        (~1 ms of driver and runner time) stays small beside the episodes however short they are
        (OpenAI ES's workers send one message per ≥ 0.2 s); at least ``n / (4 runners)`` (four calls
        per runner per batch: long episodes balance well); at most ``⌈n / (runners × jobs in flight
        per runner)⌉``, so that the calls in flight hold about one batch: a synchronous batch stays
        spread over the runners, and DFD's returns stay within about an update of their θ. Before a
        job of ``kind`` has finished, the second rule alone.
        """
        per_call = self.config.perturbations_per_call
        if per_call != "auto":
            return int(per_call)
        runners = self.num_runners
        size = max(1, n // (4 * runners))
        work_s = self.pool.typical_job_work_s(kind)
        min_reply_s = float(self.config.min_reply_s)
        if work_s is not None and min_reply_s > 0:
            size = max(size, math.ceil(min_reply_s / max(work_s, 1e-6)))
        return max(1, min(size, math.ceil(n / (runners * max(self.pool.jobs_in_flight, 1)))))

    def submit_perturbations(self, seed: int, n: int, indices: Iterable[int] | None = None) -> list[int]:
        """Queues rows ``indices`` (default all n) of batch ``seed``; returns their job ids."""
        indices = list(range(n) if indices is None else indices)
        size = self.call_size(n)
        ids, episodes, env_seed = [], int(self.config.episodes_per_job), self.job_env_seed(seed)
        offsets: list[int | None] = [None] * len(indices)
        if self.noise is not None:
            offsets = [int(o) for o in self.noise.offsets(seed, indices)]
        for start in range(0, len(indices), size):
            jobs = [
                PerturbationJob(
                    id=self.pool.new_job_id(),
                    seed=seed,
                    n=n,
                    index=int(index),
                    episodes=episodes,
                    env_seed=env_seed,
                    noise_offset=offset,
                )
                for index, offset in zip(indices[start : start + size], offsets[start : start + size], strict=True)
            ]
            self.pool.submit(jobs)
            ids += [j.id for j in jobs]
        return ids

    def perturbations(self, rows: list[EpisodeResult]) -> np.ndarray:
        """ε of each perturbation result, float32 [len(rows), d], in row order, each by its job's path.

        Rows read from the noise table (a job with ``noise_offset``) are gathered in one indexed copy;
        a row without one (the seeded path; results of checkpoints written before the table) is
        regenerated from (seed, n, index), a whole batch at once where the rows are rows 0..n-1 of one
        batch (``sampler.sample``).
        """
        jobs = [r.job for r in rows]
        if not all(isinstance(j, PerturbationJob) for j in jobs):
            raise TypeError("perturbations(): every row must be a PerturbationJob's result")
        pjobs = [j for j in jobs if isinstance(j, PerturbationJob)]
        if self.noise is not None and pjobs and all(j.noise_offset is not None for j in pjobs):
            return self.noise.rows(np.array([j.noise_offset for j in pjobs]), [j.index for j in pjobs])
        if pjobs and all(j.noise_offset is None and j.seed == pjobs[0].seed and j.n == len(pjobs) for j in pjobs):
            if [j.index for j in pjobs] == list(range(len(pjobs))):
                return self.sampler.sample(pjobs[0].seed, len(pjobs))
        out = np.empty((len(pjobs), self.theta.size), dtype=np.float32)
        for i, j in enumerate(pjobs):
            if j.noise_offset is not None:
                if self.noise is None:
                    raise RuntimeError(f"job {j.id} reads the noise table, which this run does not hold")
                out[i] = self.noise.row(j.noise_offset, j.index)
            else:
                out[i] = self.sampler.perturbation(j.seed, j.n, j.index)
        return out

    def submit_unperturbed(self, episodes: int) -> list[int]:
        """Queues ``episodes`` one-episode evaluations of θ_u (one job each; calls sized by
        :meth:`call_size`); returns their ids."""
        jobs = [EvaluationJob(id=self.pool.new_job_id(), env_seed=self.eval_env_seed()) for _ in range(episodes)]
        size = self.call_size(episodes, "EvaluationJob")
        for start in range(0, len(jobs), size):
            self.pool.submit(jobs[start : start + size])
        return [job.id for job in jobs]

    def job_env_seed(self, batch_seed: int) -> tuple[int, ...] | None:
        """Entropy of a perturbation job's episodes under ``common_random_numbers`` (else None)."""
        return (PERTURBATION_STREAM, int(batch_seed)) if self.config.common_random_numbers else None

    def eval_env_seed(self) -> tuple[int, ...] | None:
        """Entropy of θ_u's next evaluation episode under ``common_random_numbers``: (u, j)."""
        if not self.config.common_random_numbers:
            return None
        u, j = self._eval_seed_counter
        j = j if u == self.update_index else 0
        self._eval_seed_counter = (self.update_index, j + 1)
        return (EVALUATION_STREAM, int(self.config.seed or 0), self.update_index, j)

    #: Seconds without any result and without a healthy env runner before a loop gives up.
    no_runner_timeout_s = 120.0
    #: Seconds without any result while nothing is in flight or queued (nothing can arrive) before
    #: a loop gives up: a bug (a job neither sent nor re-submitted), never a slow env.
    idle_timeout_s = 10.0

    def watch(self, progressed: bool, awaiting: str | None = None, busy_elsewhere: bool = False) -> None:
        """The one watchdog of every black-box loop; call once per polling round.

        A call in flight far longer than calls of its kind usually take (``AsyncJobPool.overdue``) is logged
        and counted (``blackbox/calls_overdue_lifetime``), not waited on silently; RLlib's health
        checks restart a runner that died. Without any healthy runner the loop fails loudly, and so
        does a loop that still waits while nothing is in flight or queued (no result can come).

        Args:
            progressed: Whether this round received a result.
            awaiting: What the loop waits for, for the error message (e.g. "12 of 40 returns of
                update 3").
            busy_elsewhere: Something other than the pool is still working for the loop (AES-RL's
                critic call): then an empty pool is not a hang.

        Raises:
            RuntimeError: No result for :attr:`no_runner_timeout_s` and no healthy env runner; or
                none for :attr:`idle_timeout_s` with nothing in flight or queued.
        """
        now = time.perf_counter()
        if progressed or getattr(self, "_last_progress", None) is None:
            self._last_progress = now
        idle = now - self._last_progress
        if (
            idle > self.idle_timeout_s
            and not busy_elsewhere
            and self.pool.num_in_flight == 0
            and self.pool.num_queued == 0
        ):
            raise RuntimeError(
                f"{algo_name(self)}: waited {idle:.0f} s for {awaiting or 'results'} with no call in flight or "
                f"queued, so none can arrive ({self._loop_state()})"
            )
        for runner, call, age in self.pool.overdue():
            typical = self.pool.typical_call_s(call)
            logger.warning(
                "rllib_ext: %s: env runner %d has not answered a call of %d job(s) (%s) for %.0f s (%s); "
                "still waiting on it",
                algo_name(self),
                runner,
                len(call.jobs),
                call.kind,
                age,
                "none of its kind has finished yet" if typical is None else f"such calls usually take {typical:.2f} s",
            )
        if idle > self.no_runner_timeout_s and not self.pool.num_healthy:
            raise RuntimeError(
                f"{algo_name(self)}: no healthy env runner for {self.no_runner_timeout_s:.0f} s while waiting for "
                f"{awaiting or 'results'} ({self._loop_state()})"
            )

    def _loop_state(self) -> str:
        """What a stuck loop's error says besides what it awaited: the update and what was dropped."""
        pool = self.pool
        return (
            f"update {self.update_index}; {pool.num_in_flight} call(s) in flight, {pool.num_queued} queued; "
            f"dropped so far: {pool.num_credit_mismatches} result(s) by the credit check, "
            f"{self.counters['returns_dropped_stale']} stale return(s), {self.counters['episodes_failed']} failed "
            f"episode(s), {pool.num_calls_lost} call(s) of runners that died"
        )

    @override(Algorithm)
    def restore_env_runners(self, env_runner_group: EnvRunnerGroup) -> list[int]:
        """RLlib's restore (before every training step; unhealthy runners are probed at most every
        ``PROBE_INTERVAL_S``: :class:`ThrottledEnvRunnerProbe`), then the pool takes RLlib's health
        of every runner: where failed runners come back, once per step rather than on every poll."""
        restored: list[int] = super().restore_env_runners(env_runner_group)
        if env_runner_group is self.env_runner_group and getattr(self, "pool", None) is not None:
            self.pool.sync_health()
        return restored

    def check_can_train(self) -> None:
        """Training evaluates on remote runners (a driver-only build is for `rllib evaluate`)."""
        if self.env_runner_group.num_remote_env_runners() < 1:
            raise ValueError(f"{type(self).__name__} needs num_env_runners >= 1 to train")

    def collect(self, timeout_s: float = 0.01) -> tuple[list[EpisodeResult], list[EpisodeResult]]:
        """(finished results, failed results), with filter deltas merged and failures counted.

        A failed episode (the env raised, or returned NaN/inf) is logged and counted, never used
        as a return; a job none of whose episodes succeeded is returned as failed, and the caller
        decides whether to re-submit it.
        """
        ok, failed = [], []
        for reply in self.pool.poll(timeout_s=timeout_s):
            self.obs_filter.merge(reply.obs_delta)
            for r in reply.results:
                # Every step the runner simulated: a failed episode's up to its failure (wasted).
                self.steps.total += r.length + r.failed_steps
                self.steps.wasted += r.failed_steps
                self.counters["episodes_capped"] += r.capped
                if r.episodes_failed:
                    self.counters["episodes_failed"] += r.episodes_failed
                    logger.warning(
                        "rllib_ext: %d episode(s) of job %d on env runner %s failed and are not used: %s",
                        r.episodes_failed,
                        r.id,
                        r.runner,
                        r.error,
                    )
                if r.failed:  # its other episodes' steps too: the job's return is not used
                    self.steps.wasted += r.length
                    failed.append(r)
                    continue
                if isinstance(r.job, EvaluationJob):  # θ_u (μ) itself, whatever the subclass does with it
                    self.steps.evaluation += r.length
                self.counters["env_steps"] += r.length
                self.counters["episodes"] += len(r.returns)
                ok.append(r)
        return ok, failed

    def observe_evaluations(self, returns: Iterable[float]) -> None:
        """Folds returns of the unperturbed θ into R̄, the running mean DSGD compares (Eq. 20–21).

        One signal for every black-box algorithm: R̄ ← a·R̄ + (1 − a)·R per evaluation return R, in
        the order they arrive, with a = ``eval_return_ema`` (the first return starts R̄). This is
        how the authors' code feeds its step-size controller (an exponential running mean of
        occasional unperturbed evaluations, AechPro/distrib-rl); paper 000 only says R(θ_u). DFD's
        evaluations arrive asynchronously and may be of a θ a few updates old, as there.
        """
        a = float(self.config.eval_return_ema)
        for r in returns:
            r = float(r)
            if np.isfinite(r):
                self.eval_return_ema = r if self.eval_return_ema is None else a * self.eval_return_ema + (1 - a) * r

    def apply_update(self, g_hat: np.ndarray) -> dict[str, float]:
        """Steps the learner's optimizer along ĝ, then publishes θ_{u+1}, u+1.

        DSGD is told R̄ (:meth:`observe_evaluations`) before the step, once per update; before the
        first evaluation it gets nothing and leaves η_u at η0.
        """
        reward = self.eval_return_ema
        if reward is not None:
            self.metrics.log_value((BLACKBOX, "eval_return_ema"), reward, reduce="mean", window=1)
        stats = self._on_learner(lambda learner: learner.apply_gradient_estimate(g_hat, reward))
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.update_index += 1
        self.publish()
        self.log_learner_stats(stats)
        return stats

    def log_learner_stats(self, stats: dict[str, float]) -> None:
        """The update's statistics under ``learners/<module_id>/``, where every RLlib algorithm
        reports its learner's (code written against RLlib's results reads them there), and the
        update count under ``learners/__all_modules__/``; ``blackbox/`` keeps them too."""
        m = self.metrics
        for key, value in stats.items():
            m.log_value((LEARNER_RESULTS, DEFAULT_MODULE_ID, key), float(value), reduce="mean", window=1)
        m.log_value((LEARNER_RESULTS, ALL_MODULES, "num_updates_lifetime"), self.update_index, reduce="max", window=1)

    def log_batch(self, results: list[EpisodeResult], since: float, busy_before: dict[int, float]) -> None:
        """Env-step/episode counters and return metrics under RLlib's keys, plus utilization.

        ``num_env_steps_sampled_lifetime`` is every step received (:attr:`steps`, with its
        breakdown); the return metrics are those of ``results`` (the update's rows).
        ``worker_utilization``: runner busy time / (runners × wall); ``useful_utilization``: the
        part of it spent on episodes whose returns this update used; ``updates_per_s``.
        """
        steps = int(sum(r.length for r in results))
        episodes = sum(len(r.returns) for r in results)
        m = self.metrics
        new_episodes = self.counters["episodes"] - self.counters.get("episodes_logged", 0)
        self.counters["episodes_logged"] = self.counters["episodes"]
        m.log_value((ENV_RUNNER_RESULTS, NUM_EPISODES_LIFETIME), new_episodes, reduce="lifetime_sum")
        self.steps.log(m)
        if results:
            returns = [x for r in results for x in r.returns]
            window = max(self.config.episodes_per_batch, 10)
            for key, value in (
                (EPISODE_RETURN_MEAN, float(np.mean(returns))),
                (EPISODE_LEN_MEAN, steps / max(episodes, 1)),
            ):
                m.log_value((ENV_RUNNER_RESULTS, key), value, reduce="mean", window=window)
            m.log_value((ENV_RUNNER_RESULTS, EPISODE_RETURN_MAX), float(np.max(returns)), reduce="max", window=window)
            m.log_value((ENV_RUNNER_RESULTS, EPISODE_RETURN_MIN), float(np.min(returns)), reduce="min", window=window)
        m.log_value(
            (BLACKBOX, "worker_utilization"),
            self.pool.utilization(since, busy_before, self.num_runners),
            reduce="mean",
            window=20,
        )
        # Runner time spent on episodes whose returns entered this update / (runners × wall).
        wall = max(time.perf_counter() - since, 1e-9)
        useful_s = sum(r.duration_s for r in results)
        self.counters["useful_runner_s"] += useful_s
        m.log_value((BLACKBOX, "env_steps_per_s"), steps / wall, reduce="mean", window=20)
        m.log_value((BLACKBOX, "useful_utilization"), useful_s / (self.num_runners * wall), reduce="mean", window=20)
        if self._t_first_update is None:
            self._t_first_update = since
        m.log_value(
            (BLACKBOX, "updates_per_s"),
            self.update_index / max(time.perf_counter() - self._t_first_update, 1e-9),
            reduce="mean",
            window=1,
        )
        m.log_value((BLACKBOX, "update_index"), self.update_index, reduce="max", window=1)
        for key in ("episodes_failed", "episodes_capped", "returns_dropped_stale"):
            m.log_value((BLACKBOX, key + "_lifetime"), self.counters[key], reduce="max", window=1)
        m.log_value((BLACKBOX, "runner_calls_lost_lifetime"), self.pool.num_calls_lost, reduce="max", window=1)
        m.log_value((BLACKBOX, "jobs_requeued_lifetime"), self.pool.num_jobs_requeued, reduce="max", window=1)
        m.log_value((BLACKBOX, "calls_overdue_lifetime"), self.pool.num_calls_overdue, reduce="max", window=1)
        m.log_value((BLACKBOX, "credit_mismatches_lifetime"), self.pool.num_credit_mismatches, reduce="max", window=1)
        m.log_value((BLACKBOX, "num_healthy_env_runners"), self.pool.num_healthy, reduce="mean", window=1)

    # -- checkpoints ------------------------------------------------------------------------
    def restore_steps(self, own: dict[str, Any]) -> None:
        """The step account of a checkpoint; one written before it had only the used steps,
        which the restored ``num_env_steps_sampled_lifetime`` already holds."""
        if "steps" in own:
            self.steps.set_state(own["steps"])
        else:
            total = int(self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
            self.steps.set_state({"total": total, "used": total, "logged": total})
        self.counters.setdefault("episodes_logged", self.counters.get("episodes", 0))

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _set_extra_state(self, state: dict[str, Any]) -> None:
        pass

    @override(Algorithm)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> StateDict:
        state = super().get_state(components, not_components=not_components, **kwargs)
        state[BLACKBOX] = {
            "update_index": self.update_index,
            "batch_seed": self.batch_seed,
            "obs_filter": self.obs_filter.get_state(),
            "counters": dict(self.counters),
            "steps": self.steps.get_state(),
            "eval_return_ema": self.eval_return_ema,
            "extra": self._extra_state(),
        }
        return state

    @override(Algorithm)
    def set_state(self, state: StateDict) -> None:
        super().set_state(state)
        own = state.get(BLACKBOX)
        if own is not None:
            self.update_index = own["update_index"]
            self.batch_seed = own["batch_seed"]
            self.obs_filter.set_state(own["obs_filter"])
            self.counters.update(own["counters"])
            self.restore_steps(own)
            self.eval_return_ema = own.get("eval_return_ema")  # absent in checkpoints before it
            self._set_extra_state(own["extra"])
        self.theta = self._on_learner(lambda learner: learner.get_flat())
        self.publish()

    @override(Algorithm)
    def cleanup(self) -> None:
        try:
            self.pool.drain(timeout_s=10.0)
        except Exception:  # noqa: BLE001 - shutting down; a dead runner must not block stop()
            pass
        super().cleanup()
