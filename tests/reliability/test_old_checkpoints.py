"""Checkpoints written by an older version of the package still restore and train on.

``tests/data/checkpoints/`` holds one checkpoint per registered algorithm, written at the commit
named in its ``manifest.json`` (before the 2026-11-27 restructuring that moved modules, renamed
classes' homes and replaced the Config classes' settings code) by ``tests/data/write_checkpoints.py``.
RLlib pickles classes by module path (the Algorithm, its config, env runner, learner and RLModule
classes), so a module moved without leaving its old path resolvable breaks these restores.
Each is restored with ``Algorithm.from_checkpoint`` from a copy: the iteration, the lifetime env
steps and the learner's module weights equal the recorded ones, and one more ``train()`` continues.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ray.rllib.algorithms.algorithm import Algorithm

from tests.data.checkpoint_digest import env_steps, weights_digest
from tests.reliability.helpers import NAMES

CHECKPOINTS = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
MANIFEST = json.loads((CHECKPOINTS / "manifest.json").read_text())


def test_every_registered_algorithm_has_an_old_checkpoint():
    assert sorted(MANIFEST["algorithms"]) == sorted(NAMES)


@pytest.mark.parametrize("name", sorted(MANIFEST["algorithms"]))
def test_old_checkpoint_restores_and_trains_on(ray_session, tmp_path, name):
    recorded = MANIFEST["algorithms"][name]
    path = shutil.copytree(CHECKPOINTS / name, tmp_path / name)
    algo = Algorithm.from_checkpoint(str(path))
    try:
        assert algo.iteration == recorded["iteration"]
        assert env_steps(algo) == recorded["env_steps"]
        assert weights_digest(algo) == recorded["weights_sha256"]
        result = algo.train()
        assert result["training_iteration"] == recorded["iteration"] + 1
        assert env_steps(algo) > recorded["env_steps"]
    finally:
        algo.stop()
