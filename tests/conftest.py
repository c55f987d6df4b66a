"""Shared fixtures (one Ray instance per test session, temp storage, the variable-length env) and
the tier markers.

The tier of a test is its folder: ``tests/unit/`` (no Ray), ``tests/smoke/``, ``tests/reliability/``
and ``tests/learning/`` give their tests the marker of the same name, so ``pytest -m unit`` or
``pytest -m "not learning"`` select by tier. The long learning runs (the tuned examples, not in
CI) carry ``learning_long`` on top of ``learning``. Tests run tier by tier, unit tests first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Our CLI prints its own progress line; keep Tune's table output off in tests as well.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
# Keep per-test Ray workers from grabbing every core's worth of BLAS threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")

VARIABLE_LENGTH_ENV = "rllib_ext/VariableLength-v0"
TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "smoke", "reliability", "learning")


def _tier(item: pytest.Item) -> str | None:
    try:
        folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    return folder if folder in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its folder's tier, checks the tier rules, and orders tiers cheap first."""
    errors = []
    for item in items:
        tier = _tier(item)
        if tier is None:
            errors.append(f"{item.nodeid}: a test lives in one of tests/{{{','.join(TIERS)}}}/")
            continue
        for name in TIERS:
            if name != tier and item.get_closest_marker(name) is not None:
                errors.append(f"{item.nodeid}: the tier marker '{name}' comes from the folder; move the test")
        if item.get_closest_marker("learning_long") is not None and tier != "learning":
            errors.append(f"{item.nodeid}: 'learning_long' tests live in tests/learning/")
        if tier == "unit" and "ray_session" in item.fixturenames:
            errors.append(f"{item.nodeid}: unit tests run without Ray; a test that needs Ray goes to tests/smoke/")
        item.add_marker(getattr(pytest.mark, tier))
    if errors:
        raise pytest.UsageError("test layout:\n  " + "\n  ".join(errors))
    # Stable: modules stay together (module-scoped fixtures), unit tests give feedback first.
    items.sort(key=lambda item: TIERS.index(_tier(item)))


def _start_local_ray(num_cpus: int):
    import logging

    import ray

    import rllib_ext  # noqa: F401 - registers algorithms and envs (and again after init)

    # address="local": always a fresh instance, even if RAY_ADDRESS or another cluster is around.
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    return ray


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (2 CPUs, as in CI) shared by every test that needs it."""
    import ray

    if not ray.is_initialized():
        _start_local_ray(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_four_cpus(ray_session):
    """Local Ray with 4 logical CPUs for one test module (e.g. two learner actors, an env runner
    and the driver), then the session's 2-CPU Ray again."""
    ray_session.shutdown()
    _start_local_ray(num_cpus=4)
    yield ray_session
    ray_session.shutdown()
    _start_local_ray(num_cpus=2)


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
