"""The black-box engine shared by ES_EXT, DFD_EXT, CVES_EXT (and AES-RL's evaluations).

Pieces, each an RLlib component so that RLlib manages, checkpoints and restarts it:

- :class:`BlackBoxConfig` (``config.py``): the settings every black-box algorithm shares (policy, σ, sampler,
  shaping, optimizer, observation filter, jobs in flight) and their checks.
- :class:`BlackBoxRLModule` (``rl_module.py``): the policy (:class:`~rllib_ext.common.policies.MLPPolicy`) as a
  TorchRLModule, so RLlib's learner group owns θ and its checkpoints.
- :class:`BlackBoxLearner` (``learner.py``): the central "learner": applies a gradient *estimate* ĝ (computed
  from returns, not backprop) with the optimizer chosen by name; its optimizer state is
  checkpointed by RLlib.
- :class:`BlackBoxEnvRunner` (``env_runner.py``): an RLlib ``EnvRunner`` whose episode loop is a plain gymnasium +
  torch loop (RLlib's SingleAgentEnvRunner costs ~0.8 ms per step here, 4–9× a plain loop; see
  benchmarks/es_throughput.py). Plugged in with ``env_runner_cls`` so RLlib's EnvRunnerGroup
  health-checks and restarts it.
- :class:`BlackBoxAlgorithm` (``algorithm.py``): the driver side every black-box algorithm shares: publishing
  (θ_u, u, observation filter), the async job pool, merging filter deltas, evaluating θ_u, the
  watchdog, metrics.
- ``protocol.py``: the typed messages (Job, Call, Payload, EpisodeResult, Reply).
- ``pool.py``: :class:`AsyncJobPool`, the driver's asynchronous job pool (credit, re-queueing, overdue calls).
- ``obs_filter.py``: the observation filter the runners update and the driver merges.
- ``samplers.py``: the perturbation samplers, ε reproducible from (batch seed, index) on driver and runners.
- ``shaping.py``: return shaping by name (centered ranks, standardize, none).
- ``es_gradient.py``: the ES gradient estimate ĝ from a batch of perturbations and their returns.

**Low bandwidth.** A call carries the update index u, a reference to u's Payload (θ_u, filter
state) that the runner fetches once per u, and perturbation ids ``(batch seed, n, index)``; the
runner regenerates ε_index from the sampler. A result is the job plus its return, length and
timing, with the runner's observation-statistics delta per call — never a noise vector.
"""

from rllib_ext.common.blackbox.algorithm import BLACKBOX, BlackBoxAlgorithm
from rllib_ext.common.blackbox.config import BlackBoxConfig
from rllib_ext.common.blackbox.env_runner import (
    EVALUATION_STREAM,
    PERTURBATION_STREAM,
    BlackBoxEnvRunner,
    EpisodeFailed,
    EpisodeRecord,
    episode_seed,
)
from rllib_ext.common.blackbox.learner import BlackBoxLearner
from rllib_ext.common.blackbox.protocol import (
    Call,
    EpisodeResult,
    EvaluationJob,
    IndividualJob,
    Job,
    Payload,
    PerturbationJob,
    Reply,
)
from rllib_ext.common.blackbox.rl_module import BlackBoxRLModule

__all__ = [
    "BLACKBOX",
    "EVALUATION_STREAM",
    "PERTURBATION_STREAM",
    "BlackBoxAlgorithm",
    "BlackBoxConfig",
    "BlackBoxEnvRunner",
    "BlackBoxLearner",
    "BlackBoxRLModule",
    "Call",
    "EpisodeResult",
    "EvaluationJob",
    "IndividualJob",
    "Job",
    "Payload",
    "PerturbationJob",
    "Reply",
    "EpisodeFailed",
    "EpisodeRecord",
    "episode_seed",
]
