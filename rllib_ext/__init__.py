"""rllib_ext: research algorithms as Ray RLlib algorithms, selectable by name.

Importing this package registers every algorithm of :mod:`rllib_ext.registry` with Ray Tune (so
``tune.Tuner("NAME")``, ``get_trainable_cls("NAME")`` and ``XConfig(algo_class="NAME")`` work) and
the environments of :mod:`rllib_ext.envs` with gymnasium and Tune. Config classes are exported
lazily: ``from rllib_ext import IMPACTConfig``.
"""

from rllib_ext import _moved
from rllib_ext import registry as _registry

__version__ = "0.1.0"

_registry.register_all()
_registry.install_post_init_hook()
_moved.install()


def __getattr__(name):
    """Lazy export of each registered algorithm's Config and Algorithm classes by class name."""
    for spec in _registry.ALGORITHMS.values():
        for path in (spec.config_path, spec.algo_path):
            if path.rpartition(":")[2] == name:
                return _registry.load(path)
    raise AttributeError(f"module 'rllib_ext' has no attribute {name!r}")


def __dir__():
    names = [p.rpartition(":")[2] for s in _registry.ALGORITHMS.values() for p in (s.config_path, s.algo_path)]
    return sorted(set(globals()) | set(names))
