"""Every private name of Ray, RLlib, torch and gymnasium that rllib_ext relies on, in one place.

``ray==2.60.*`` is pinned; a Ray (or torch) upgrade that renames or drops one of these names breaks
this file and its test in ``tests/unit/test_compat.py`` (one test per entry), not the package at
large. ``test_compat.py`` also scans ``rllib_ext/`` and fails on any private name of these libraries
used outside this module that is not listed here.

Four kinds of use, four treatments:

* **Shims** (functions below): a private name read, called, imported or passed as a keyword on
  an object of the libraries. The package calls the shim instead.
* **Overrides** (:data:`PRIVATE_OVERRIDES`): a subclass overrides a private RLlib method. The
  override cannot go through a shim; the table records the method and the parameters the
  package's override takes, and a test checks them with :func:`inspect.signature`.
* **Inherited state** (:data:`INHERITED_ATTRIBUTES`): a subclass reads or writes private
  attributes its RLlib base class sets (the ReF-ER fast update path reproduces
  ``TorchLearner``'s update steps). The table records them, and a test builds the real class and
  checks each is there.
* **Documented conventions** (:data:`CONVENTIONS`): underscore names RLlib documents as the way
  to extend it. Used directly; tested here like the rest.

Decisions: ``AlgorithmConfig._value_error`` is RLlib's documented way for ``validate()`` to
reject a setting (RLlib's own configs use it, ``docs`` and the design notes name it, and the
settings layer relies on it raising a ``ValueError`` before actors start). A shim would only
rename it, so it stays a direct call, listed under conventions. The same holds for the
``RLModule._forward*`` hooks. ``MultiRLModule._rl_modules`` and ``Learner._device`` /
``Learner._module`` had public equivalents (``MultiRLModule.items()/values()``,
``Learner.device``, ``Learner.module``) and the package now uses those.

Inventory (file:line as of this module's commit; ``name``: where -- what for -> treatment):

* ``ray._private.worker._post_init_hooks``: registry.py:267 -- re-register our names after every ray.init() -> shim
  add_post_init_hook.
* ``ray.tune.registry._global_registry``: registry.py:206,239; experiment.py:145; common/validation.py:51,397 -- is
  an env/trainable registered; an env creator -> shims tune_registry_contains, tune_registry_get.
* ``ray.rllib.algorithms.registry._get_algorithm_class``: registry.py:198 -- the class of an RLlib built-in name ->
  shim rllib_algorithm_class.
* ``AlgorithmConfig._translate_special_keys``: experiment.py:250 -- old RLlib config keys to attribute names -> shim
  translate_config_key.
* ``AlgorithmConfig._model_config``: common/validation.py:255 -- the model config the user gave, without RLlib's
  defaults -> shim given_model_config.
* ``AlgorithmConfig._rl_module_spec``: common/validation.py:288 -- the module spec the user gave -> shim
  given_rl_module_spec.
* ``AlgorithmConfig._train_batch_size_per_learner``: common/validation.py:172 -- None unless the user set it -> shim
  given_train_batch_size_per_learner.
* ``AlgorithmConfig._env_to_module_connector``: common/validation.py:546 -- a custom connector may change the obs
  space -> shim given_env_to_module_connector.
* ``AlgorithmConfig._<setting> (by name)``: common/validation.py:174 -- the stored value behind a property-backed
  setting -> shim setting_attribute.
* ``EnvRunnerGroup._worker_manager``: common/blackbox/pool.py:178,226 -- the runner actors (several calls in
  flight), their health -> shim worker_manager.
* ``MetricsLogger._threading_lock``: algorithms/impact/impact_learner.py:142 -- a real lock for the learner thread
  (as IMPALA's learner) -> shim set_metrics_lock.
* ``Learner._learner_index``: algorithms/impact/impact.py:709; impact_learner.py:146,291 -- which learner: package
  shares, who broadcasts -> shim learner_index.
* ``Learner._make_batch_if_necessary``: algorithms/impact/impact_learner.py:216 -- episodes to a train batch
  (learner connector) -> shim make_batch_if_necessary.
* ``Learner._get_tensor_variable``: algorithms/impact/impact_learner.py:158 -- the KL coefficient as a tensor on the
  device -> shim tensor_variable.
* ``Learner.update(_no_metrics_reduce=True)``: algorithms/impact/impact_learner.py:289; common/refer/learner.py:172
  -- one update, metrics reduced once per many updates -> shim update_without_metrics_reduce.
* ``Checkpointable._check_component``: algorithms/impact/impact_learner.py:579; common/offpolicy/learner.py:118 --
  is a state component asked for -> shim wants_component.
* ``TorchLearner._get_optimizer_lr``: common/refer/torch_learner.py:212 -- an optimizer's lr, for the metrics ->
  shim optimizer_lr.
* ``IMPALA._pre_queue_episode_refs``: algorithms/impact/impact.py:669 -- IMPALA's packing of fragments into train
  batches -> shim pre_queue_episode_refs.
* ``torch._foreach_lerp_``: common/offpolicy/target_networks.py:34 -- one fused soft target update -> shim
  foreach_lerp_.
* ``torch._foreach_norm``: common/refer/torch_learner.py:178; algorithms/impact/torch/impact_torch_learner.py:112 --
  fused norms: finite-gradient and finite-weight checks -> shim foreach_norm.
* ``EnvRunner._try_env_step``: common/guards.py:245 -- count failed env steps in a row -> PRIVATE_OVERRIDES.
* ``SingleAgentEnvRunner._increase_sampled_metrics``: common/guards.py:277 -- the sampled-steps metrics get the
  steps really taken -> PRIVATE_OVERRIDES.
* ``AlgorithmConfig._model_config_auto_includes``: algorithms/td3/td3.py:139; algorithms/ddpg/ddpg.py:73;
  common/refer/config.py:244 -- the model-config keys the algorithm sets itself -> PRIVATE_PROPERTIES.
* ``AlgorithmConfig._dont_auto_sync_env_runner_states``: common/blackbox/config.py:166 -- the black-box family syncs
  its runners itself -> INHERITED_ATTRIBUTES.
* ``IMPALA._episode_packs_being_built, IMPALA._env_runner_state_server``: algorithms/impact/impact.py:769,813-816 --
  pending env steps; weights pushed through the state server -> INHERITED_ATTRIBUTES.
* ``Learner._weights_seq_no, _named_optimizers, _metrics_all_modules_num_{env,module}_steps_trained;
  TorchLearner._params, _optimizer_parameters, _module_optimizers, _grad_scalers, _lr_scheduler_classes,
  _torch_compile_complete_update``: common/refer/torch_learner.py:119-264; algorithms/td3/td3_learner.py:108;
  common/blackbox/learner.py:90,107; algorithms/impact/impact_learner.py:284 -- the ReF-ER fast update path (RLlib's
  update steps without its batch handling), optimizers by name, the weights' version -> INHERITED_ATTRIBUTES.
* ``EnvRunner._seed``: common/blackbox/env_runner.py:113,127; common/erl/env_runner.py:71; common/guards.py:240 --
  the runner's seed: episode seeds, a recreated env's seed -> INHERITED_ATTRIBUTES.
* ``TorchDistribution._dist``: common/refer/distributions.py:31-35 -- the wrapped torch distribution ->
  INHERITED_ATTRIBUTES.
* ``AlgorithmConfig._value_error``: every Config's validate(); common/validation.py; common/threads.py:39 -- reject
  a setting before actors start -> CONVENTIONS (see Decisions).
* ``RLModule._forward, _forward_train, _forward_exploration, _forward_inference``: the algorithms' RL modules -- the
  module's forward passes -> CONVENTIONS.
* ``synchronous_parallel_sample(_uses_new_env_runners=, _return_metrics=)``: common/offpolicy/algorithm.py:55 --
  the new-stack sampling with the runners' metrics -> shim sample_episodes_and_metrics.
* ``MultiRLModule._rl_modules; Learner._device, Learner._module``: (were in IMPACT, ReF-ER, TD3, DDPG, V-RACER,
  black-box learners) -- the modules; the device -> now the public items()/values(), device, module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import threading

    import torch
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.algorithms.impala.impala import IMPALA
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.env.env_runner_group import EnvRunnerGroup
    from ray.rllib.policy.sample_batch import MultiAgentBatch
    from ray.rllib.utils.actor_manager import FaultTolerantActorManager
    from ray.rllib.utils.checkpoints import Checkpointable
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

#: RLlib's private methods that the package's subclasses override: ``"module:Class.method"`` ->
#: the parameter names of RLlib's method (the overrides take the same), and where they are.
PRIVATE_OVERRIDES: dict[str, tuple[tuple[str, ...], str]] = {
    "ray.rllib.env.env_runner:EnvRunner._try_env_step": (
        ("self", "actions"),
        "common/guards.py _FiniteEnvRunnerMixin: counts failed env steps in a row",
    ),
    "ray.rllib.env.single_agent_env_runner:SingleAgentEnvRunner._increase_sampled_metrics": (
        ("self", "num_steps", "num_episodes_completed"),
        "common/guards.py FiniteSingleAgentEnvRunner: the sampled-steps metrics get the steps really taken",
    ),
}

#: Private properties of RLlib that the package's subclasses override (``"module:Class.name"``).
PRIVATE_PROPERTIES: dict[str, str] = {
    "ray.rllib.algorithms.algorithm_config:AlgorithmConfig._model_config_auto_includes": (
        "td3/td3.py, ddpg/ddpg.py, common/refer/config.py: model-config keys the algorithm sets itself"
    ),
}

#: Private attributes that RLlib classes set and the package's subclasses read or write on
#: ``self``: ``"module:Class"`` -> the names.
INHERITED_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "ray.rllib.algorithms.algorithm_config:AlgorithmConfig": ("_dont_auto_sync_env_runner_states",),
    "ray.rllib.algorithms.impala.impala:IMPALA": ("_episode_packs_being_built", "_env_runner_state_server"),
    "ray.rllib.core.learner.learner:Learner": (
        "_weights_seq_no",
        "_named_optimizers",
        "_params",
        "_optimizer_parameters",
        "_module_optimizers",
        "_metrics_all_modules_num_env_steps_trained",
        "_metrics_all_modules_num_module_steps_trained",
    ),
    "ray.rllib.core.learner.torch.torch_learner:TorchLearner": (
        "_grad_scalers",
        "_lr_scheduler_classes",
        "_torch_compile_complete_update",
    ),
    "ray.rllib.env.env_runner:EnvRunner": ("_seed",),
    "ray.rllib.core.distribution.torch.torch_distribution:TorchDistribution": ("_dist",),
}

#: Underscore names RLlib documents as extension points, used directly (see the module docstring):
#: name -> ("module:Class", why).
CONVENTIONS: dict[str, tuple[str, str]] = {
    "_value_error": (
        "ray.rllib.algorithms.algorithm_config:AlgorithmConfig",
        "validate()'s documented way to reject a setting (raises ValueError)",
    ),
    "_forward": ("ray.rllib.core.rl_module.rl_module:RLModule", "RLModule's documented forward hook"),
    "_forward_train": ("ray.rllib.core.rl_module.rl_module:RLModule", "RLModule's documented forward hook"),
    "_forward_exploration": ("ray.rllib.core.rl_module.rl_module:RLModule", "RLModule's documented forward hook"),
    "_forward_inference": ("ray.rllib.core.rl_module.rl_module:RLModule", "RLModule's documented forward hook"),
}


# ---------------------------------------------------------------------------------------------
# Ray and Tune.
# ---------------------------------------------------------------------------------------------
def add_post_init_hook(hook: Callable[[], Any]) -> None:
    """Runs ``hook()`` after every ``ray.init()`` in this process (``ray._private.worker._post_init_hooks``)."""
    import ray._private.worker

    ray._private.worker._post_init_hooks.append(hook)


def tune_registry_contains(category: str, key: str) -> bool:
    """Whether Tune's registry holds ``key`` under ``category`` (``ENV_CREATOR``, ``TRAINABLE_CLASS``)."""
    from ray.tune.registry import _global_registry

    return bool(_global_registry.contains(category, key))


