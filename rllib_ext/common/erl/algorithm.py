"""ERLAlgorithm: the driver base of AESRL_EXT and CEMRL_EXT (replay actor, critic worker, publishing μ)."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
from ray.rllib.utils.typing import StateDict
from ray.tune.execution.placement_groups import PlacementGroupFactory

from rllib_ext.common.blackbox import BLACKBOX, BlackBoxAlgorithm
from rllib_ext.common.blackbox.protocol import EpisodeResult, IndividualJob
from rllib_ext.common.erl.config import ERLConfig
from rllib_ext.common.erl.critic_worker import CriticHandle, critic_worker_actor
from rllib_ext.common.erl.env_runner import box_dim
from rllib_ext.common.erl.protocol import CriticReply, ERLPayload, ERLResult
from rllib_ext.common.offpolicy.transitions import ReplayHandle, replay_actor
from rllib_ext.common.waits import get_within

logger = logging.getLogger(__name__)

#: Seconds the liveness probe after a critic error waits for the replay actor's size; no answer in
#: time means busy, not dead (only a RayActorError re-creates it).
REPLAY_SIZE_TIMEOUT_S = 10

#: The family's counters, each logged as ``blackbox/<name>_lifetime`` (``rl_train_s``: runner seconds
#: of RL individuals' actor training; ``rl_actor_steps``: their actor steps).
LIFETIME_COUNTERS = (
    "individual_steps",
    "critic_steps",
    "critic_worker_restarts",
    "replay_actor_restarts",
    "n_rl",
    "n_es",
    "rl_actor_steps",
    "rl_train_s",
)


_T = TypeVar("_T")


def check_gpus(config: ERLConfig) -> None:
    """Before any actor starts: the GPUs that the critic worker and the env runners ask for exist.

    Raises:
        ValueError: The cluster has fewer GPUs than ``critic_num_gpus`` + ``num_env_runners`` ×
            ``num_gpus_per_env_runner``; the message names both settings.
    """
    critic = float(config.critic_num_gpus)
    runners = int(config.num_env_runners or 0) * float(config.num_gpus_per_env_runner or 0)
    if critic + runners <= 0 or not ray.is_initialized():
        return
    have = ray.cluster_resources().get("GPU", 0)
    if have < critic + runners:
        raise ValueError(
            f"critic_num_gpus={critic:g} and num_gpus_per_env_runner={config.num_gpus_per_env_runner:g} × "
            f"{config.num_env_runners} env runners ask for {critic + runners:g} GPUs but the Ray cluster has {have:g}: "
            "set critic_num_gpus=0 to train the critic on the CPU, num_gpus_per_env_runner=0 to train the RL "
            "individuals on the runners' CPUs"
        )


class ERLAlgorithm(BlackBoxAlgorithm):
    """Driver base of AESRL_EXT and CEMRL_EXT: replay actor, critic worker, μ publishing.

    Subclasses hold the population (``self.mu``, ``self.var``) and implement ``training_step``.
    A lost critic worker or replay actor is re-created (logged and counted under
    ``blackbox/critic_worker_restarts_lifetime`` / ``replay_actor_restarts_lifetime``): the
    critic from its last weights (its optimizer state is lost), the replay empty.
    """

    # Set by Algorithm.setup before setup_state (RLlib types them Optional).
    config: ERLConfig  # narrows BlackBoxAlgorithm.config
    metrics: MetricsLogger
    spaces: dict[str, tuple[gym.Space[Any], gym.Space[Any]]]

    @classmethod
    @override(Algorithm)
    def default_resource_request(cls, config: AlgorithmConfig | dict[str, Any]) -> PlacementGroupFactory:
        """RLlib's bundles plus one for the critic worker when it reserves CPUs or GPUs, so that under
        Tune the critic is placed inside the trial's placement group."""
        request = super().default_resource_request(config)
        if not isinstance(request, PlacementGroupFactory):  # RLlib's new stack asks for bundles
            raise TypeError(f"RLlib's resource request is a {type(request).__name__}, not a PlacementGroupFactory")
        config = cls.get_default_config().update_from_dict(config) if isinstance(config, dict) else config
        if not isinstance(config, ERLConfig):
            raise TypeError(f"{cls.__name__} takes an ERLConfig, got a {type(config).__name__}")
        critic = {"CPU": float(config.critic_num_cpus), "GPU": float(config.critic_num_gpus)}
        critic = {k: v for k, v in critic.items() if v > 0}
        if not critic:
            return request
        return PlacementGroupFactory(bundles=[*request.bundles, critic], strategy=request.strategy)

    @override(BlackBoxAlgorithm)
    def setup(self, config: AlgorithmConfig) -> None:  # type: ignore[override]  # Tune's Trainable.setup: a dict
        if not isinstance(config, ERLConfig):
            raise TypeError(f"{type(self).__name__} takes an ERLConfig, got a {type(config).__name__}")
        check_gpus(config)  # before any actor starts
        super().setup(config)

    @override(BlackBoxAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        obs_space, act_space = self.spaces[DEFAULT_MODULE_ID]
        self._obs_dim, self._act_space = box_dim(obs_space), act_space
        self.mu = self.theta.copy()
        self.var = np.full_like(self.mu, float(self.config.sigma_init))
        self.counters.update(dict.fromkeys(LIFETIME_COUNTERS, 0))
        self._last_critic: dict[str, np.ndarray] | None = None
        self.critic_ref: ray.ObjectRef[dict[str, np.ndarray]] | None = None  # latest critic weights (object store)
        self._make_replay()
        self._make_critic()

    def _make_replay(self) -> None:
        seed = None if self.config.seed is None else int(self.config.seed) + 17
        self.replay: ReplayHandle = replay_actor(
            int(self.config.replay_capacity), self._obs_dim, box_dim(self._act_space), seed
        )
        # The replay_size metric's call in flight, asked now so that the first iteration can log it
        # (and, after a re-creation, so that no call to the dead actor re-creates the new one).
        self._replay_size_ref: ray.ObjectRef[int] | None = self.replay.size.remote()

    def _make_critic(self) -> None:
        self.critic: CriticHandle = critic_worker_actor(
            self._obs_dim,
            self._act_space,
            self.config.td3_settings,
            self.replay,
            self.config.seed,
            num_cpus=self.config.critic_num_cpus,
            num_gpus=self.config.critic_num_gpus,
        )
        if self._last_critic is not None:
            weights = self._last_critic
            get_within(
                self.critic.set_state.remote({"critic": weights, "critic_target": weights}),
                "the critic worker's set_state",
            )

    def recover_actor(self, which: str, error: Exception) -> None:
        """Re-creates a lost replay actor or critic worker (logged, counted)."""
        logger.warning("rllib_ext: the %s died (%s); re-creating it", which, error)
        if which == "replay actor":
            self.counters["replay_actor_restarts"] += 1
            self._make_replay()
            try:
                get_within(self.critic.set_replay.remote(self.replay), "the critic worker's set_replay")
            except ray.exceptions.RayError:
                self.recover_actor("critic worker", error)
            self.publish()
        else:
            self.counters["critic_worker_restarts"] += 1
            self._make_critic()

    def critic_result(self, ref: ray.ObjectRef[CriticReply]) -> CriticReply | None:
        """The reply to a critic ``train`` call, or None (and recovery) if an actor died."""
        try:
            out: CriticReply = get_within(ref, "the critic worker's train call")
        except ray.exceptions.RayActorError as e:
            alive = self._replay_alive()
            self.recover_actor("critic worker" if alive else "replay actor", e)
            return None
        except ray.exceptions.RayTaskError as e:
            if self._replay_alive():
                raise  # a real error in the critic's code: fail loudly
            self.recover_actor("replay actor", e)  # it died under the critic's sample call
            return None
        if not out.steps or out.critic is None:
            return out  # the replay holds less than one minibatch: nothing trained
        self._last_critic = out.critic
        self.critic_ref = ray.put(out.critic)
        self.counters["critic_steps"] += int(out.steps)
        m = self.metrics
        for key, value in out.stats.items():
            m.log_value((BLACKBOX, key), value, reduce="mean", window=20)
        # The critic is the family's gradient learner: its statistics also where RLlib reports a learner's.
        scalars = [key for key, value in out.stats.items() if np.isscalar(value)]
        self.log_learner_stats({key: out.stats[key] for key in scalars})
        m.log_value((BLACKBOX, "critic_updates_per_s"), out.steps / max(out.train_s, 1e-9), reduce="mean", window=20)
        return out

    @override(BlackBoxAlgorithm)
    def collect(self, timeout_s: float = 0.01) -> tuple[list[EpisodeResult], list[EpisodeResult]]:
        """BlackBoxAlgorithm.collect, plus what each RL individual's actor training cost on its runner.

        Its seconds (fetching z, the critic and the replay minibatches, and the TD3 actor steps) are
        counted for every RL job, failed ones too; its actor steps only where the training finished
        (the trained parameters came back), and its mean actor loss where that is also finite.
        """
        ok, failed = super().collect(timeout_s)
        m = self.metrics
        for r in (*ok, *failed):
            if not (isinstance(r, ERLResult) and r.rl):
                continue
            self.counters["rl_train_s"] += float(r.train_s)
            m.log_value((BLACKBOX, "rl_train_s"), float(r.train_s), reduce="mean", window=20)
            if r.params is None or not isinstance(r.job, IndividualJob):  # an RL result's job is an individual's
                continue
            self.counters["rl_actor_steps"] += int(r.job.rl_steps)
            if np.isfinite(r.actor_loss):  # a diverged one is counted by the subclass (individuals_failed)
                m.log_value((BLACKBOX, "rl_actor_loss"), float(r.actor_loss), reduce="mean", window=20)
        return ok, failed

    def _replay_alive(self) -> bool:
        """False only if the replay actor is dead. A slow answer (a loaded machine, a long sample call
        queued ahead) is not death: re-creating a live replay would throw its transitions away."""
        try:
            ray.get(self.replay.size.remote(), timeout=REPLAY_SIZE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            return True
        except ray.exceptions.RayActorError:
            return False
        return True

    @override(BlackBoxAlgorithm)
    def make_payload(self) -> ERLPayload:
        """(μ, σ², replay handle) of update u."""
        return ERLPayload(theta=self.mu, var=self.var, replay=self.replay)

    @override(BlackBoxAlgorithm)
    def publish(self) -> None:
        """Publishes update u's population (μ as θ) to the runners."""
        self.theta = self.mu
        super().publish()

    def check_finite_population(self) -> None:
        """Raises FloatingPointError if μ or σ² went non-finite (never published to runners)."""
        if not (np.isfinite(self.mu).all() and np.isfinite(self.var).all()):
            raise FloatingPointError(f"{type(self).__name__}: the population mean or variance became NaN/inf")

    def sync_mu_to_learner(self) -> None:
        """Writes μ into the learner's module, so RLlib's checkpoints and `rllib evaluate` use it."""
        mu = self.mu
        self._on_learner(lambda learner: learner._policy_module().set_flat(mu))

    def free_slots(self) -> int:
        return int(self.pool.num_healthy * self.pool.jobs_in_flight - self.pool.num_in_flight - self.pool.num_queued)

    def log_common(self) -> None:
        m = self.metrics
        m.log_value((BLACKBOX, "sigma_mean"), float(np.sqrt(self.var).mean()), reduce="mean", window=1)
        m.log_value((BLACKBOX, "sigma_max"), float(np.sqrt(self.var).max()), reduce="mean", window=1)
        m.log_value((BLACKBOX, "mu_norm"), float(np.linalg.norm(self.mu)), reduce="mean", window=1)
        for key in LIFETIME_COUNTERS:
            m.log_value((BLACKBOX, key + "_lifetime"), self.counters[key], reduce="max", window=1)
        self.log_learner_stats({"critic_steps_lifetime": self.counters["critic_steps"]})
        # The size is asked for without waiting (the driver loop must not stall behind the replay
        # actor's queue of sample calls) and logged once answered, in this or a later iteration.
        ref = self._replay_size_ref
        if ref is not None:
            if not ray.wait([ref], timeout=0)[0]:
                return  # busy, not dead: still waiting for its answer
            try:
                m.log_value((BLACKBOX, "replay_size"), ray.get(ref), reduce="mean", window=1)
            except ray.exceptions.RayActorError as e:
                self.recover_actor("replay actor", e)  # _make_replay asks the new actor's size
                return
        self._replay_size_ref = self.replay.size.remote()

    # -- checkpoints --------------------------------------------------------------------------
    @override(BlackBoxAlgorithm)
    def _extra_state(self) -> dict[str, Any]:
        critic = get_within(self.critic.get_state.remote(), "the critic worker's get_state")
        state = {"mu": self.mu.copy(), "var": self.var.copy(), "critic": critic}
        if self.config.checkpoint_replay:
            state["replay"] = get_within(self.replay.get_state.remote(), "the replay actor's get_state")
        return state

    @override(BlackBoxAlgorithm)
    def _set_extra_state(self, state: dict[str, Any]) -> None:
        self.mu = np.asarray(state["mu"], dtype=np.float32)
        self.var = np.asarray(state["var"], dtype=np.float32)
        get_within(self.critic.set_state.remote(state["critic"]), "the critic worker's set_state")
        self._last_critic = state["critic"]["critic"]
        # RL individuals need replay data: without restored contents they wait for new critic steps.
        self.critic_ref = None
        if "replay" in state:
            get_within(self.replay.set_state.remote(state["replay"]), "the replay actor's set_state")
            if self.counters.get("critic_steps"):
                self.critic_ref = ray.put(self._last_critic)

    @override(BlackBoxAlgorithm)
    def get_state(
        self,
        components: str | Collection[str] | None = None,
        *,
        not_components: str | Collection[str] | None = None,
        **kwargs: Any,
    ) -> StateDict:
        self.sync_mu_to_learner()
        return super().get_state(components, not_components=not_components, **kwargs)

    @override(BlackBoxAlgorithm)
    def set_state(self, state: StateDict) -> None:
        Algorithm.set_state(self, state)
        own = state.get(BLACKBOX)
        if own is not None:
            self.update_index = own["update_index"]
            self.batch_seed = own["batch_seed"]
            self.counters.update(own["counters"])
            self.restore_steps(own)
            self._set_extra_state(own["extra"])
        self.publish()
