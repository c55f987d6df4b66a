"""What the old-checkpoint test compares: lifetime env steps and a digest of the module weights."""

from __future__ import annotations

import hashlib

import numpy as np
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME


def env_steps(algo) -> int:
    """The algorithm's lifetime env-step count (0 before any sampling)."""
    return int(algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))


def weights_digest(algo) -> str:
    """SHA-256 over every learner module's weights, in sorted key order (float32 bytes)."""
    state = algo.learner_group.get_state(components="learner/rl_module")["learner"]["rl_module"]
    digest = hashlib.sha256()

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(f"{prefix}/{key}", value[key])
        elif hasattr(value, "shape"):
            array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
            digest.update(prefix.encode())
            digest.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())

    walk("", state)
    return digest.hexdigest()
