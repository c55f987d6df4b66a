"""rllib_ext._compat: one test per private Ray/RLlib/torch name the package relies on, and a scan
of ``rllib_ext/`` that fails on a private name of these libraries used outside ``_compat.py``.

A failure here after a Ray (or torch) upgrade names the one shim or table entry to adapt.
Everything runs in this process without a Ray cluster, on the real RLlib classes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from rllib_ext import _compat

PACKAGE = Path(_compat.__file__).resolve().parent
FOREIGN = ("ray", "torch", "gymnasium")


def _resolve(path: str) -> Any:
    """``"module:Class.attr"`` (or ``"module:Class"``) -> the object."""
    module, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part) if part.startswith("_") else getattr(obj, part)
    return obj


@pytest.fixture(scope="module")
def refer_learner():
    """A built VRACER_EXT learner (a real TorchLearner), in this process, without Ray."""
    from rllib_ext.algorithms.vracer.vracer import VRACERConfig
    from tests.builders import small_refer_learner

    return small_refer_learner(VRACERConfig)


# ---------------------------------------------------------------------------------------------
# Ray and Tune.
# ---------------------------------------------------------------------------------------------
def test_add_post_init_hook():
    import ray._private.worker

    hooks = ray._private.worker._post_init_hooks
    assert isinstance(hooks, list)

    def hook() -> None:
        pass

    _compat.add_post_init_hook(hook)
    try:
        assert hooks[-1] is hook
    finally:
        hooks.remove(hook)
    # ray.init() runs them: the name is still called where the hooks run.
    assert "_post_init_hooks" in inspect.getsource(ray._private.worker.init)


def test_tune_registry_contains_and_get():
    from ray.tune.registry import ENV_CREATOR, TRAINABLE_CLASS, register_env

    def creator(env_config):
        return env_config

    register_env("rllib_ext_compat_test-v0", creator)
    assert _compat.tune_registry_contains(ENV_CREATOR, "rllib_ext_compat_test-v0")
    assert _compat.tune_registry_get(ENV_CREATOR, "rllib_ext_compat_test-v0")({"a": 1}) == {"a": 1}
    assert not _compat.tune_registry_contains(ENV_CREATOR, "rllib_ext_compat_missing-v0")
    assert not _compat.tune_registry_contains(TRAINABLE_CLASS, "rllib_ext_compat_missing")


def test_rllib_algorithm_class():
    from ray.rllib.algorithms.ppo import PPO

    assert _compat.rllib_algorithm_class("PPO") is PPO


def test_worker_manager():
    from ray.rllib.env.env_runner_group import EnvRunnerGroup
    from ray.rllib.utils.actor_manager import FaultTolerantActorManager

    group = object.__new__(EnvRunnerGroup)
    group._worker_manager = manager = object.__new__(FaultTolerantActorManager)
    assert _compat.worker_manager(group) is manager
    assert re.search(r"self\._worker_manager = FaultTolerantActorManager\(", inspect.getsource(EnvRunnerGroup))
    for method in ("actors", "is_actor_healthy", "set_actor_state"):  # what the pool calls on it
        assert callable(getattr(FaultTolerantActorManager, method))


def test_set_metrics_lock():
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    class CountingLock:
        def __init__(self) -> None:
            self.lock, self.entered = threading.RLock(), 0

        def __enter__(self) -> None:
            self.entered += 1
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

    metrics, lock = MetricsLogger(), CountingLock()
    _compat.set_metrics_lock(metrics, lock)  # type: ignore[arg-type]
    metrics.log_value("x", 1.0, reduce="sum")
    metrics.peek("x")
    assert lock.entered >= 2  # every read and write goes through the lock


# ---------------------------------------------------------------------------------------------
# AlgorithmConfig.
# ---------------------------------------------------------------------------------------------
def test_translate_config_key():
    from ray.rllib.algorithms.ppo import PPOConfig

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compat.translate_config_key(PPOConfig(), "lambda") == "lambda_"
        assert _compat.translate_config_key(PPOConfig(), "lr") == "lr"


def test_given_model_config():
    from ray.rllib.algorithms.ppo import PPOConfig

    assert not _compat.given_model_config(PPOConfig())
    config = PPOConfig().rl_module(model_config={"fcnet_hiddens": [8]})
    assert _compat.given_model_config(config) == {"fcnet_hiddens": [8]}
    assert config.model_config["fcnet_hiddens"] == [8]  # the public one merges RLlib's defaults in


def test_given_rl_module_spec():
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    assert _compat.given_rl_module_spec(PPOConfig()) is None
    spec = RLModuleSpec()
    assert _compat.given_rl_module_spec(PPOConfig().rl_module(rl_module_spec=spec)) is spec


def test_given_train_batch_size_per_learner():
    from ray.rllib.algorithms.ppo import PPOConfig

    assert _compat.given_train_batch_size_per_learner(PPOConfig()) is None
    assert _compat.given_train_batch_size_per_learner(PPOConfig().training(train_batch_size_per_learner=32)) == 32


def test_given_env_to_module_connector():
    from ray.rllib.algorithms.ppo import PPOConfig

    def connector(env, spaces=None, device=None):
        return []

    assert _compat.given_env_to_module_connector(PPOConfig()) is None
    config = PPOConfig().env_runners(env_to_module_connector=connector)
    assert _compat.given_env_to_module_connector(config) is connector


def test_setting_attribute():
    from ray.rllib.algorithms.ppo import PPOConfig

    config = PPOConfig()
    assert _compat.setting_attribute(config, "lr") == "lr"
    for name in ("model_config", "train_batch_size_per_learner"):  # RLlib's properties over a private field
        assert isinstance(inspect.getattr_static(type(config), name), property)
        assert _compat.setting_attribute(config, name) == f"_{name}"
        assert hasattr(config, f"_{name}")


# ---------------------------------------------------------------------------------------------
# Learners and algorithms.
# ---------------------------------------------------------------------------------------------
def test_learner_index(refer_learner):
    assert _compat.learner_index(refer_learner) == 0  # a local learner


def test_make_batch_if_necessary(refer_learner):
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    batch = MultiAgentBatch({"default_policy": SampleBatch({"obs": torch.zeros(2, 3)})}, env_steps=2)
    assert _compat.make_batch_if_necessary(refer_learner, TrainingData(batch=batch)) is batch


def test_tensor_variable(refer_learner):
    value = _compat.tensor_variable(refer_learner, 0.5)
    assert isinstance(value, torch.Tensor) and float(value) == 0.5 and value.device == refer_learner.device


def test_update_without_metrics_reduce():
    from ray.rllib.core.learner.learner import Learner

    parameter = inspect.signature(Learner.update).parameters["_no_metrics_reduce"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is False
    assert "timesteps" in inspect.signature(Learner.update).parameters
    assert re.search(r"if not _no_metrics_reduce:", inspect.getsource(Learner.update))


def test_wants_component(refer_learner):
    assert _compat.wants_component(refer_learner, "x", None, None)
    assert _compat.wants_component(refer_learner, "x", ["x"], None)
    assert not _compat.wants_component(refer_learner, "x", ["y"], None)
    assert not _compat.wants_component(refer_learner, "x", None, ["x"])


def test_optimizer_lr(refer_learner):
    optimizer = next(iter(refer_learner._named_optimizers.values()))
    optimizer.param_groups[0]["lr"] = 0.125
    assert _compat.optimizer_lr(refer_learner, optimizer) == 0.125


def test_pre_queue_episode_refs():
    """IMPALA's packing on a stand-in algorithm: packages of >= package_size env steps, the rest kept."""
    from ray.rllib.algorithms.impala.impala import IMPALA

    algo = types.SimpleNamespace(
        _episode_packs_being_built=[],
        config=types.SimpleNamespace(num_envs_per_env_runner=1, get_rollout_fragment_length=lambda: 5),
    )
    algo._pre_queue_episode_refs = IMPALA._pre_queue_episode_refs.__get__(algo)
    assert _compat.pre_queue_episode_refs(algo, ["a", "b", "c"], package_size=10) == [["a", "b"]]  # type: ignore[arg-type]
    assert algo._episode_packs_being_built == ["c"]