def tune_registry_get(category: str, key: str) -> Any:
    """What Tune's registry holds for ``key`` under ``category`` (an env creator, a trainable)."""
    from ray.tune.registry import _global_registry

    return _global_registry.get(category, key)


def rllib_algorithm_class(name: str) -> type:
    """The class of an RLlib built-in algorithm name (``"PPO"``), imported on demand."""
    from ray.rllib.algorithms.registry import _get_algorithm_class

    return _get_algorithm_class(name)


def worker_manager(group: EnvRunnerGroup) -> FaultTolerantActorManager:
    """The actor manager of an ``EnvRunnerGroup``: its ``actors()`` by id and their health."""
    return group._worker_manager


def set_metrics_lock(metrics: MetricsLogger, lock: threading.RLock) -> None:
    """Makes ``metrics`` take ``lock`` around its reads and writes (a no-op lock by default),
    as RLlib's IMPALA learner does for its learner thread."""
    metrics._threading_lock = lock  # type: ignore[assignment]  # RLlib annotates its no-op default lock


# ---------------------------------------------------------------------------------------------
# AlgorithmConfig: the values as the user gave them.
# ---------------------------------------------------------------------------------------------
def translate_config_key(config: AlgorithmConfig, key: str) -> str:
    """The attribute name of an RLlib config key, old spellings translated, without a warning."""
    return config._translate_special_keys(key, warn_deprecated=False)


