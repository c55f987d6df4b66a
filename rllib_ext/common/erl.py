"""Evolutionary RL runtime shared by AESRL_EXT and CEMRL_EXT (paper 001).

Lee et al. 2020, ``../shared/papers/001_6bf500f1c5f7a9b5.txt``, Fig. 2 and App. B. Three kinds
of Ray actors, all on top of the black-box engine (:mod:`rllib_ext.common.blackbox`):

- **Env runners** (:class:`ERLEnvRunner`, RLlib ``EnvRunner``\\ s managed and restarted by the
  EnvRunnerGroup): evaluate an *individual* (actor parameters z) for one episode with action
  noise a_noise (Algorithm 2; ``action_noise``), push its transitions to the replay actor, return (job id, f(z),
  length). An *RL individual* is first trained against the shared critic's weights with the TD3
  actor loss (``rl_steps`` Adam steps on replay minibatches, a fresh optimizer each time, as the
  reference code does), and its trained parameters come back (the one d-vector result). A
  *mean* job evaluates the population mean μ under the same action noise, without storing its
  transitions (f(μ), see AESRL's ``mean_fitness``).
- **The replay actor** (:data:`~rllib_ext.common.transitions.ReplayActor`, capacity 2e5,
  App. C.1): filled by every evaluation, sampled by the critic worker and RL individuals.
- **The critic worker** (:class:`CriticWorker`): the shared TD3 twin critic, trained in its own
  process (AES-RL: continuously, in parallel; CEM-RL: between generations).

**Low bandwidth.** An ES individual travels as a seed: z = μ + √var ⊙ ε(seed), regenerated on
the runner from the (μ, var) published once per update
(:func:`~rllib_ext.common.population.gaussian_individual`); its result is ~100 bytes. RL
individuals return their trained d-vector; critic weights travel once per critic call as one
object-store reference.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np
import ray
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BLACKBOX, BlackBoxAlgorithm, BlackBoxConfig, BlackBoxEnvRunner
from rllib_ext.common.blackbox.protocol import EpisodeResult, EvaluationJob, IndividualJob, Job, Payload
from rllib_ext.common.population import CEM_VARIANCES, gaussian_individual
from rllib_ext.common.td3 import TD3Updater, make_actor
from rllib_ext.common.trajectory import ActionExploration, TrajectoryRecorder
from rllib_ext.common.transitions import ReplayActor
from rllib_ext.common.validation import CONTINUOUS

logger = logging.getLogger(__name__)

# TD3 / replay settings the runners and the critic worker need (sent as one dict).
TD3_KEYS = (
    "policy_hiddens",
    "critic_hiddens",
    "optimizer",
    "optimizer_kwargs",
    "actor_lr",
    "critic_lr",
    "gamma",
    "tau",
    "policy_noise",
    "noise_clip",
    "policy_delay",
    "rl_batch_size",
    "replay_sample_chunk",
)


class ERLConfig(BlackBoxConfig):
    """Settings shared by AESRL_EXT and CEMRL_EXT (paper 001 App. A, App. C; CEM-RL's values).

    Population: ``sigma_init`` (σ²_0 per parameter, Σ = σ_init·I; 1e-3 as CEM-RL),
    ``var_limit`` (floor of σ², 1e-5), ``cem_variance``: the form of the sep-CEM variance (CEMRL_EXT;
    AESRL_EXT's ``elite`` variance rule) — ``"reference"`` (default): σ² = (1/K_e)·Σλ_i(z_i − μ_t)² + ε,
    as apourchot/CEM-RL and aes-rl compute it; ``"eq2"``: paper 001 Eq. (2) as printed, without
    1/K_e (:mod:`rllib_ext.common.population`). Actor (App. A): ``policy_hiddens`` [400, 300], tanh,
    deterministic tanh head. Critic and RL training (TD3): ``critic_hiddens`` [400, 300] (leaky
    ReLU), ``actor_lr`` and ``critic_lr`` 1e-3, ``gamma`` 0.99, ``tau`` 0.005, ``policy_noise``
    0.2, ``noise_clip`` 0.5, ``policy_delay`` 2, ``rl_batch_size`` 256 (the reference configs;
    CEM-RL: 100). ``replay_capacity`` 2e5 (App. C.1). ``action_noise``: a_noise, the Gaussian action
    noise (in action half-ranges, Algorithm 2) of *every* fitness evaluation — individuals f(z) and
    the mean f(μ) alike, so that AES-RL's comparison f(z) − f(μ) is not biased by noise on one side
    only. Default 0.0, the reference codes' value: aes-rl runs individuals and μ with ``noise=False``
    (``algorithm/aesrl.py``, every ``rollout`` job; ``algorithm/cemrl.py``, ``pcemrl.py`` use the
    ``rollout`` default ``noise=False``, ``core/worker.py``), apourchot's CEM-RL evaluates its
    population with ``noise=None`` (``es_grad.py``). Paper 001 App. C.2 reports a_noise 0.1: set
    ``action_noise=0.1`` for it (μ's episodes then get it too).
    ``initial_steps``: individuals act uniformly at random until this many env steps
    (10000; TD3's start steps), ``rl_start_steps``: no RL individual before (None: =
    initial_steps). ``rl_actor_steps``: Adam steps of an RL individual; ``"auto"`` = the env steps
    of the last 10 individuals (AES-RL reference) or of the last generation (CEM-RL).
    ``replay_sample_chunk``: minibatches fetched per replay call. ``checkpoint_replay``: whether
    checkpoints hold the replay contents (False: they hold the networks, population and counters).
    ``critic_num_cpus``: CPUs reserved for the critic worker (0: it shares the machine).
    ``optimizer`` (``"adam"``) and ``optimizer_kwargs``: the TD3 optimizer of the critic and of
    the RL individuals, by name (``rllib_ext.optim``).

    Not used by this family (the black-box ES settings): ``noise_stdev``, ``episodes_per_batch``,
    ``sampler``, ``return_shaping``, ``lr``.
    """

    supported_actions = (CONTINUOUS,)  # TD3: a 1-d Box

    optimizer_steps_theta = False  # ``optimizer`` is the TD3 networks'; μ, σ² follow the ES rules

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.sigma_init = 1e-3
        self.var_limit = 1e-5
        self.cem_variance = "reference"
        self.policy_hiddens = [400, 300]
        self.policy_activation = "tanh"
        self.policy_head = "deterministic"
        self.observation_filter = False
        self.critic_hiddens = [400, 300]
        self.actor_lr = 1e-3
        self.critic_lr = 1e-3
        self.gamma = 0.99
        self.tau = 0.005
        self.policy_noise = 0.2
        self.noise_clip = 0.5
        self.policy_delay = 2
        self.rl_batch_size = 256
        self.replay_capacity = 200_000
        self.action_noise = 0.0  # the reference codes' (see above); paper 001 App. C.2: 0.1
        self.initial_steps = 10_000
        self.rl_start_steps = None
        self.rl_actor_steps = "auto"
        self.replay_sample_chunk = 50
        self.checkpoint_replay = False
        self.critic_num_cpus = 0
        self.env_runner_cls = ERLEnvRunner
        self.jobs_in_flight_per_env_runner = 1  # "whenever a runner is idle": one individual each

    @override(BlackBoxConfig)
    def training(
        self,
        *,
        sigma_init=NotProvided,
        var_limit=NotProvided,
        cem_variance=NotProvided,
        critic_hiddens=NotProvided,
        actor_lr=NotProvided,
        critic_lr=NotProvided,
        tau=NotProvided,
        policy_noise=NotProvided,
        noise_clip=NotProvided,
        policy_delay=NotProvided,
        rl_batch_size=NotProvided,
        replay_capacity=NotProvided,
        action_noise=NotProvided,
        initial_steps=NotProvided,
        rl_start_steps=NotProvided,
        rl_actor_steps=NotProvided,
        replay_sample_chunk=NotProvided,
        checkpoint_replay=NotProvided,
        critic_num_cpus=NotProvided,
        **kwargs,
    ) -> ERLConfig:
        super().training(**kwargs)
        self._set_provided(
            sigma_init=sigma_init,
            var_limit=var_limit,
            cem_variance=cem_variance,
            critic_hiddens=critic_hiddens,
            actor_lr=actor_lr,
            critic_lr=critic_lr,
            tau=tau,
            policy_noise=policy_noise,
            noise_clip=noise_clip,
            policy_delay=policy_delay,
            rl_batch_size=rl_batch_size,
            replay_capacity=replay_capacity,
            action_noise=action_noise,
            initial_steps=initial_steps,
            rl_start_steps=rl_start_steps,
            rl_actor_steps=rl_actor_steps,
            replay_sample_chunk=replay_sample_chunk,
            checkpoint_replay=checkpoint_replay,
            critic_num_cpus=critic_num_cpus,
        )
        return self

    @property
    def effective_rl_start_steps(self) -> int:
        return int(self.initial_steps if self.rl_start_steps is None else self.rl_start_steps)

    @property
    def td3_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in TD3_KEYS}

    @override(BlackBoxConfig)
    def validate(self) -> None:
        super().validate()

        def positive(name, integer=False, allow_zero=False):
            v = getattr(self, name)
            ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok_type or not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
                kind = "an integer" if integer else "a finite number"
                self._value_error(f"{name} must be {kind} {'>= 0' if allow_zero else '> 0'}, got {v!r}")

        for name in ("sigma_init", "var_limit", "actor_lr", "critic_lr"):
            positive(name)
        for name in ("policy_noise", "noise_clip", "action_noise"):
            positive(name, allow_zero=True)
        for name in ("rl_batch_size", "replay_capacity", "replay_sample_chunk", "policy_delay"):
            positive(name, integer=True)
        for name in ("initial_steps", "critic_num_cpus"):
            positive(name, allow_zero=True)
        if self.rl_start_steps is not None:
            positive("rl_start_steps", integer=True, allow_zero=True)
        if self.cem_variance not in CEM_VARIANCES:
            self._value_error(f"unknown cem_variance {self.cem_variance!r}; valid: {', '.join(CEM_VARIANCES)}")
        if not (isinstance(self.tau, (int, float)) and 0 < self.tau <= 1):
            self._value_error(f"tau must be in (0, 1], got {self.tau!r}")
        if not (isinstance(self.gamma, (int, float)) and 0 <= self.gamma <= 1):
            self._value_error(f"gamma must be in [0, 1], got {self.gamma!r}")
        if self.rl_actor_steps != "auto" and not (isinstance(self.rl_actor_steps, int) and self.rl_actor_steps >= 1):
            self._value_error(f"rl_actor_steps must be 'auto' or an integer >= 1, got {self.rl_actor_steps!r}")
        if self.observation_filter:
            self._value_error(
                "observation_filter must be False for the ERL algorithms: the critic and the RL individuals "
                "learn from raw replay observations (paper 001 uses no observation normalization)"
            )
        if self.common_random_numbers:
            # Individuals are single seeded samples of N(μ, σ²), not rows of a perturbation batch:
            # their jobs carry no env seed, so the setting would silently do nothing.
            self._value_error("common_random_numbers is not supported by the ERL algorithms (AESRL_EXT, CEMRL_EXT)")
        if self.policy_head != "deterministic" or self.policy_activation != "tanh":
            self._value_error(
                "the ERL actor is paper 001's App. A network: policy_head 'deterministic', activation 'tanh'"
            )


def _writable(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Copies of object-store arrays (read-only; torch warns when wrapping them)."""
    return {k: np.array(v) for k, v in data.items()}


# ---------------------------------------------------------------------------------------------
# Env runner.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class ERLPayload(Payload):
    """Update u of the population: μ (as ``theta``), σ² and the replay actor's handle."""

    var: np.ndarray | None = None
    replay: Any = None


@dataclasses.dataclass(kw_only=True, slots=True)
class ERLResult(EpisodeResult):
    """An individual's (or μ's) fitness, with what an RL individual brings back.

    Attributes:
        params: The trained parameters of an RL individual (None for an ES individual or μ).
        rl: Whether the individual was trained with TD3 first.
        actor_loss: Mean TD3 actor loss of that training (NaN otherwise).
        train_s: Seconds spent fetching/training before the episode.
    """

    params: np.ndarray | None = None
    rl: bool = False
    actor_loss: float = float("nan")
    train_s: float = 0.0


class ERLEnvRunner(BlackBoxEnvRunner):
    """Evaluates individuals (ES or RL-trained) and the mean; fills the replay actor.

    Payload per update: :class:`ERLPayload` (μ, σ², the replay actor handle). Jobs:

    - :class:`~rllib_ext.common.blackbox.protocol.IndividualJob`: z = μ + √var ⊙ ε(seed), or z
      from ``params_ref``; trained for ``rl_steps`` TD3 actor steps first when asked; evaluated
      with action noise ``action_noise`` (Algorithm 2) and stored in the replay actor.
    - :class:`~rllib_ext.common.blackbox.protocol.EvaluationJob`: μ for ``episodes`` episodes with
      the same ``action_noise``, not stored in replay (f(μ)).
    """

    result_cls = ERLResult

    def __init__(self, *, config, **kwargs):
        self._var = None
        self._replay = None
        self._updater: TD3Updater | None = None
        super().__init__(config=config, **kwargs)

    @override(BlackBoxEnvRunner)
    def make_env(self):
        super().make_env()
        self.recorder = TrajectoryRecorder(self.env)
        seed = None if self._seed is None else int(self._seed) + 7919 * self.worker_index
        self.env = self.exploration = ActionExploration(self.recorder, noise=0.0, seed=seed)

    @override(BlackBoxEnvRunner)
    def adopt(self, version: int, payload: ERLPayload) -> None:
        self._var = None if payload.var is None else np.asarray(payload.var, dtype=np.float32)
        self._replay = payload.replay
        super().adopt(version, payload)

    def _td3(self) -> TD3Updater:
        """The TD3 actor trainer of RL individuals; its actor is the module's policy itself."""
        if self._updater is None:
            s = self.config.td3_settings
            self._updater = TD3Updater(
                int(self.env.observation_space.shape[0]),
                self.env.action_space,
                hiddens=tuple(s["critic_hiddens"]),
                actor_lr=s["actor_lr"],
                critic_lr=s["critic_lr"],
                gamma=s["gamma"],
                tau=s["tau"],
                policy_noise=s["policy_noise"],
                noise_clip=s["noise_clip"],
                policy_delay=s["policy_delay"],
                optimizer=s["optimizer"],
                optimizer_kwargs=s["optimizer_kwargs"],
                actor=self.module.policy,
            )
        return self._updater

    def train_actor(self, z: np.ndarray, critic_state: dict[str, np.ndarray], steps: int) -> float:
        """An RL individual: ``steps`` TD3 actor steps from z against fixed critic weights; mean loss."""
        upd = self._td3()
        self.module.set_flat(z)
        upd.critic.load_state_dict({k: torch.tensor(v) for k, v in critic_state.items()})
        upd.actor_optimizer = upd.make_optimizer(upd.actor.parameters(), self.config.actor_lr)  # a fresh one
        chunk, batch, done, losses = int(self.config.replay_sample_chunk), int(self.config.rl_batch_size), 0, []
        while done < steps:
            n = min(chunk, steps - done)
            data = _writable(ray.get(self._replay.sample.remote(batch, num_batches=n)))
            for i in range(n):
                losses.append(upd.actor_step(data["obs"][i])["actor_loss"])
            done += n
        return float(np.mean(losses)) if losses else float("nan")

    @override(BlackBoxEnvRunner)
    def run_job(self, job: Job) -> ERLResult:
        if isinstance(job, IndividualJob):
            return self._individual_job(job)
        if isinstance(job, EvaluationJob):  # f(μ): the individuals' action noise, not stored in replay
            self.set_params(self._theta)
            return self._evaluate_with(job, noise=self.config.action_noise, random_actions=False)
        raise TypeError(f"{type(self).__name__} cannot run a {type(job).__name__}")

    def _evaluate_with(self, job: Job, noise: float, random_actions: bool) -> ERLResult:
        self.exploration.noise, self.exploration.random_actions = float(noise), bool(random_actions)
        try:
            return self.evaluate(job, explore=False)
        finally:
            self.exploration.noise, self.exploration.random_actions = 0.0, False

    def _individual_job(self, job: IndividualJob) -> ERLResult:
        t0 = time.perf_counter()
        params, actor_loss = None, float("nan")
        try:
            if job.params_ref is not None:
                z = np.asarray(ray.get(job.params_ref[0]), dtype=np.float32)
            else:
                z = gaussian_individual(self._theta, self._var, job.seed)
            if job.rl_steps:
                actor_loss = self.train_actor(z, ray.get(job.critic_ref[0]), int(job.rl_steps))
                z = params = self.module.get_flat()
            train_s = time.perf_counter() - t0
            self.set_params(z)
            result = self._evaluate_with(job, self.config.action_noise, job.random_actions)
            if not result.failed and self._replay is not None:
                self._replay.add.remote(**self.recorder.transitions())  # Algorithm 2 line 14
        except ray.exceptions.RayError as e:  # the replay actor or a critic object was lost
            train_s = time.perf_counter() - t0
            result = ERLResult(
                job=job,
                ret=float("nan"),
                failed=True,
                episodes_failed=1,
                error=f"{type(e).__name__}: {e}",
                theta_digest=self._theta_digest,
            )
        result.params, result.rl, result.actor_loss, result.train_s = params, bool(job.rl_steps), actor_loss, train_s
        result.runner, result.duration_s = self.worker_index, time.perf_counter() - t0
        return result


# ---------------------------------------------------------------------------------------------
# Critic worker.
# ---------------------------------------------------------------------------------------------
class CriticWorker:
    """The shared TD3 critic in its own process (paper 001 Fig. 2b, Algorithm 1 line 3).

    Each :meth:`train` call sets the actor and the target actor used in the TD3 target to the
    given parameters (AES-RL: the population mean μ, as the reference code does; CEM-RL: the RL
    individual about to be trained), then takes ``steps`` critic steps on replay minibatches,
    soft-updating the target critic every ``policy_delay`` steps (TD3's schedule).
    """

    def __init__(self, obs_dim: int, action_space, settings: dict[str, Any], replay, seed: int | None = None):
        torch.set_num_threads(1)
        self.settings, self.replay = dict(settings), replay
        s = self.settings
        # The actor (μ, the TD3 target policy) has the population's shape; the critics their own.
        with torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(int(seed))
            actor = make_actor(obs_dim, action_space, tuple(s["policy_hiddens"]))
        self.updater = TD3Updater(
            obs_dim,
            action_space,
            hiddens=tuple(s["critic_hiddens"]),
            actor_lr=s["actor_lr"],
            critic_lr=s["critic_lr"],
            gamma=s["gamma"],
            tau=s["tau"],
            policy_noise=s["policy_noise"],
            noise_clip=s["noise_clip"],
            policy_delay=s["policy_delay"],
            seed=seed,
            optimizer=s["optimizer"],
            optimizer_kwargs=s["optimizer_kwargs"],
            actor=actor,
        )

    def set_replay(self, replay) -> None:
        self.replay = replay

    def critic_weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in self.updater.critic.state_dict().items()}

    def train(self, steps: int, actor_flat: np.ndarray) -> dict[str, Any]:
        """``steps`` critic steps with π' = π = ``actor_flat``; returns the new critic weights."""
        from rllib_ext.common.td3 import soft_update

        t0 = time.perf_counter()
        upd = self.updater
        batch = int(self.settings["rl_batch_size"])
        if ray.get(self.replay.size.remote()) < batch:  # e.g. after a restore without replay contents
            return {"critic": None, "stats": {}, "steps": 0, "train_s": time.perf_counter() - t0}
        upd.actor.set_flat(actor_flat)
        upd.actor_target.set_flat(actor_flat)
        chunk, done, stats = int(self.settings["replay_sample_chunk"]), 0, []
        while done < steps:
            n = min(chunk, steps - done)
            data = _writable(ray.get(self.replay.sample.remote(batch, num_batches=n)))
            for i in range(n):
                stats.append(upd.critic_step({k: v[i] for k, v in data.items()}))
                if upd.num_critic_steps % upd.policy_delay == 0:
                    soft_update(upd.critic_target, upd.critic, upd.tau)
            done += n
        mean = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]} if stats else {}
        return {"critic": self.critic_weights(), "stats": mean, "steps": done, "train_s": time.perf_counter() - t0}

    def get_state(self) -> dict[str, Any]:
        return self.updater.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.updater.set_state(state)


