"""The one list of rllib_ext algorithm names, and their registration with Ray Tune.

Each entry maps a name (what a user types: ``rllib train --algo IMPACT_EXT``,
``tune.Tuner("IMPACT_EXT")``) to the ``"module:Class"`` of its :class:`Algorithm`, the paper
it implements (a file in ``../shared/papers``, or a citation saying it is not there) and a
one-line summary shown by ``rllib list``.

Registration (:func:`register_all`) is idempotent and runs on ``import rllib_ext``. It is also
re-run after every ``ray.init()`` (a post-init hook): Tune's registry lives in the Ray job's
key-value store, so a ``ray.shutdown(); ray.init()`` pair would otherwise forget our names.

Laziness: Tune's registry stores a *pickled class*, so registering a name needs the class
object; each algorithm's ``<algo>.py`` therefore holds only its Config and Algorithm and imports
its learner, RL module and torch code lazily (``get_default_learner_class`` etc., as RLlib
does). The black-box and evolution+RL configs name their env runner and learner classes at
module level, so ``import rllib_ext`` also loads ``common/`` (about half the package); the CLI,
plotting and the optimizers' extra modules load on use.
A module that fails to import is reported (warning, and ``rllib list`` marks it broken) instead
of breaking ``import rllib_ext`` for every other algorithm.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging

from rllib_ext import _compat
from rllib_ext.common.names import ALGORITHM_NAMES

logger = logging.getLogger(__name__)


#: How an :class:`AlgoSpec` whose paper is not a file in ``../shared/papers`` ends its ``paper``.
NOT_IN_PAPERS = "(not in ../shared/papers)"


@dataclasses.dataclass(frozen=True)
class AlgoSpec:
    """One registered algorithm.

    Attributes:
        name: The registered (Tune) name, e.g. ``"IMPACT_EXT"``.
        algo_path: ``"module:Class"`` of the :class:`~ray.rllib.algorithms.Algorithm` subclass.
        config_path: ``"module:Class"`` of its :class:`AlgorithmConfig` subclass.
        paper: Paper file(s) in ``../shared/papers`` the algorithm implements (``"000, 002"``), or
            for a method whose paper is not there, a citation ending in :data:`NOT_IN_PAPERS`.
        summary: One line for ``rllib list``.
    """

    name: str
    algo_path: str
    config_path: str
    paper: str
    summary: str


# The one list of algorithm names. Add an entry when an algorithm lands; tests iterate over it.
ALGORITHMS: dict[str, AlgoSpec] = {
    spec.name: spec
    for spec in [
        # Entries are added here as algorithms land.
        AlgoSpec(
            "IMPACT_EXT",
            "rllib_ext.algorithms.impact.impact:IMPACT",
            "rllib_ext.algorithms.impact.impact:IMPACTConfig",
            "004",
            "async actor-learner: clipped-target surrogate R3, V-trace GAE-lambda, circular buffer C(N,K)",
        ),
        AlgoSpec(
            "VRACER_EXT",
            "rllib_ext.algorithms.vracer.vracer:VRACER",
            "rllib_ext.algorithms.vracer.vracer:VRACERConfig",
            "003",
            "V-RACER: off-policy PG with Retrace/TBC targets in a ReF-ER replay memory (Rules 1-2, annealing)",
        ),
        AlgoSpec(
            "DDPG_EXT",
            "rllib_ext.algorithms.ddpg.ddpg:DDPG",
            "rllib_ext.algorithms.ddpg.ddpg:DDPGConfig",
            "003",
            "DDPG (tanh policy, critic, soft targets) on the ReF-ER replay memory (refer/refer1/refer2/er/per)",
        ),
        AlgoSpec(
            "NAF_EXT",
            "rllib_ext.algorithms.naf.naf:NAF",
            "rllib_ext.algorithms.naf.naf:NAFConfig",
            "003",
            "NAF: Q = V - (a-m)^T L L^T (a-m) on the ReF-ER replay memory (refer/refer1/refer2/er/per)",
        ),
        AlgoSpec(
            "ES_EXT",
            "rllib_ext.algorithms.es.es:ES",
            "rllib_ext.algorithms.es.es:ESConfig",
            "000, 002",
            "evolution strategies on lean async env runners; samplers gaussian/antithetic/orthogonal/gcmc/qmc",
        ),
        AlgoSpec(
            "DFD_EXT",
            "rllib_ext.algorithms.dfd.dfd:DFD",
            "rllib_ext.algorithms.dfd.dfd:DFDConfig",
            "000",
            "delayed finite differences: runners never wait, delayed returns used (Eq. 18); FD ablation",
        ),
        AlgoSpec(
            "CVES_EXT",
            "rllib_ext.algorithms.cves.cves:CVES",
            "rllib_ext.algorithms.cves.cves:CVESConfig",
            "002",
            "ES with a policy-gradient control variate (Eq. 8): adaptive eta (Eq. 9) and gamma (App. C.1)",
        ),
        AlgoSpec(
            "ARS_EXT",
            "rllib_ext.algorithms.ars.ars:ARS",
            "rllib_ext.algorithms.ars.ars:ARSConfig",
            "Mania et al. 2018 " + NOT_IN_PAPERS,
            "augmented random search (V1, V1-t, V2, V2-t): linear policy, top-b directions, reward-std step",
        ),
        AlgoSpec(
            "TD3_EXT",
            "rllib_ext.algorithms.td3.td3:TD3",
            "rllib_ext.algorithms.td3.td3:TD3Config",
            "001",
            "TD3: twin critics, target policy smoothing, delayed actor updates (the RL part of AES-RL)",
        ),
        AlgoSpec(
            "AESRL_EXT",
            "rllib_ext.algorithms.aesrl.aesrl:AESRL",
            "rllib_ext.algorithms.aesrl.aesrl:AESRLConfig",
            "001",
            "async ES + TD3: per-individual mean/variance rules (Eq. 4-12), p_rl control (Eq. 3), parallel critic",
        ),
        AlgoSpec(
            "CEMRL_EXT",
            "rllib_ext.algorithms.cemrl.cemrl:CEMRL",
            "rllib_ext.algorithms.cemrl.cemrl:CEMRLConfig",
            "001",
            "CEM-RL (sep-CEM + TD3, synchronous generations): mode serial (CEM-RL) or parallel (P-CEM-RL)",
        ),
    ]
}

# Each algorithm's registered name, known to common/ without importing the algorithm modules.
ALGORITHM_NAMES.update({spec.algo_path: name for name, spec in ALGORITHMS.items()})

# Gymnasium ids of the environments this package registers (see rllib_ext.envs).
ENVS: dict[str, str] = {
    "rllib_ext/VariableLength-v0": "rllib_ext.envs:VariableLengthEnv",
    "rllib_ext/Faulty-v0": "rllib_ext.envs:FaultyEnv",
    # Any env whose step() calls are counted into files (the step-count audit).
    "rllib_ext/StepCounted-v0": "rllib_ext.envs:make_step_counted",
    # Paper 004's Atari input (4 stacked 42x42 grey frames); needs the `atari` extra (ale-py).
    "rllib_ext/Atari42-v0": "rllib_ext.envs:make_atari42",
}

_import_errors: dict[str, str] = {}


def load(path: str):
    """The object at ``"module:name"`` (imports the module)."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def get_algorithm_class(name: str) -> type:
    """Returns the Algorithm class registered under ``name`` (imports its module)."""
    return load(ALGORITHMS[name].algo_path)


