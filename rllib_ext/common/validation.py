"""Config checks shared by every rllib_ext algorithm's ``validate()`` (before any actor starts).

* :func:`check_finite_settings`: a NaN or ±inf anywhere in a numeric setting (``lr``,
  ``gamma``, ``optimizer_kwargs``, ``model_config``, schedules ...) is one clear error naming
  the setting; range checks such as ``x <= 0`` let NaN through, this does not.
* :func:`env_spaces`: the observation and action spaces of ``config.env`` for a single-agent
  algorithm (a ``MultiAgentEnv`` or ``config.multi_agent(...)`` is one error saying that
  multi-agent is not supported), read from one env built on the driver (:func:`make_single_env`,
  resolved as RLlib resolves it), so that an algorithm can reject a space it cannot take (a
  Discrete action space given to a continuous-control method, a Dict or image observation given
  to an MLP) at ``build_algo()`` and in ``rllib train``, instead of failing inside every env
  runner actor.
* :func:`check_vector_spaces`: the common case, 1-d Box observations and the action kinds an
  algorithm supports.
* :func:`module_spaces`: the spaces of each RLModule, for single-agent envs and for
  ``MultiAgentEnv`` s with several policies (RLlib's own inference through ``policy_mapping_fn``);
  a ``MultiAgentEnv`` without policies, or policies on a single-agent env, is one clear error.
* :func:`check_default_module_builds`: for algorithms on RLlib's default networks (IMPACT),
  RLlib's own catalog decides which spaces work; the module(s) are built once on the driver.
* :func:`check_unused_settings`: a setting an algorithm never reads, changed from its default,
  is one error saying what to use instead (a silently ignored setting is never accepted).
* :func:`changed_model_config` and :func:`check_model_config_keys`: the ``model_config`` entries
  a user gave that differ from RLlib's own defaults (``DefaultModelConfig``), and one error for
  those the algorithm's network never reads (``use_lstm=True`` given to an MLP-only algorithm).
* :func:`check_env_runner_callbacks`: RLlib's env-runner callbacks (``on_episode_end`` ...)
  given to an algorithm whose env runners never call them are one error.
* :func:`check_user_module`: a module class given with ``config.rl_module(rl_module_spec=...)``
  must have the APIs the algorithm's Learner uses (``Learner.rl_module_required_apis()``, e.g.
  IMPACT_EXT's target network), checked at ``validate()`` and not inside a learner thread.
* :class:`KeepsMinusOneSettings`: a config mixin; without it ``build_algo()`` silently replaces
  a setting of -1 (σ = -1, N = -1) by its default instead of rejecting it.
* :func:`algo_name`: the registered name (``IMPACT_EXT``) of a config's or algorithm's class,
  for messages.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.env_context import EnvContext
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.utils.annotations import override
from ray.tune.registry import ENV_CREATOR

from rllib_ext import _compat
from rllib_ext.common.names import registered_name

#: Action kinds for :func:`check_vector_spaces`.
DISCRETE, CONTINUOUS = "discrete", "continuous"
# Settings the finite check leaves alone: the env's own arguments.
_FINITE_CHECK_SKIPPED = ("env_config",)


def is_integer(x: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def algo_name(config_or_cls: Any) -> str:
    """The registered name of an algorithm (``"IMPACT_EXT"``), else its class name.

    The names come from :data:`rllib_ext.common.names.ALGORITHM_NAMES`, which the registry fills
    from its one list; a subclass that is not registered itself gets its class name.

    Args:
        config_or_cls: An AlgorithmConfig (its ``algo_class``), an Algorithm class or instance.
    """
    cls = config_or_cls.algo_class if isinstance(config_or_cls, AlgorithmConfig) else config_or_cls
    if isinstance(cls, str):
        return cls
    if not isinstance(cls, type):
        cls = type(cls)
    return registered_name(cls) or cls.__name__


if TYPE_CHECKING:
    # The mixin's super() is the AlgorithmConfig it is mixed into (at run time it derives from object).
    _MixedIntoConfig = AlgorithmConfig
else:
    _MixedIntoConfig = object


class KeepsMinusOneSettings(_MixedIntoConfig):
    """AlgorithmConfig mixin: ``get_state()`` keeps the settings that equal -1.

    RLlib 2.60's ``AlgorithmConfig.get_state()`` drops every attribute equal to -1 (its
    ``DEPRECATED_VALUE`` sentinel), and ``build_algo()`` rebuilds the config from that state, so a
    user's ``noise_stdev=-1`` would silently become the default 0.02 instead of failing
    ``validate()``. RLlib's own sentinels (deprecated settings whose default is -1) stay dropped:
    ``update_from_dict`` (``rllib evaluate``) would reject them. Put it first among the bases:
    ``class XConfig(KeepsMinusOneSettings, AlgorithmConfig)``.
    """

    @override(AlgorithmConfig)
    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        sentinels = _default_minus_one_settings(type(self))
        for key, value in vars(self).items():
            if key not in state and key not in sentinels and _is_minus_one(value):
                state[key] = value
        return state


_MINUS_ONE_DEFAULTS: dict[type, frozenset[str]] = {}


def _default_minus_one_settings(config_cls: type) -> frozenset[str]:
    """Attributes that are -1 in a fresh ``config_cls()`` (RLlib's deprecated-setting sentinels)."""
    if config_cls not in _MINUS_ONE_DEFAULTS:
        defaults = vars(default_config(config_cls))
        _MINUS_ONE_DEFAULTS[config_cls] = frozenset(
            k for k, v in defaults.items() if _is_minus_one(v) or k in ("algo_class", "_is_frozen")
        )
    return _MINUS_ONE_DEFAULTS[config_cls]


def _is_minus_one(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == -1


_DEFAULT_CONFIGS: dict[type, AlgorithmConfig] = {}


def default_config(config_cls: type) -> AlgorithmConfig:
    """A fresh ``config_cls()``, made once per class: the defaults settings are compared with (read only)."""
    if config_cls not in _DEFAULT_CONFIGS:
        _DEFAULT_CONFIGS[config_cls] = config_cls()
    return _DEFAULT_CONFIGS[config_cls]


def _equal(a: Any, b: Any) -> bool:
    """``a == b``, with lists and tuples of the same items equal."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. arrays: compared by identity
        return a is b


# ---------------------------------------------------------------------------------------------
# Settings an algorithm never reads.
# ---------------------------------------------------------------------------------------------
def check_unused_settings(config: AlgorithmConfig, unused: Mapping[str, str]) -> None:
    """One error naming every setting of ``unused`` whose value is not the config class's default.

    An algorithm that never reads a setting would otherwise run as if it had not been given
    (RLlib's example scripts set ``num_epochs``, ``lr``, connectors ... whatever the algorithm).

    Args:
        config: The config being validated (errors go through its ``_value_error``).
        unused: ``{setting: what to use instead}``, named as the user sets them: RLlib's private
            attributes (``_env_to_module_connector``) by their public name
            (``env_to_module_connector``). ``train_batch_size`` counts only where RLlib does not
            derive ``train_batch_size_per_learner`` from it (that is set, or unused too).

    The evaluation copy of a config (RLlib sets ``explore=False`` there) is not checked.
    """
    if config.in_evaluation:
        return
    defaults = default_config(type(config))
    changed = []
    for name, instead in unused.items():
        if (
            name == "train_batch_size"
            and "train_batch_size_per_learner" not in unused
            and _compat.given_train_batch_size_per_learner(config) is None
        ):
            continue  # RLlib derives the per-learner batch from it
        attr = _compat.setting_attribute(config, name)
        value, default = getattr(config, attr, None), getattr(defaults, attr, None)
        if not _equal(value, default):
            changed.append(
                f"`{name}` = {value!r} has no effect in {algo_name(config)} (default {default!r}): {instead}"
            )
    if changed:
        config._value_error("; ".join(changed))


#: Why RLlib's learner connectors do nothing in the replay-based learners (TD3_EXT, the ReF-ER
#: family): their Learners store the sampled episodes' steps in their own replay, as sampled.
REPLAY_LEARNER_CONNECTOR = (
    "the Learner stores the sampled episodes' steps in its replay as they are and never runs RLlib's "
    "learner pipeline (env-to-module connectors that write observations into the episodes, such as "
    "MeanStdFilter, do apply)"
)

#: Why RLlib's ``clip_rewards`` does nothing where the algorithm does not clip (RLlib 2.60's new
#: API stack does not read it either; IMPACT_EXT clips in its learner pipeline).
CLIP_REWARDS_UNREAD = "the update sees the env's rewards unclipped (RLlib's new API stack does not read it)"

#: Why RLlib's ``observation_filter`` (old API stack) does nothing on the new API stack.
OLD_STACK_OBSERVATION_FILTER = (
    "RLlib's new API stack does not read it; standardize observations with an env-to-module connector "
    "(`config.env_runners(env_to_module_connector=lambda env, spaces, device: MeanStdFilter())`)"
)

#: RLlib callbacks that only RLlib's own env runners call.
ENV_RUNNER_CALLBACKS = (
    "on_environment_created",
    "on_episode_created",
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
    "on_sample_end",
)


def check_env_runner_callbacks(config: AlgorithmConfig, runners: str) -> None:
    """One error for RLlib env-runner callbacks (:data:`ENV_RUNNER_CALLBACKS`, overridden in
    ``callbacks_class`` or given as ``callbacks_on_*`` functions) on env runners that never call them.

    Args:
        config: The config being validated.
        runners: What the algorithm's env runners are, for the message.
    """
    from ray.rllib.callbacks.callbacks import RLlibCallback

    classes = config.callbacks_class if isinstance(config.callbacks_class, (list, tuple)) else [config.callbacks_class]
    hooks = [
        f"{cls.__name__}.{hook}"
        for cls in classes
        if isinstance(cls, type)
        for hook in ENV_RUNNER_CALLBACKS
        if getattr(cls, hook, None) is not getattr(RLlibCallback, hook)
    ]
    hooks += [f"callbacks_{hook}" for hook in ENV_RUNNER_CALLBACKS if getattr(config, f"callbacks_{hook}", None)]
    if hooks:
        config._value_error(
            f"{algo_name(config)}: {', '.join(hooks)} would never run: {runners} call none of RLlib's env-runner "
            f"callbacks ({', '.join(ENV_RUNNER_CALLBACKS)}); algorithm-level ones (on_train_result, "
            "on_algorithm_init ...) do run"
        )


#: RLlib's own ``model_config`` defaults (``DefaultModelConfig``).
RLLIB_MODEL_DEFAULTS: dict[str, Any] = dataclasses.asdict(DefaultModelConfig())


def changed_model_config(config: AlgorithmConfig) -> dict[str, Any]:
    """The ``model_config`` entries the user gave whose value is not RLlib's default.

    ``config.rl_module(model_config=...)`` takes a dict or a ``DefaultModelConfig``; the latter,
    passed to set one key (an activation, an initializer), carries every other key at RLlib's
    default (``fcnet_hiddens=[256, 256]`` ...). Those are not choices of the user, so checks of
    the network compare against RLlib's defaults, not against "was a model config given". Keys
    RLlib does not know (a custom module's) always count; the algorithm's own auto-included keys
    are not the user's and are left out.
    """
    given = _compat.given_model_config(config)
    if dataclasses.is_dataclass(given) and not isinstance(given, type):
        given = dataclasses.asdict(given)
    return {
        key: value
        for key, value in dict(given or {}).items()
        if key not in RLLIB_MODEL_DEFAULTS or not _equal(value, RLLIB_MODEL_DEFAULTS[key])
    }


def check_model_config_keys(config: AlgorithmConfig, used: Collection[str], network: str) -> None:
    """One error naming the changed ``model_config`` entries (:func:`changed_model_config`) that
    the algorithm's network never reads, e.g. ``use_lstm=True`` for an MLP-only algorithm.

    Args:
        config: The config being validated.
        used: The keys its default module reads.
        network: What sets its network, for the message.

    Not checked with a user module class (``rl_module_spec``), which may read any key.
    """
    if user_module_classes(config):
        return
    unread = {key: value for key, value in changed_model_config(config).items() if key not in used}
    if unread:
        listed = ", ".join(f"{key}={value!r}" for key, value in unread.items())
        recurrent = " (recurrent networks are not supported)" if unread.get("use_lstm") else ""
        config._value_error(f"{algo_name(config)} does not read model_config {listed}{recurrent}: {network}")


def user_module_classes(config: AlgorithmConfig) -> dict[str, type]:
    """``{module id: class}`` of the module classes given with ``config.rl_module(rl_module_spec=...)``
    (an ``RLModuleSpec`` or a ``MultiRLModuleSpec``) other than the algorithm's default module class."""
    spec = _compat.given_rl_module_spec(config)
    if spec is None:
        return {}
    specs = spec.rl_module_specs if isinstance(spec, MultiRLModuleSpec) else {DEFAULT_MODULE_ID: spec}
    if not isinstance(specs, dict):  # one spec for every module
        specs = {DEFAULT_MODULE_ID: specs}
    default = config.get_default_rl_module_spec()
    default_cls = getattr(default, "module_class", None)
    classes: dict[str, type] = {}
    for module_id, module_spec in specs.items():
        module_cls = getattr(module_spec, "module_class", None)
        if isinstance(module_cls, type) and module_cls is not default_cls:
            classes[module_id] = module_cls
    return classes


def check_user_module(config: AlgorithmConfig, *bases: type) -> None:
    """A user module class must have what the algorithm uses, checked before any actor starts.

    RLlib checks a module against ``Learner.rl_module_required_apis()`` only when the Learner
    builds it (IMPACT_EXT's, inside its learner thread, then fails with "no attribute
    'forward_target'" for a module without a target network); here each class of
    :func:`user_module_classes` is checked against those APIs in ``validate()``.

    Args:
        config: The config being validated.
        *bases: Classes the module must subclass as well: the default module of an algorithm
            whose learner or env runners use its internals (the black-box policy, TD3's actor and
            critics ...).
    """
    classes = user_module_classes(config)
    if not classes:
        return
    required = [*config.learner_class.rl_module_required_apis(), *bases]
    for module_id, module_cls in classes.items():
        missing = [api for api in required if not issubclass(module_cls, api)]
        if missing:
            needs = "; ".join(_required_api(api) for api in missing)
            config._value_error(
                f"{algo_name(config)} cannot use module class {module_cls.__name__} of `rl_module_spec` (module "
                f"{module_id!r}): its learner needs {needs}"
            )


def _required_api(api: type) -> str:
    """An API a module class lacks, for the message: its abstract methods, or its name."""
    abstract: Collection[str] = getattr(api, "__abstractmethods__", None) or ()
    return f"{api.__name__} ({', '.join(sorted(abstract))})" if abstract else f"a subclass of {api.__name__}"


# ---------------------------------------------------------------------------------------------
# Finite settings.
# ---------------------------------------------------------------------------------------------
def _walk(name: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        yield name, value
    elif depth < 4 and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(f"{name}[{i}]", item, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(f"{name}[{key!r}]", item, depth + 1)


def nonfinite_settings(config: AlgorithmConfig) -> list[tuple[str, float]]:
    """(setting, value) of every NaN/±inf float in the config's settings (nested ones too).

    Timeouts (a setting whose name contains ``timeout``) may be +inf; ``env_config`` belongs to
    the env and is not checked.
    """
    bad = []
    for attr, value in vars(config).items():
        name = attr.lstrip("_")
        if name in _FINITE_CHECK_SKIPPED or callable(value):
            continue
        for path, x in _walk(name, value):
            if math.isnan(x) or (math.isinf(x) and not (x > 0 and "timeout" in name)):
                bad.append((path, x))
    return bad


def check_finite_settings(config: AlgorithmConfig) -> None:
    """One ``config._value_error`` naming every NaN/inf setting (see :func:`nonfinite_settings`)."""
    bad = nonfinite_settings(config)
    if bad:
        listed = ", ".join(f"`{name}` = {value!r}" for name, value in bad)
        config._value_error(f"{algo_name(config)}: settings must be finite numbers, got {listed}")


def check_optimizer(config: AlgorithmConfig) -> None:
    """One clear error for an ``optimizer`` name that ``rllib_ext.optim`` does not register, or
    ``optimizer_kwargs`` that are not a dict (configs that choose their optimizer by name)."""
    from rllib_ext.optim import get_optimizer_class

    try:
        # A name in the configs that call this (RLlib types its own old-stack `optimizer` as a dict);
        # anything else is the TypeError reported here.
        get_optimizer_class(cast(str, config.optimizer))
    except (ValueError, TypeError) as e:
        config._value_error(f"`optimizer`: {e}")
    kwargs = getattr(config, "optimizer_kwargs", None)
    if kwargs is not None and not isinstance(kwargs, dict):
        config._value_error(f"`optimizer_kwargs` must be a dict, got {kwargs!r}")


# ---------------------------------------------------------------------------------------------
# Env spaces.
# ---------------------------------------------------------------------------------------------
#: What ``config.env`` may be: a registered name or gymnasium id, or an env class or creator.
#: (RLlib's ``AlgorithmConfig.__init__`` sets it to None, from which mypy infers the type None.)
EnvSetting = str | Callable[[EnvContext], Any] | None


def make_single_env(config: AlgorithmConfig, worker_index: int = 0, num_workers: int = 0) -> gym.Env[Any, Any]:
    """One (non-vectorized) env, resolved like RLlib does: Tune-registered name, then gymnasium id."""
    env_ctx = EnvContext(dict(config.env_config or {}), worker_index=worker_index, num_workers=num_workers)
    env: EnvSetting = config.env
    made: gym.Env[Any, Any]
    if isinstance(env, str) and _compat.tune_registry_contains(ENV_CREATOR, env):
        made = _compat.tune_registry_get(ENV_CREATOR, env)(env_ctx)
    elif callable(env):
        made = env(env_ctx)
    else:
        made = gym.make(cast(str, env), **dict(config.env_config or {}))  # gymnasium raises for None
    return made


def _driver_env(config: AlgorithmConfig) -> gym.Env[Any, Any] | None:
    """One env built on the driver (the caller closes it); an error naming the env if it fails."""
    try:
        return make_single_env(config)
    except Exception as e:  # noqa: BLE001 - reported as a config error naming the env
        config._value_error(f"{algo_name(config)}: cannot create env {config.env!r}: {type(e).__name__}: {e}")
        return None


def env_spaces(config: AlgorithmConfig) -> tuple[gym.Space[Any], gym.Space[Any]] | None:
    """(observation space, action space) a single-agent algorithm sees, or None when there is nothing to check.

    A multi-agent setup (a ``MultiAgentEnv``, or policies named with ``config.multi_agent``) is
    one error saying that multi-agent is not supported, before any space is looked at. Spaces set
    with ``config.environment(observation_space=..., action_space=...)`` win (as in RLlib);
    otherwise one env is built on the driver and closed. None without an env, and for the
    evaluation copy of a config (its env is the same; the check runs once per build).

    Raises (through ``config._value_error``) ValueError naming the env if it cannot be created,
    or saying that multi-agent is not supported.
    """
    if config.env is None or config.in_evaluation:
        return None
    if config.is_multi_agent:
        _not_multi_agent(config, f"the config names policies {sorted(config.policies)} (`config.multi_agent(...)`)")
    if isinstance(config.env, type) and issubclass(config.env, MultiAgentEnv):
        _not_multi_agent(config, f"env {config.env!r} is a MultiAgentEnv")
    obs_space, act_space = config.observation_space, config.action_space
    if obs_space is None or act_space is None:
        env = _driver_env(config)
        if env is None:
            return None
        try:
            if isinstance(env.unwrapped, MultiAgentEnv):
                _not_multi_agent(config, f"env {config.env!r} is a MultiAgentEnv")
            obs_space = obs_space or env.observation_space
            act_space = act_space or env.action_space
        finally:
            env.close()
    return obs_space, act_space


def _not_multi_agent(config: AlgorithmConfig, why: str) -> None:
    config._value_error(
        f"{algo_name(config)} does not support multi-agent training ({why}): give it a single-agent env"
    )


def is_vector_box(space: gym.Space[Any]) -> bool:
    """A 1-d Box (a state vector, or a vector of continuous actions)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 1


def check_vector_spaces(
    config: AlgorithmConfig, spaces: tuple[gym.Space[Any], gym.Space[Any]] | None, actions: Sequence[str]
) -> None:
    """Rejects what an MLP-on-state-vector algorithm cannot take, naming the env and the space.

    Args:
        config: The config being validated (errors go through its ``_value_error``).
        spaces: :func:`env_spaces`' result (None: nothing to check).
        actions: Supported action kinds: :data:`DISCRETE` (``Discrete``) and/or
            :data:`CONTINUOUS` (a 1-d ``Box``).
    """
    if spaces is None:
        return
    obs_space, act_space = spaces
    name = algo_name(config)
    if not is_vector_box(obs_space):
        config._value_error(
            f"{name} needs a 1-d Box observation space (a state vector); env {config.env!r} has {obs_space}"
        )
    kinds = {DISCRETE: isinstance(act_space, gym.spaces.Discrete), CONTINUOUS: is_vector_box(act_space)}
    if not any(kinds[k] for k in actions):
        wanted = " or ".join({DISCRETE: "a Discrete", CONTINUOUS: "a continuous (1-d Box)"}[k] for k in actions)
        config._value_error(f"{name} needs {wanted} action space; env {config.env!r} has {act_space}")


def module_spaces(config: AlgorithmConfig) -> dict[str, tuple[gym.Space[Any], gym.Space[Any]]] | None:
    """(observation space, action space) of each RLModule the algorithm will build, or None.

    Single-agent: ``{DEFAULT_MODULE_ID: env_spaces(config)}``. Multi-agent (the config names its
    policies with ``config.multi_agent(policies=..., policy_mapping_fn=...)``): one env is built
    on the driver, must be a ``MultiAgentEnv``, and RLlib's own inference
    (``AlgorithmConfig.get_multi_agent_setup``: the agents' spaces, through
    ``policy_mapping_fn`` where agents differ) gives each module's spaces. None without an env
    and for the evaluation copy of a config, as :func:`env_spaces`.

    Raises (through ``config._value_error``) ValueError naming the env if it cannot be created,
    if it is a ``MultiAgentEnv`` but the config names no policies, or the other way round.
    """
    if config.env is None or config.in_evaluation:
        return None
    name = algo_name(config)
    if not config.is_multi_agent and config.observation_space is not None and config.action_space is not None:
        return {DEFAULT_MODULE_ID: (config.observation_space, config.action_space)}
    env = _driver_env(config)
    if env is None:
        return None
    try:
        multi_agent_env = isinstance(env.unwrapped, MultiAgentEnv)
        if multi_agent_env and not config.is_multi_agent:
            config._value_error(
                f"{name}: env {config.env!r} is a MultiAgentEnv: name its policies and map its agents to "
                "them with `config.multi_agent(policies=..., policy_mapping_fn=...)`"
            )
        if config.is_multi_agent and not multi_agent_env:
            config._value_error(
                f"{name}: `policies` {sorted(config.policies)} name a multi-agent setup, but env "
                f"{config.env!r} is not a MultiAgentEnv"
            )
        if not config.is_multi_agent:
            return {
                DEFAULT_MODULE_ID: (
                    config.observation_space or env.observation_space,
                    config.action_space or env.action_space,
                )
            }
        try:
            policies, _ = config.get_multi_agent_setup(env=env.unwrapped)
        except Exception as e:  # noqa: BLE001 - reported as one config error naming the env
            config._value_error(f"{name}: cannot map the agents of env {config.env!r} to `policies`: {e}")
            return None
        return {pid: (spec.observation_space, spec.action_space) for pid, spec in policies.items()}
    finally:
        env.close()


def check_default_module_builds(
    config: AlgorithmConfig,
    spaces: tuple[gym.Space[Any], gym.Space[Any]] | dict[str, tuple[gym.Space[Any], gym.Space[Any]]] | None,
) -> None:
    """Builds the (inference) RLModule(s) on the driver: RLlib's catalog rejects spaces it cannot take.

    Args:
        config: The config being validated.
        spaces: One (observation, action) pair, or :func:`module_spaces`' dict of them per
            module (several modules: RLlib's MultiRLModule of the config's policies); None:
            nothing to check.

    Skipped when a custom env-to-module connector may change the observation space.
    """
    if spaces is None or _compat.given_env_to_module_connector(config) is not None:
        return
    if not isinstance(spaces, dict):
        spaces = {DEFAULT_MODULE_ID: spaces}
    name = algo_name(config)

    def fail(e: Exception, where: str) -> None:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        config._value_error(f"{name} cannot take env {config.env!r}{where}: {first}")

    specs: dict[str, RLModuleSpec] = {}
    if config.is_multi_agent:
        try:
            specs = config.get_multi_rl_module_spec(spaces=spaces, inference_only=True).rl_module_specs or {}
        except Exception as e:  # noqa: BLE001 - reported as one config error naming the env
            fail(e, f" (module spaces {spaces})")
            return
    for module_id, (obs_space, act_space) in spaces.items():
        where = f" (observation space {obs_space}, action space {act_space})"
        try:
            if config.is_multi_agent:
                where = f" (module {module_id!r}: observation space {obs_space}, action space {act_space})"
                spec = specs[module_id]
            else:
                spec = config.get_rl_module_spec(spaces={module_id: (obs_space, act_space)}, inference_only=True)
            spec.build()
        except Exception as e:  # noqa: BLE001 - reported as one config error naming the spaces
            fail(e, where)
