"""The off-policy ``training_step`` TD3_EXT and the ReF-ER family (VRACER_EXT, DDPG_EXT, NAF_EXT) share.

One :meth:`OffPolicyAlgorithm.training_step`:

1. RLlib's env runners (``SingleAgentEnvRunner``; the local one when ``num_env_runners=0``)
   sample ``rollout_fragment_length`` steps each, synchronously (hook :meth:`_sample_kwargs`:
   TD3's uniform random actions during ``initial_steps``); every sampled step enters the replay;
2. the chunks go to each Learner (a :class:`~rllib_ext.common.offpolicy.learner.ReplayLearner`),
   which stores them and takes the updates they make due, answering with an
   :class:`~rllib_ext.common.offpolicy.learner.UpdateReport`; the reports' metrics are
   aggregated under ``learners``;
3. when the weights changed: a check that no Learner parameter is NaN/inf, then the weights go
   back to the env runners.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.learner.learner_group import LearnerGroup
from ray.rllib.env.env_runner_group import EnvRunnerGroup
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_ext._compat import sample_episodes_and_metrics
from rllib_ext.common.fault_tolerance import ThrottledEnvRunnerProbe
from rllib_ext.common.guards import FiniteParametersGuard, assert_finite_learner_parameters
from rllib_ext.common.offpolicy.learner import ReplayLearner, UpdateReport
from rllib_ext.common.steps import log_all_used


class OffPolicyAlgorithm(FiniteParametersGuard, ThrottledEnvRunnerProbe, Algorithm):
    """Sample, store and update in the Learner, check, sync (see the module docstring)."""

    # Set by Algorithm.setup before any training_step (RLlib types them Optional).
    config: AlgorithmConfig
    metrics: MetricsLogger
    env_runner_group: EnvRunnerGroup
    learner_group: LearnerGroup

    @override(Algorithm)
    def training_step(self) -> None:
        """Samples env steps, hands them to the Learners (replay, updates), syncs changed weights."""
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = sample_episodes_and_metrics(
                self.env_runner_group, sample_timeout_s=self.config.sample_timeout_s, **self._sample_kwargs()
            )
        self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        log_all_used(self.metrics)  # every sampled step enters the replay (warm-up included)

        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            reports: list[UpdateReport] = [
                r.get() for r in self.learner_group.foreach_learner(partial(_train_on_episodes, episodes=episodes))
            ]
        results = [r.results for r in reports if r.results]
        if results:
            self.metrics.aggregate(results, key=LEARNER_RESULTS)
        if any(r.weights_changed for r in reports):
            assert_finite_learner_parameters(self, "before syncing them to the env runners")
            with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
                self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group, inference_only=True)

    def _sample_kwargs(self) -> dict[str, Any]:
        """Further ``synchronous_parallel_sample`` arguments for this step (default: none)."""
        return {}


def _train_on_episodes(learner: ReplayLearner, episodes: list[Any]) -> UpdateReport:
    """What each Learner runs (through ``foreach_learner``)."""
    return learner.train_on_episodes(episodes)
