"""configs/*.yaml: the papers' hyperparameter tables."""

from __future__ import annotations

import glob
import os

import yaml

from rllib_ext import cli, registry
from tests.helpers import REPO


def test_every_configs_yaml_is_accepted_by_its_algorithm():
    """configs/*.yaml hold the papers' tables: each key must exist on the algorithm's config."""
    configs = sorted(glob.glob(os.path.join(REPO, "configs", "*.yaml")))
    assert configs
    by_prefix = {spec.config_path.split(":")[0].split(".")[2]: name for name, spec in registry.ALGORITHMS.items()}
    for path in configs:
        block = cli.load_config_file(path, "--config")
        prefix = os.path.basename(path).split("_")[0].split(".")[0]
        name = by_prefix.get(prefix)
        if name is None:
            continue
        config = registry.get_config_class(name)()
        unknown = [k for k in block if not hasattr(config, config._translate_special_keys(k, warn_deprecated=False))]
        assert not unknown, f"{path}: {name} has no {unknown}"
        assert yaml.safe_load(open(path)).get("paper"), f"{path} should name its paper table"