def given_model_config(config: AlgorithmConfig) -> Any:
    """The model config the user gave (dict or dataclass), without RLlib's defaults merged in."""
    return config._model_config


def given_rl_module_spec(config: AlgorithmConfig) -> Any:
    """The ``RLModuleSpec``/``MultiRLModuleSpec`` given with ``config.rl_module(...)``, or None."""
    return config._rl_module_spec


def given_train_batch_size_per_learner(config: AlgorithmConfig) -> int | None:
    """``train_batch_size_per_learner`` as set (None: RLlib derives it from ``train_batch_size``)."""
    value: int | None = config._train_batch_size_per_learner
    return value


def given_env_to_module_connector(config: AlgorithmConfig) -> Any:
    """The custom env-to-module connector builder given, or None."""
    return config._env_to_module_connector


def setting_attribute(config: AlgorithmConfig, name: str) -> str:
    """The attribute that stores setting ``name``: ``name`` itself, or the private ``_name`` behind
    RLlib's property of that name (``model_config``, ``train_batch_size_per_learner``, ...)."""
    return name if name in vars(config) else f"_{name}"


# ---------------------------------------------------------------------------------------------
# Learners and algorithms.
# ---------------------------------------------------------------------------------------------
def learner_index(learner: Learner) -> int:
    """The index of ``learner`` in its learner group (0 for a local learner)."""
    index: int = learner._learner_index
    return index


