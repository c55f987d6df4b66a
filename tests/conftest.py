"""Shared fixtures: one Ray instance per test session, temp storage, the variable-length env."""

from __future__ import annotations

import os

import pytest

# Our CLI prints its own progress line; keep Tune's table output off in tests as well.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
# Keep per-test Ray workers from grabbing every core's worth of BLAS threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

VARIABLE_LENGTH_ENV = "rllib_ext/VariableLength-v0"


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (2 CPUs, as in CI) shared by every test that needs it."""
    import logging

    import ray

    import rllib_ext  # noqa: F401 - registers algorithms and envs (and again after init)

    if not ray.is_initialized():
        # address="local": always a fresh instance, even if RAY_ADDRESS or another cluster is around.
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


@pytest.fixture
def storage_path(tmp_path):
    """A fresh Tune storage path for one test."""
    path = tmp_path / "ray_results"
    path.mkdir()
    return str(path)


@pytest.fixture
def variable_length_env():
    """The gymnasium id of the tiny variable-episode-length env registered by rllib_ext."""
    import rllib_ext  # noqa: F401

    return VARIABLE_LENGTH_ENV
