"""ERLConfig: the settings AESRL_EXT and CEMRL_EXT share (paper 001 App. A, App. C; CEM-RL's values)."""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BlackBoxConfig
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.population import CEM_VARIANCES
from rllib_ext.common.validation import CONTINUOUS

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

#: BlackBoxConfig's ES settings that the ERL algorithms never read (their individuals are whole
#: seeded samples of N(μ, σ²) evaluated for one episode; TD3 uses ``actor_lr``/``critic_lr``).
#: validate() refuses a changed value (``ERLConfig.unused_settings``): it would silently do nothing.
UNUSED_BLACKBOX_SETTINGS = (
    "noise_stdev",
    "episodes_per_batch",
    "sampler",
    "sampler_antithetic",
    "return_shaping",
    "lr",
    "l2_coeff",
    "explore_perturbations",
    "obs_clip",
    "eval_episodes",
    "eval_return_ema",
    "episodes_per_job",
    "perturbations_per_call",
)


#: Why each of :data:`UNUSED_BLACKBOX_SETTINGS` does nothing here.
_UNUSED_BLACKBOX_REASON = (
    "a black-box ES setting the ERL algorithms do not use (an individual is one seeded sample of N(μ, σ²) "
    "evaluated for one episode; TD3's learning rates are `actor_lr` and `critic_lr`)"
)

#: RLlib settings whose meaning here is TD3's (the black-box family's reasons otherwise apply).
_UNUSED_TD3_SETTINGS = {
    "explore": "every fitness evaluation acts with `action_noise` (Gaussian, in action half-ranges)",
    "train_batch_size_per_learner": "TD3's minibatch is `rl_batch_size`",
    "train_batch_size": "TD3's minibatch is `rl_batch_size`",
    "num_epochs": "the RL individuals take `rl_actor_steps` TD3 steps, each on `rl_batch_size` transitions",
    "minibatch_size": "TD3's minibatch is `rl_batch_size`",
    "grad_clip": "the TD3 steps of the critic and of the RL individuals are not clipped",
}


class ERLConfig(BlackBoxConfig):
    """Settings shared by AESRL_EXT and CEMRL_EXT (paper 001 App. A, App. C; CEM-RL's values).

    Population: ``sigma_init`` (σ²_0 per parameter, Σ = σ_init·I; 1e-3 as CEM-RL),
    ``var_limit`` (floor of σ², 1e-5), ``cem_variance``: the form of the sep-CEM variance (CEMRL_EXT;
    AESRL_EXT's ``elite`` variance rule) — ``"reference"`` (default): σ² = (1/K_e)·Σλ_i(z_i − μ_t)² + ε,
    as apourchot/CEM-RL and aes-rl compute it; ``"eq2"``: paper 001 Eq. (2) as printed, without
    1/K_e (:mod:`rllib_ext.common.erl.population`). Actor (App. A): ``policy_hiddens`` [400, 300], tanh,
    deterministic tanh head. Critic and RL training (TD3): ``critic_hiddens`` [400, 300] (leaky
    ReLU), ``actor_lr`` and ``critic_lr`` 1e-3, ``gamma`` 0.99, ``tau`` 0.005, ``policy_noise``
    0.2, ``noise_clip`` 0.5, ``rl_batch_size`` 256 (the reference configs; CEM-RL: 100).
    ``policy_delay``: the target critic's soft-update period, in critic steps. In this family the
    actors train in their own jobs against a fixed critic, so TD3's delay acts only on the target
    critic; default 1, every step, as apourchot/CEM-RL's ``Critic.update`` and aes-rl's critic-only
    TD3 calls do (2 is TD3's schedule). ``replay_capacity`` 2e5 (App. C.1). ``action_noise``:
    a_noise, the Gaussian action noise (in action half-ranges, Algorithm 2) of *every* fitness
    evaluation — individuals f(z) and the mean f(μ) alike, so that AES-RL's comparison f(z) − f(μ)
    is not biased by noise on one side only. Default 0.0, the reference codes' value: aes-rl runs
    individuals and μ with ``noise=False`` (``algorithm/aesrl.py``, every ``rollout`` job;
    ``algorithm/cemrl.py``, ``pcemrl.py`` use the ``rollout`` default ``noise=False``,
    ``core/worker.py``), apourchot's CEM-RL evaluates its population with ``noise=None``
    (``es_grad.py``). Paper 001 App. C.2 reports a_noise 0.1: set ``action_noise=0.1`` for it (μ's
    episodes then get it too).
    ``initial_steps``: individuals act uniformly at random until this many env steps
    (10000; TD3's start steps), ``rl_start_steps``: no RL individual before (None: =
    initial_steps). ``rl_actor_steps``: Adam steps of an RL individual; ``"auto"`` = the env steps
    of the last 10 individuals (AES-RL reference) or of the last generation (CEM-RL).
    ``replay_sample_chunk``: minibatches fetched per replay call. ``checkpoint_replay``: whether
    checkpoints hold the replay contents (False: they hold the networks, population and counters).
    ``critic_num_cpus``: CPUs reserved for the critic worker (0: it shares the machine).
    ``critic_num_gpus``: GPUs for the critic worker (0: it trains on the CPU; 1, or a fraction, puts
    the critic, its targets and the TD3 target actor on a GPU, as both reference codes do). The RL
    individuals' actor steps run on their env runners' CPUs, or on the runners' GPUs with RLlib's
    ``num_gpus_per_env_runner`` > 0 (as the references' workers). Both are checked against the
    cluster before any actor starts; under Tune the critic's CPUs and GPUs are a bundle of the
    trial's placement group (RLlib's own bundles carry the runners').
    ``optimizer`` (``"adam"``) and ``optimizer_kwargs``: the TD3 optimizer of the critic and of
    the RL individuals, by name (``rllib_ext.optim``).

    Not used by this family (the black-box ES settings): ``noise_stdev``, ``episodes_per_batch``,
    ``sampler``, ``return_shaping``, ``lr``.
    """

    supported_actions = (CONTINUOUS,)  # TD3: a 1-d Box

    # TD3_EXT's model_config fcnet_hiddens sizes its actor and its critics alike.
    network_settings = ("policy_hiddens", "critic_hiddens")

    optimizer_steps_theta = False  # ``optimizer`` is the TD3 networks'; μ, σ² follow the ES rules

    runners_use_gpus = True  # RL individuals' actor steps (``num_gpus_per_env_runner``)

    # The black-box family's, except `gamma` (TD3's discount), with TD3's meaning of the batch and
    # exploration settings, and the ES settings this family does not use.
    unused_settings = {
        **{k: v for k, v in BlackBoxConfig.unused_settings.items() if k != "gamma"},
        **_UNUSED_TD3_SETTINGS,
        **dict.fromkeys(UNUSED_BLACKBOX_SETTINGS, _UNUSED_BLACKBOX_REASON),
    }

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
        self.policy_delay = 1  # the target critic's period in critic steps: every step, as both references
        self.rl_batch_size = 256
        self.replay_capacity = 200_000
        self.action_noise = 0.0  # the reference codes' (see above); paper 001 App. C.2: 0.1
        self.initial_steps = 10_000
        self.rl_start_steps = None
        self.rl_actor_steps = "auto"
        self.replay_sample_chunk = 50
        self.checkpoint_replay = False
        self.critic_num_cpus = 0
        self.critic_num_gpus = 0
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
        critic_num_gpus=NotProvided,
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
            critic_num_gpus=critic_num_gpus,
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
        for name in ("initial_steps", "critic_num_cpus", "critic_num_gpus"):
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