def make_batch_if_necessary(learner: Learner, training_data: TrainingData) -> MultiAgentBatch:
    """RLlib's episodes -> train batch step (the learner connector) of ``Learner.update``."""
    batch: MultiAgentBatch = learner._make_batch_if_necessary(training_data=training_data)
    return batch


def tensor_variable(learner: Learner, value: Any) -> Any:
    """A tensor of ``value`` on the learner's device (RLlib's ``_get_tensor_variable``)."""
    return learner._get_tensor_variable(value)


def update_without_metrics_reduce(
    learner: Learner, batch: MultiAgentBatch, timesteps: dict[str, Any] | None = None
) -> None:
    """RLlib's ``Learner.update`` on one batch, leaving the logged metrics unreduced (the caller
    reduces once per many updates). Calls ``Learner.update`` itself, not an override."""
    from ray.rllib.core.learner.learner import Learner

    Learner.update(learner, batch=batch, timesteps=timesteps, _no_metrics_reduce=True)


def wants_component(obj: Checkpointable, name: str, components: Any, not_components: Any) -> bool:
    """Whether ``get_state(components, not_components=...)`` asks for the component ``name``."""
    return bool(obj._check_component(name, components, not_components))


def optimizer_lr(learner: Learner, optimizer: Any) -> float:
    """The learning rate of ``optimizer`` as RLlib's learners log it."""
    return float(learner._get_optimizer_lr(optimizer))


def pre_queue_episode_refs(algo: IMPALA, episode_refs: Sequence[Any], package_size: int) -> list[list[Any]]:
    """IMPALA's packing of episode refs into packages of about ``package_size`` env steps (the
    refs of an unfinished package stay in the algorithm for the next call)."""
    packages: list[list[Any]] = algo._pre_queue_episode_refs(list(episode_refs), package_size=package_size)
    return packages


# ---------------------------------------------------------------------------------------------
# torch.
# ---------------------------------------------------------------------------------------------
def foreach_lerp_(targets: list[torch.Tensor], mains: list[torch.Tensor], weight: float) -> None:
    """In place, ``t ← t + weight·(m − t)`` for every pair, in one fused op."""
    import torch

    torch._foreach_lerp_(targets, mains, weight)


def foreach_norm(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The 2-norm of each tensor, in one fused op."""
    import torch

    return list(torch._foreach_norm(tensors))


# ---------------------------------------------------------------------------------------------
# Sampling.
# ---------------------------------------------------------------------------------------------
def sample_episodes_and_metrics(
    group: EnvRunnerGroup, *, sample_timeout_s: float | None, **kwargs: Any
) -> tuple[list[Any], list[dict[str, Any]]]:
    """RLlib's ``synchronous_parallel_sample`` on new-stack env runners, concatenated: (episodes,
    the runners' metrics). ``kwargs``: its further public arguments (``max_env_steps``, ...)."""
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    sampled = synchronous_parallel_sample(
        worker_set=group,
        concat=True,
        sample_timeout_s=sample_timeout_s,
        _uses_new_env_runners=True,
        _return_metrics=True,
        **kwargs,
    )
    return cast(tuple[list[Any], list[dict[str, Any]]], sampled)  # with _return_metrics=True
