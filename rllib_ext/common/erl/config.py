"""ERLConfig: the settings AESRL_EXT and CEMRL_EXT share (paper 001 App. A, App. C; CEM-RL's values)."""

from __future__ import annotations

from typing import Any, Literal

from ray.rllib.utils.annotations import override

from rllib_ext.common.blackbox import BlackBoxConfig
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.population import CEM_VARIANCES
from rllib_ext.common.offpolicy.settings import ERL_TD3_CHANGES, TD3_SETTINGS
from rllib_ext.common.validation import CONTINUOUS
from rllib_ext.settings import Setting, changed, unused, with_changes

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
    "noise_table",
    "noise_table_size",
    "noise_table_seed",
    "noise_table_dtype",
    "return_shaping",
    "lr",
    "l2_coeff",
    "explore_perturbations",
    "obs_clip",
    "eval_episodes",
    "eval_return_ema",
    "episodes_per_job",
    "perturbations_per_call",
    "min_reply_s",
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
    network_settings: tuple[str, ...] = ("policy_hiddens", "critic_hiddens")

    optimizer_steps_theta = False  # ``optimizer`` is the TD3 networks'; μ, σ² follow the ES rules

    runners_use_gpus = True  # RL individuals' actor steps (``num_gpus_per_env_runner``)

    # The types of the table's own settings (set from it by Configurable; rllib_ext/settings.py, Types).
    sigma_init: float
    var_limit: float
    cem_variance: str
    critic_hiddens: list[int]
    actor_lr: float
    critic_lr: float
    tau: float
    policy_noise: float
    noise_clip: float
    policy_delay: int
    action_noise: float
    initial_steps: float
    replay_capacity: int
    checkpoint_replay: bool
    optimizer: str
    optimizer_kwargs: dict[str, Any]
    rl_batch_size: int
    rl_start_steps: int | None
    rl_actor_steps: int | Literal["auto"]
    replay_sample_chunk: int
    critic_num_cpus: float
    critic_num_gpus: float

    SETTINGS = {
        "sigma_init": Setting(
            1e-3, float, gt=0, symbol="Σ = σ_init·I", source="1e-3 (CEM-RL)", doc="initial σ² per parameter"
        ),
        "var_limit": Setting(1e-5, float, gt=0, source="— (reference: 1e-5)", doc="floor of σ²"),
        "cem_variance": Setting(
            "reference",
            choices=CEM_VARIANCES,
            source="Eq. 2 (`eq2`)",
            doc="the sep-CEM variance: `reference` (1/K_e)·Σλ_i(z_i − μ)² + ε, or `eq2` Σλ_i(z_i − μ)² + ε",
        ),
        "policy_hiddens": changed(default=[400, 300], source="App. A, Table 4", doc="tanh actor"),
        "policy_activation": changed(source="App. A", doc="the actor's activation (App. A's: `tanh` only)"),
        "policy_head": changed(source="App. A", doc="the actor's head (App. A's: `deterministic` only)"),
        "observation_filter": changed(
            default=False, source="none", doc="must be False: the critic learns from raw replay observations"
        ),
        "critic_hiddens": Setting([400, 300], list, source="App. A, Table 4", doc="leaky-ReLU critic"),
        **with_changes(TD3_SETTINGS, ERL_TD3_CHANGES),
        "rl_batch_size": Setting(256, int, ge=1, source="256 (reference configs; TD3_EXT: 100)", doc="TD3 minibatch"),
        "rl_start_steps": Setting(
            None, int, ge=0, also=(None,), shown="None (= `initial_steps`)", doc="no RL individual before"
        ),
        "rl_actor_steps": Setting(
            "auto",
            int,
            ge=1,
            also=("auto",),
            source="env steps of the last 10 individuals (reference)",
            doc="Adam steps of an RL individual",
        ),
        "replay_sample_chunk": Setting(
            50,
            int,
            ge=1,
            doc="minibatches per replay call; the critic worker and RL individuals keep the next call in flight "
            "while they train on the current chunk (RL individuals fetch states only)",
        ),
        "critic_num_cpus": Setting(0, float, ge=0, doc="CPUs reserved for the critic worker"),
        "critic_num_gpus": Setting(
            0,
            float,
            ge=0,
            source="— (the reference trains its critic on a GPU)",
            doc="GPUs for the critic worker (1 or a fraction): critic, targets and μ as target actor on the GPU",
        ),
        "num_gpus_per_env_runner": Setting(
            0,
            float,
            ge=0,
            rllib=True,
            source="— (the reference's workers train on a GPU when there is one)",
            doc="a share of a GPU per env runner, on which it trains its RL individuals' actors "
            "(`.env_runners(...)`); refused before actors start when the cluster has fewer GPUs than asked for",
        ),
        "jobs_in_flight_per_env_runner": changed(
            default=1, doc="individuals in flight per runner (1: a runner gets the next individual when it is idle)"
        ),
        **{name: unused(why) for name, why in _UNUSED_TD3_SETTINGS.items()},
        **{name: unused(_UNUSED_BLACKBOX_REASON) for name in UNUSED_BLACKBOX_SETTINGS},
    }

    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class)
        self.env_runner_cls = ERLEnvRunner  # type: ignore[assignment]  # RLlib infers None (its default)

    @property
    def effective_rl_start_steps(self) -> int:
        return int(self.initial_steps if self.rl_start_steps is None else self.rl_start_steps)

    @property
    def td3_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in TD3_KEYS}

    @override(BlackBoxConfig)
    def validate(self) -> None:
        super().validate()
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