# ---------------------------------------------------------------------------------------------
# torch.
# ---------------------------------------------------------------------------------------------
def test_foreach_lerp_():
    targets, mains = [torch.zeros(3), torch.ones(2, 2)], [torch.ones(3), torch.full((2, 2), 3.0)]
    _compat.foreach_lerp_(targets, mains, 0.25)
    assert torch.equal(targets[0], torch.full((3,), 0.25)) and torch.equal(targets[1], torch.full((2, 2), 1.5))


def test_foreach_norm():
    norms = _compat.foreach_norm([torch.tensor([3.0, 4.0]), torch.tensor([float("nan")]), torch.zeros(0)])
    assert float(norms[0]) == 5.0 and not bool(torch.isfinite(norms[1])) and float(norms[2]) == 0.0


# ---------------------------------------------------------------------------------------------
# The tables: overrides, properties, inherited attributes, conventions.
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(_compat.PRIVATE_OVERRIDES))
def test_private_override_signature(path):
    method = _resolve(path)
    params, _ = _compat.PRIVATE_OVERRIDES[path]
    assert callable(method), f"{path} is gone"
    assert tuple(inspect.signature(method).parameters) == params


@pytest.mark.parametrize("path", sorted(_compat.PRIVATE_PROPERTIES))
def test_private_property(path):
    assert isinstance(_resolve(path), property)
    module, _, qualname = path.partition(":")
    cls = getattr(importlib.import_module(module), qualname.split(".")[0])
    assert isinstance(getattr(cls(), qualname.split(".")[1]), dict)