def get_config_class(name: str) -> type:
    """Returns the AlgorithmConfig class of the algorithm registered under ``name``."""
    return load(ALGORITHMS[name].config_path)


def import_errors() -> dict[str, str]:
    """Names whose module failed to import during registration, with the error."""
    return dict(_import_errors)


def rllib_builtin_names() -> list[str]:
    """RLlib 2.60's own algorithm names (PPO, APPO, IMPALA, SAC, ...)."""
    from ray.rllib.algorithms.registry import ALGORITHMS as RLLIB_ALGORITHMS

    return sorted(RLLIB_ALGORITHMS)


def all_names() -> list[str]:
    """Every name the CLI accepts: ours first, then RLlib's built-ins."""
    return sorted(ALGORITHMS) + rllib_builtin_names()


def resolve_algorithm_class(name: str) -> type | None:
    """Class for an rllib_ext or RLlib built-in name, or None if the name is unknown.

    Does not start Ray.
    """
    if name in ALGORITHMS:
        return get_algorithm_class(name)
    if name in rllib_builtin_names():
        return _compat.rllib_algorithm_class(name)
    return None


def _register_envs() -> None:
    import gymnasium as gym
    from ray.tune.registry import ENV_CREATOR, register_env

    for env_id, entry_point in ENVS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point)
        # Tune's registry too, so that remote env runners (which never imported rllib_ext)
        # can build the env from its name.
        if not _compat.tune_registry_contains(ENV_CREATOR, env_id):
            register_env(env_id, _make_registered_env(env_id))


class _make_registered_env:
    """Picklable env creator for Tune's registry: ``gym.make(env_id, **env_config)``."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, env_config=None):
        import gymnasium as gym

        importlib.import_module(ENVS[self.env_id].partition(":")[0])
        if self.env_id not in gym.registry:
            gym.register(self.env_id, entry_point=ENVS[self.env_id])
        kwargs = {k: v for k, v in dict(env_config or {}).items() if k != "num_envs"}
        return gym.make(self.env_id, **kwargs)


def register_all() -> list[str]:
    """Registers every algorithm in :data:`ALGORITHMS` (and our envs) with Tune.

    Idempotent: names already present in Tune's registry are skipped. Returns the names
    registered by this call.
    """
    from ray.tune.registry import TRAINABLE_CLASS, register_trainable

    _register_envs()
    registered = []
    for name in ALGORITHMS:
        # Already registered (e.g. in a Ray worker, by the driver): skip, so that a worker does
        # not import every algorithm module (about 1 s per process).
        if _compat.tune_registry_contains(TRAINABLE_CLASS, name):
            continue
        try:
            cls = get_algorithm_class(name)
        except Exception as e:  # noqa: BLE001 - reported, never silently dropped
            _import_errors[name] = f"{type(e).__name__}: {e}"
            logger.warning("rllib_ext: could not import algorithm %s: %s", name, e)
            continue
        register_trainable(name, cls)
        registered.append(name)
    return registered


_hook_installed = False


def install_post_init_hook() -> None:
    """Re-registers our names after every ``ray.init()`` (Tune's registry is per Ray job)."""
    global _hook_installed
    if _hook_installed:
        return
    _compat.add_post_init_hook(register_all)
    _hook_installed = True