# ---------------------------------------------------------------------------------------------
# Driver side.
# ---------------------------------------------------------------------------------------------
class ERLAlgorithm(BlackBoxAlgorithm):
    """Driver base of AESRL_EXT and CEMRL_EXT: replay actor, critic worker, μ publishing.

    Subclasses hold the population (``self.mu``, ``self.var``) and implement ``training_step``.
    A lost critic worker or replay actor is re-created (logged and counted under
    ``blackbox/critic_worker_restarts_lifetime`` / ``replay_actor_restarts_lifetime``): the
    critic from its last weights (its optimizer state is lost), the replay empty.
    """

    @override(BlackBoxAlgorithm)
    def setup(self, config):
        self.mu = self.var = None
        super().setup(config)
        obs_space, act_space = self.spaces[DEFAULT_MODULE_ID]
        self._obs_dim, self._act_space = int(obs_space.shape[0]), act_space
        self.mu = self.theta.copy()
        self.var = np.full_like(self.mu, float(self.config.sigma_init))
        self.counters.update(
            {
                "individual_steps": 0,
                "critic_steps": 0,
                "critic_worker_restarts": 0,
                "replay_actor_restarts": 0,
                "n_rl": 0,
                "n_es": 0,
            }
        )
        self._last_critic: dict[str, np.ndarray] | None = None
        self.critic_ref: ray.ObjectRef | None = None  # latest critic weights (object store)
        self._make_replay()
        self._make_critic()
        self.publish()

    def _make_replay(self) -> None:
        seed = None if self.config.seed is None else int(self.config.seed) + 17
        self.replay = ReplayActor.remote(
            int(self.config.replay_capacity), self._obs_dim, int(self._act_space.shape[0]), seed
        )

    def _make_critic(self) -> None:
        remote = ray.remote(num_cpus=self.config.critic_num_cpus)(CriticWorker)
        self.critic = remote.remote(
            self._obs_dim, self._act_space, self.config.td3_settings, self.replay, self.config.seed
        )
        if self._last_critic is not None:
            weights = self._last_critic
            ray.get(self.critic.set_state.remote({"critic": weights, "critic_target": weights}))

    def recover_actor(self, which: str, error: Exception) -> None:
        """Re-creates a lost replay actor or critic worker (logged, counted)."""
        logger.warning("rllib_ext: the %s died (%s); re-creating it", which, error)
        if which == "replay actor":
            self.counters["replay_actor_restarts"] += 1
            self._make_replay()
            try:
                ray.get(self.critic.set_replay.remote(self.replay))
            except ray.exceptions.RayError:
                self.recover_actor("critic worker", error)
            self.publish()
        else:
            self.counters["critic_worker_restarts"] += 1
            self._make_critic()

    def critic_result(self, ref: ray.ObjectRef) -> dict[str, Any] | None:
        """The result of a critic ``train`` call, or None (and recovery) if an actor died."""
        try:
            out = ray.get(ref)
        except ray.exceptions.RayActorError as e:
            alive = self._replay_alive()
            self.recover_actor("critic worker" if alive else "replay actor", e)
            return None
        except ray.exceptions.RayTaskError as e:
            if self._replay_alive():
                raise  # a real error in the critic's code: fail loudly
            self.recover_actor("replay actor", e)  # it died under the critic's sample call
            return None
        if not out["steps"]:
            return out  # the replay holds less than one minibatch: nothing trained
        self._last_critic = out["critic"]
        self.critic_ref = ray.put(out["critic"])
        self.counters["critic_steps"] += int(out["steps"])
        m = self.metrics
        for key, value in out["stats"].items():
            m.log_value((BLACKBOX, key), value, reduce="mean", window=20)
        m.log_value(
            (BLACKBOX, "critic_updates_per_s"), out["steps"] / max(out["train_s"], 1e-9), reduce="mean", window=20
        )
        return out

    def _replay_alive(self) -> bool:
        try:
            ray.get(self.replay.size.remote(), timeout=10)
            return True
        except Exception:  # noqa: BLE001 - any failure means we cannot use it
            return False

    @override(BlackBoxAlgorithm)
    def make_payload(self) -> ERLPayload:
        """(μ, σ², replay handle) of update u."""
        return ERLPayload(theta=self.mu, var=self.var, replay=self.replay)

    @override(BlackBoxAlgorithm)
    def publish(self) -> None:
        """Publishes update u's population to the runners (not before setup has built μ and the replay)."""
        if self.mu is None or not hasattr(self, "replay"):
            return  # during BlackBoxAlgorithm.setup: published at the end of ours
        self.theta = self.mu
        super().publish()

    def check_finite_population(self) -> None:
        """Raises FloatingPointError if μ or σ² went non-finite (never published to runners)."""
        if not (np.isfinite(self.mu).all() and np.isfinite(self.var).all()):
            raise FloatingPointError(f"{type(self).__name__}: the population mean or variance became NaN/inf")

    def sync_mu_to_learner(self) -> None:
        """Writes μ into the learner's module, so RLlib's checkpoints and `rllib evaluate` use it."""
        mu = self.mu
        self._on_learner(lambda learner: learner._module[DEFAULT_MODULE_ID].set_flat(mu))

    def free_slots(self) -> int:
        return (
            max(len(self.pool.healthy_runner_ids()), 0) * self.pool.jobs_in_flight
            - self.pool.num_in_flight
            - self.pool.num_queued
        )

    def log_common(self) -> None:
        m = self.metrics
        m.log_value((BLACKBOX, "sigma_mean"), float(np.sqrt(self.var).mean()), reduce="mean", window=1)
        m.log_value((BLACKBOX, "sigma_max"), float(np.sqrt(self.var).max()), reduce="mean", window=1)
        m.log_value((BLACKBOX, "mu_norm"), float(np.linalg.norm(self.mu)), reduce="mean", window=1)
        for key in (
            "individual_steps",
            "critic_steps",
            "critic_worker_restarts",
            "replay_actor_restarts",
            "n_rl",
            "n_es",
        ):
            m.log_value((BLACKBOX, key + "_lifetime"), self.counters[key], reduce="max", window=1)
        try:
            size = ray.get(self.replay.size.remote(), timeout=10)
            m.log_value((BLACKBOX, "replay_size"), size, reduce="mean", window=1)
        except Exception as e:  # noqa: BLE001
            self.recover_actor("replay actor", e)

    # -- checkpoints --------------------------------------------------------------------------
    @override(BlackBoxAlgorithm)
    def _extra_state(self) -> dict[str, Any]:
        state = {"mu": self.mu.copy(), "var": self.var.copy(), "critic": ray.get(self.critic.get_state.remote())}
        if self.config.checkpoint_replay:
            state["replay"] = ray.get(self.replay.get_state.remote())
        return state

    @override(BlackBoxAlgorithm)
    def _set_extra_state(self, state: dict[str, Any]) -> None:
        self.mu = np.asarray(state["mu"], dtype=np.float32)
        self.var = np.asarray(state["var"], dtype=np.float32)
        ray.get(self.critic.set_state.remote(state["critic"]))
        self._last_critic = state["critic"]["critic"]
        # RL individuals need replay data: without restored contents they wait for new critic steps.
        self.critic_ref = None
        if "replay" in state:
            ray.get(self.replay.set_state.remote(state["replay"]))
            if self.counters.get("critic_steps"):
                self.critic_ref = ray.put(self._last_critic)

    @override(BlackBoxAlgorithm)
    def get_state(self, components=None, *, not_components=None, **kwargs):
        self.sync_mu_to_learner()
        return super().get_state(components, not_components=not_components, **kwargs)

    @override(BlackBoxAlgorithm)
    def set_state(self, state) -> None:
        Algorithm.set_state(self, state)
        own = state.get(BLACKBOX)
        if own is not None:
            self.update_index = own["update_index"]
            self.batch_seed = own["batch_seed"]
            self.counters.update(own["counters"])
            self._set_extra_state(own["extra"])
        self.publish()