@pytest.mark.parametrize("path", sorted(_compat.INHERITED_ATTRIBUTES))
def test_inherited_attributes(path, refer_learner):
    """Each attribute is set by the RLlib class (on a real instance where one is cheap to build)."""
    cls = _resolve(path)
    names = _compat.INHERITED_ATTRIBUTES[path]
    instance: Any = None
    if isinstance(refer_learner, cls):
        instance = refer_learner
    elif path.endswith(":AlgorithmConfig"):
        instance = cls()
    elif path.endswith(":TorchDistribution"):
        from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian

        instance = TorchDiagGaussian(loc=torch.zeros(2), scale=torch.ones(2))
        assert isinstance(instance._dist, torch.distributions.Distribution)
    source = "".join(inspect.getsource(klass) for klass in cls.__mro__ if klass.__module__.startswith(FOREIGN))
    for name in names:
        if instance is not None:
            assert hasattr(instance, name), f"{path} no longer sets {name}"
        else:
            assert re.search(rf"self\.{name}\b\s*(:[^=]+)?=", source), f"{path} no longer sets {name}"


@pytest.mark.parametrize("name", sorted(_compat.CONVENTIONS))
def test_convention(name):
    path, _ = _compat.CONVENTIONS[name]
    cls = _resolve(path)
    if name == "_value_error":
        with pytest.raises(ValueError, match="bad setting"):
            cls()._value_error("bad setting")
        return
    assert tuple(inspect.signature(getattr(cls, name)).parameters) == ("self", "batch", "kwargs")


# ---------------------------------------------------------------------------------------------
# The scan: no private name of Ray/RLlib/torch/gymnasium outside _compat.py.
# ---------------------------------------------------------------------------------------------
#: Private names the scan allows outside _compat.py beyond the tables, each with its reason.
ALLOWED: dict[str, str] = {}


def _sources() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_compat.py"
    }


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``...`` body (a Protocol's or a stub's declaration of someone else's method)."""
    constants = [n.value.value for n in node.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)]
    return len(constants) == len(node.body) and Ellipsis in constants


