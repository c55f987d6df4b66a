"""One rule for env steps in every family: each step the algorithm itself simulates is counted.

``env_runners/num_env_steps_sampled_lifetime`` (and Tune's ``timesteps_total``, which reads it) is
the total of every env step any runner (or the driver) stepped for the algorithm: perturbations,
evaluations of the unperturbed θ or of μ, warm-up, returns dropped as stale or by the credit check,
failed episodes up to their failure. Measurement-only evaluation (RLlib's ``evaluation/``, a race
harness's own episodes) stays counted apart, as RLlib does. Budgets compare across families only
on this total (design.md, convention 12).

Next to it, under the same ``env_runners/`` prefix and with the same names in every family, a
breakdown says where the steps went:

- ``env_steps_used_lifetime``: steps of episodes whose outcome entered an update (ES's rows, DFD's
  batches, AES-RL's told individuals, a replay's transitions, IMPACT's train batches);
- ``env_steps_evaluation_lifetime``: steps the algorithm spends evaluating its current parameters
  for itself (ES's θ_u episodes for DSGD's R̄, AES-RL's f(μ) re-evaluations);
- ``env_steps_wasted_lifetime``: steps whose outcome was thrown away (stale or dropped returns,
  failed episodes up to their failure, duplicates, batches a full queue dropped);
- ``env_steps_pending``: steps received but not yet used or dropped (DFD's carried-over returns,
  AES-RL's individuals waiting for f(μ)); the four always sum to the total.

Steps a runner simulated in a call that never answered (the runner died mid-call) are unknown to
the driver and not counted; the lost calls are (``blackbox/runner_calls_lost_lifetime``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_SAMPLED_LIFETIME

if TYPE_CHECKING:
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

ENV_STEPS_USED_LIFETIME = "env_steps_used_lifetime"
ENV_STEPS_EVALUATION_LIFETIME = "env_steps_evaluation_lifetime"
ENV_STEPS_WASTED_LIFETIME = "env_steps_wasted_lifetime"
ENV_STEPS_PENDING = "env_steps_pending"
#: Env steps an RLlib env runner took whose episodes RLlib dropped after a failed env step
#: (``common.guards.FiniteSingleAgentEnvRunner``); booked as wasted.
NUM_ENV_STEPS_DROPPED_LIFETIME = "num_env_steps_dropped_lifetime"
#: The same per ``sample()`` call (a sum), so that a driver can tell the steps inside its episodes.
NUM_ENV_STEPS_DROPPED = "num_env_steps_dropped"

#: The breakdown's metric names (under ``env_runners/``), in the order reports show them.
BREAKDOWN_KEYS = (ENV_STEPS_USED_LIFETIME, ENV_STEPS_EVALUATION_LIFETIME, ENV_STEPS_WASTED_LIFETIME, ENV_STEPS_PENDING)


@dataclasses.dataclass
class StepAccount:
    """Where the env steps an algorithm simulated went (the driver's ledger).

    ``total`` grows when steps are received (every reply, whatever becomes of its results);
    ``used``, ``evaluation`` and ``wasted`` when the algorithm decides; ``pending`` is the rest.

    Attributes:
        total: Every env step received from runners.
        used: Steps whose outcome entered an update.
        evaluation: Steps of the algorithm's own evaluations of its current parameters.
        wasted: Steps whose outcome was thrown away.
        logged: The part of ``total`` already logged to ``num_env_steps_sampled_lifetime``.
    """

    total: int = 0
    used: int = 0
    evaluation: int = 0
    wasted: int = 0
    logged: int = 0

    @property
    def pending(self) -> int:
        """Steps received but neither used, evaluation, nor wasted yet."""
        return self.total - self.used - self.evaluation - self.wasted

    def log(self, metrics: MetricsLogger) -> None:
        """Logs the steps received since the last call under RLlib's keys, and the breakdown."""
        new, self.logged = self.total - self.logged, self.total
        metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), new, reduce="lifetime_sum")
        metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED), new, reduce="sum")
        log_breakdown(metrics, used=self.used, evaluation=self.evaluation, wasted=self.wasted, pending=self.pending)

    def get_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def set_state(self, state: dict[str, Any]) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, int(state.get(field.name, 0)))


def log_breakdown(metrics: MetricsLogger, *, used: int, evaluation: int = 0, wasted: int = 0, pending: int = 0) -> None:
    """The breakdown next to ``num_env_steps_sampled_lifetime`` (lifetime values, not deltas)."""
    for key, value in zip(BREAKDOWN_KEYS, (used, evaluation, wasted, pending), strict=True):
        metrics.log_value((ENV_RUNNER_RESULTS, key), int(value), reduce="max", window=1)


def log_all_used(metrics: MetricsLogger, wasted: int = 0, pending: int = 0) -> None:
    """The breakdown of a family on RLlib's env runners, whose every sampled step enters its
    learner (replay, train batch) but ``wasted`` ones (e.g. batches a full queue dropped) and the
    episodes RLlib dropped after a failed env step (``FiniteSingleAgentEnvRunner``); read after
    the runners' metrics were aggregated into ``num_env_steps_sampled_lifetime``."""
    total = int(metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
    dropped = int(metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_DROPPED_LIFETIME), default=0))
    wasted = int(wasted) + dropped
    log_breakdown(metrics, used=total - wasted - int(pending), wasted=wasted, pending=int(pending))


def steps_in_episodes(runner_metrics: dict[str, Any]) -> int:
    """Env steps in the episodes of one RLlib ``sample()`` call, from the metrics the runner
    returned with them (its sampled steps, less those of episodes it dropped after a failure)."""

    def value(key: str) -> int:
        stat = runner_metrics.get(key, 0)
        value = stat.peek() if hasattr(stat, "peek") else stat
        return int(value) if math.isfinite(value) else 0  # a sum with nothing logged this call: NaN

    return value(NUM_ENV_STEPS_SAMPLED) - value(NUM_ENV_STEPS_DROPPED)
