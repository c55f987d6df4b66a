"""The registry: well-formed entries, one algorithms/ folder per name, configs by name, lazy exports."""

from __future__ import annotations

import pathlib

import pytest

import rllib_ext
from rllib_ext import registry

NAMES = sorted(registry.ALGORITHMS)


def test_registry_entries_are_well_formed():
    for name, spec in registry.ALGORITHMS.items():
        assert spec.name == name
        for path in (spec.algo_path, spec.config_path):
            module, _, attr = path.partition(":")
            assert module.startswith("rllib_ext.algorithms.") and attr, path
        # A paper file in ../shared/papers, or a citation that says it is not there (ARS_EXT).
        in_papers = set(spec.paper.replace(" ", "").split(",")) <= {"000", "001", "002", "003", "004"}
        assert in_papers or spec.paper.endswith(registry.NOT_IN_PAPERS), spec.paper
        assert spec.summary
    assert not registry.import_errors(), registry.import_errors()


def test_algorithms_holds_exactly_the_registered_names():
    """One ``algorithms/<algo>/`` per registered name, as in RLlib; family bases live in ``common/``."""
    root = pathlib.Path(rllib_ext.__file__).parent / "algorithms"
    folders = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    homes = {spec.algo_path.split(".")[2] for spec in registry.ALGORITHMS.values()}
    assert len(homes) == len(registry.ALGORITHMS)
    assert folders == homes


@pytest.mark.parametrize("name", NAMES)
def test_config_with_algo_class_name_and_lazy_export(name):
    config_cls = registry.get_config_class(name)
    assert getattr(rllib_ext, config_cls.__name__) is config_cls
    config = config_cls(algo_class=name)
    assert config.algo_class == name


def test_workers_import_no_scipy_stats():
    """Every env runner process imports rllib_ext; scipy.stats (~1 s) is imported only where used."""
    import subprocess
    import sys

    code = (
        "import sys, rllib_ext, rllib_ext.common.blackbox.env_runner, rllib_ext.common.blackbox.shaping; "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