def _own_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Private names the package defines itself (functions, classes, attributes it assigns)."""
    own = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _stub(node):
                own.add(node.name)
            elif isinstance(node, ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            own.add(sub.id)
                        elif isinstance(sub, ast.Attribute):
                            own.add(sub.attr)
    return {name for name in own if _private(name)}


def _static_uses(trees: dict[Path, ast.Module]) -> list[str]:
    """Private imports, private keywords, and ``obj._name`` on other objects than self/cls/super()."""
    own, found = _own_names(trees), []
    for path, tree in trees.items():
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(FOREIGN):
                bad = [a.name for a in node.names if _private(a.name)]
                if any(_private(part) for part in (node.module or "").split(".")) or bad:
                    found.append(f"{where}:{node.lineno}: from {node.module} import {', '.join(bad) or '...'}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(FOREIGN) and any(_private(p) for p in alias.name.split(".")):
                        found.append(f"{where}:{node.lineno}: import {alias.name}")
            elif isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg and _private(keyword.arg):
                        found.append(f"{where}:{node.lineno}: keyword {keyword.arg}=")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                receiver = node.value
                on_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
                on_super = (
                    isinstance(receiver, ast.Call)
                    and isinstance(receiver.func, ast.Name)
                    and receiver.func.id == "super"
                )
                if not (on_self or on_super) and node.attr not in own and node.attr not in _compat.CONVENTIONS:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _recorded(cls: type, name: str) -> bool:
    for path, names in _compat.INHERITED_ATTRIBUTES.items():
        if name in names and issubclass(cls, _resolve(path)):
            return True
    for path in (*_compat.PRIVATE_OVERRIDES, *_compat.PRIVATE_PROPERTIES):
        module, _, qualname = path.partition(":")
        owner, _, method = qualname.partition(".")
        if method == name and issubclass(cls, getattr(importlib.import_module(module), owner)):
            return True
    return name in _compat.CONVENTIONS


def _inherited_uses() -> list[str]:
    """``self._name``, ``super()._name``, ``getattr(self, "_name")`` and ``def _name`` in the package's
    subclasses of RLlib/torch/gymnasium classes, where ``_name`` belongs to such a base class."""
    import rllib_ext

    found: set[str] = set()
    foreign_names: dict[type, set[str]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(rllib_ext.__path__, "rllib_ext.")]
    for module in modules:
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            bases = [b for b in cls.__mro__ if b.__module__.split(".")[0] in FOREIGN]
            if not bases:
                continue
            names: set[str] = set()
            for base in bases:
                if base not in foreign_names:
                    private = {n for n in vars(base) if _private(n)}
                    try:
                        private |= set(re.findall(r"self\.(_[A-Za-z]\w*)", inspect.getsource(base)))
                    except (OSError, TypeError):
                        pass
                    foreign_names[base] = private
                names |= foreign_names[base]
            source, first = inspect.getsourcelines(cls)
            where = Path(inspect.getsourcefile(cls) or "").relative_to(PACKAGE.parent)
            for node in ast.walk(ast.parse(inspect.cleandoc("\n".join(["", *[line.rstrip("\n") for line in source]])))):
                name = None
                if isinstance(node, ast.Attribute) and _private(node.attr):
                    name = node.attr
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    name = node.name
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr", "setattr")
                    and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)
                ):
                    name = node.args[1].value
                if name in names and not _recorded(cls, name) and name not in ALLOWED:
                    found.add(f"{where}:{first + node.lineno - 1}: {cls.__name__} uses {name} of an RLlib/torch base")
    return sorted(found)


def test_no_private_names_outside_compat():
    """Every private Ray/RLlib/torch/gymnasium name the package uses goes through _compat.py (a shim, or
    a table entry with its test). A new one: add a shim (or a table entry) and its test."""
    found = _static_uses(_sources()) + _inherited_uses()
    assert not found, "private names outside rllib_ext/_compat.py:\n" + "\n".join(found)
