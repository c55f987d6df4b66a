"""ES_EXT: evolution strategies (Salimans et al. 2017) as described in paper 000 §2.2.

The baseline of the DFD paper (``../shared/papers/000_918eb0e7bb8ca864.txt``), with the
perturbation samplers of paper 002 §4 (``002_0511cdacd6792c57.txt``):

    ĝ = 1/(σN) Σ_i F(R(θ_u + σε_i)) ε_i                                   Eq. (7)–(8), paper 000 §2.2

with F the return shaping (centered ranks by default), ε_i from the chosen sampler
(antithetic pairs by default), and the step taken by the optimizer chosen by name
(``adam`` default, ``sgd`` = Eq. (2), ``msgd`` = Eq. (19), ``dsgd`` = Eq. (20)–(22)).

ES is synchronous by design: update u waits for all N returns of θ_u. A return computed for an
older θ (possible only when a runner died with calls of an earlier batch) is dropped and counted —
the idle time and waste that DFD_EXT removes; ``blackbox/worker_utilization`` shows it.
"""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BLACKBOX, BlackBoxAlgorithm, BlackBoxConfig
from rllib_ext.common.blackbox.es_gradient import es_gradient
from rllib_ext.common.blackbox.protocol import EpisodeResult
from rllib_ext.common.blackbox.shaping import shape_returns
from rllib_ext.common.validation import algo_name

# A batch whose episodes keep failing (env raising, NaN) must not loop forever.
MAX_FAILURES_PER_BATCH_FACTOR = 3


class ESConfig(BlackBoxConfig):
    """Config of ES_EXT; every setting is documented on :class:`BlackBoxConfig`.

    σ 0.02, N 40, Adam with η 0.01, the 64-64 tanh network and observation standardization clipped
    to ±5 are paper 000 Table 3's. The policy head (deterministic) and the return shaping (centered
    ranks) are Salimans et al.'s ES; ``configs/es.yaml`` sets Table 3's (2A Gaussian, standardized
    returns, 10 evaluation episodes) and says why each differs.

    Example:
        >>> from rllib_ext import ESConfig
        >>> config = ESConfig().environment("CartPole-v1").training(sampler="orthogonal")
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or ES)


class ES(BlackBoxAlgorithm):
    """Synchronous ES: perturb, wait for all N returns, estimate ĝ, step, publish θ_{u+1}.

    Subclasses with another estimator from the same synchronous batch (CVES_EXT) override
    :meth:`estimate_gradient`.
    """

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> ESConfig:
        return ESConfig()

    def evaluate_batch(self, seed: int, n: int) -> tuple[list[EpisodeResult], list[float]]:
        """Evaluates rows 0..n−1 of batch ``seed`` of θ_u (and ``eval_episodes`` of θ_u); waits for all.

        A failed job — an env that raised or returned NaN, or a result the credit check refused —
        is re-run (at most ``MAX_FAILURES_PER_BATCH_FACTOR``·n per batch), so the batch never
        waits for a row nothing will deliver; :meth:`watch` fails the loop if it ever does.
        Every result is measured at the θ its job was submitted with (the pool re-sends a
        lost call with its own payload), so after a runner loss a job of an older θ can only be
        one of an earlier batch: such calls are dropped from the queue, and their results if any
        arrive, counted. CVES_EXT reuses this for its batches.

        Returns:
            (the result of each row, in row order; the returns of θ_u itself).
        """
        u, name = self.update_index, algo_name(self)
        self.submit_perturbations(seed, n)
        eval_ids = set(self.submit_unperturbed(self.config.eval_episodes))
        by_index, evals = {}, []
        failures = 0
        self.watch(True)
        while len(by_index) < n or len(evals) < len(eval_ids):
            self.pool.drop_queued(lambda call: call.version != u)  # re-queued calls of an earlier batch
            ok, failed = self.collect(timeout_s=0.05)
            for r in ok:
                if r.version != u:
                    self.counters["returns_dropped_stale"] += 1
                    if r.index is not None:  # an evaluation's steps stay booked as evaluation
                        self.steps.wasted += r.length
                elif r.index is None:
                    evals.append(r.ret)
                elif r.index in by_index:  # a duplicate (cannot happen today; never counted twice)
                    self.steps.wasted += r.length
                else:
                    by_index[r.index] = r
            for r in failed:  # re-run the job (on a fresh env, or with the right θ)
                if r.version != u:
                    continue  # of an earlier batch: not needed any more
                failures += 1
                if failures > MAX_FAILURES_PER_BATCH_FACTOR * n:
                    why = (
                        "env runners keep answering with other parameters than the version (a bug)"
                        if r.credit_mismatch
                        else "the env keeps failing — see the env runner logs"
                    )
                    raise RuntimeError(f"{name}: {failures} jobs failed in update {u} (last: {r.error}); {why}")
                if r.index is None:
                    self.submit_unperturbed(1)
                else:
                    self.submit_perturbations(seed, n, [r.index])
            self.watch(
                bool(ok or failed),
                awaiting=f"{n - len(by_index)} of {n} perturbation returns and {len(eval_ids) - len(evals)} "
                f"evaluation(s) of update {u}",
            )
        return [by_index[i] for i in range(n)], evals

    @override(Algorithm)
    def training_step(self) -> None:
        self.check_can_train()
        cfg = self.config
        since, busy_before = self.pool.snapshot()
        seed = self.next_batch_seed()
        rows, evals = self.evaluate_batch(seed, cfg.episodes_per_batch)
        self.steps.used += int(sum(r.length for r in rows))

        g_hat, info = self.estimate_gradient(seed, rows)
        returns = self.row_returns(rows)
        self.observe_evaluations(evals)  # DSGD's R̄
        stats = self.apply_update(g_hat)

        self.log_batch(rows, since, busy_before)
        m = self.metrics
        m.log_value((BLACKBOX, "perturbed_return_mean"), float(np.mean(returns)), reduce="mean", window=1)
        if evals:
            m.log_value((BLACKBOX, "eval_return_mean"), float(np.mean(evals)), reduce="mean", window=1)
        for key, value in {**stats, **info}.items():
            m.log_value((BLACKBOX, key), value, reduce="mean", window=1)
        m.log_value((BLACKBOX, "updates_lifetime"), self.update_index, reduce="max", window=1)

    @staticmethod
    def row_returns(rows: list[EpisodeResult]) -> np.ndarray:
        """The return of each row (a perturbation's mean over its ``episodes_per_job`` episodes)."""
        return np.array([r.ret for r in rows], dtype=np.float64)

    def estimate_gradient(self, seed: int, rows: list[EpisodeResult]) -> tuple[np.ndarray, dict[str, float]]:
        """The ascent estimate ĝ of update u from the results of batch ``seed``, in row order.

        Returns:
            (ĝ with θ's layout; extra metrics logged under ``blackbox/``).
        """
        cfg = self.config
        returns = self.row_returns(rows)
        eps = self.perturbations(rows)  # noise-table slices or regenerated rows (seeded path)
        return es_gradient(shape_returns(returns, cfg.return_shaping), eps, float(cfg.noise_stdev)), {}  # Eq. (8)
