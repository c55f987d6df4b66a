"""Old module paths that still resolve, so that checkpoints written before a module moved restore.

RLlib checkpoints and Ray actors pickle classes by module path (the Algorithm, its config, env
runner, RL module and learner classes). When a module moves, its old path goes into
:data:`MOVED`; :func:`install` (called once from ``rllib_ext/__init__.py``) adds an import hook
that answers an import of the old path with the module at the new path (the same module object,
imported only when asked for), so ``pickle`` finds every class where it was.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: Old module path -> the module's path now.
MOVED: dict[str, str] = {
    "rllib_ext.common.td3": "rllib_ext.common.offpolicy.td3",
    "rllib_ext.common.transitions": "rllib_ext.common.offpolicy.transitions",
    "rllib_ext.common.target_networks": "rllib_ext.common.offpolicy.target_networks",
    "rllib_ext.algorithms.dfd.dfd_learner": "rllib_ext.algorithms.dfd.estimator",
    "rllib_ext.algorithms.ars.ars_learner": "rllib_ext.algorithms.ars.estimator",
    "rllib_ext.algorithms.cves.cves_learner": "rllib_ext.algorithms.cves.control_variate",
    "rllib_ext.algorithms.aesrl.aesrl_learner": "rllib_ext.algorithms.aesrl.population",
    "rllib_ext.algorithms.impact.utils": "rllib_ext.algorithms.impact.losses",
    # Moved into their family's home on 2026-11-27, before the checkpoints in tests/data were written.
    "rllib_ext.common.samplers": "rllib_ext.common.blackbox.samplers",
    "rllib_ext.common.shaping": "rllib_ext.common.blackbox.shaping",
    "rllib_ext.common.es_gradient": "rllib_ext.common.blackbox.es_gradient",
    "rllib_ext.common.population": "rllib_ext.common.erl.population",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        """The new module itself; the import system stores it under the old name too."""
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run: the new module is already imported; its own spec is put back."""
        module.__spec__ = self.spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED`."""

    def find_spec(self, fullname, path=None, target=None):
        """A spec loading ``MOVED[fullname]``, or None for every other name."""
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Adds the finder to ``sys.meta_path`` once."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
