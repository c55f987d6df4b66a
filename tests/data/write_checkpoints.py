"""Writes the committed checkpoints under ``tests/data/checkpoints/`` (one per registered algorithm).

Run from a checkout of the commit whose checkpoints are wanted (the set committed here was written
at commit 644a18e, before the 2026-11-27 restructuring of the package)::

    .venv/bin/python -m tests.data.write_checkpoints tests/data/checkpoints

Each algorithm is the tiny seeded config of the reliability tests, trained 2 iterations and saved
with ``save_to_path``; ``manifest.json`` records the commit, each checkpoint's iteration, lifetime
env steps and a digest of its learner's module weights, which
``tests/reliability/test_old_checkpoints.py`` checks after restoring.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ray

from tests.data.checkpoint_digest import env_steps, weights_digest
from tests.reliability.helpers import NAMES, config_class, small_config


def main(out: str) -> None:
    from rllib_ext.common.blackbox import BlackBoxConfig

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    manifest = {"commit": commit, "algorithms": {}}
    ray.init(num_cpus=2, include_dashboard=False)
    for name in NAMES:
        runners = 1 if issubclass(config_class(name), BlackBoxConfig) else 0
        algo = small_config(name, num_env_runners=runners).build_algo()
        try:
            for _ in range(2):
                algo.train()
            algo.save_to_path(str((root / name).absolute()))
            manifest["algorithms"][name] = {
                "iteration": algo.iteration,
                "env_steps": env_steps(algo),
                "weights_sha256": weights_digest(algo),
            }
        finally:
            algo.stop()
        print(name, manifest["algorithms"][name], flush=True)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
