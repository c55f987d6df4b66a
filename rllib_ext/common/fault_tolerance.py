"""Fault tolerance shared by every rllib_ext algorithm: a lost runner must not stall the driver loop.

:class:`ThrottledEnvRunnerProbe` is an Algorithm mixin that rate-limits RLlib's health probe of
failed env runners. With ``restart_failed_env_runners=True`` RLlib's
``Algorithm._run_one_training_iteration`` calls ``restore_env_runners(env_runner_group)`` before
*every* ``training_step`` (and before every evaluation, for the evaluation group); it pings each
unhealthy runner (``probe_unhealthy_env_runners``, bounded by ``env_runner_health_probe_timeout_s``,
30 s by default). A runner whose node is gone stays RESTARTING in Ray and each ping takes ~2 s to
fail, so an algorithm whose ``training_step`` is one short loop (IMPACT_EXT: ~13 ms) spent almost
every iteration pinging it (~5 loops per 10 s iteration instead of ~700;
``benchmarks/node_loss.py``). The mixin probes a group with unhealthy runners at most once every
:data:`PROBE_INTERVAL_S` seconds; a group whose runners are all healthy is passed straight to
RLlib's ``restore_env_runners`` on every call, as before (cheap: RLlib pings nothing then).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

if TYPE_CHECKING:
    from ray.rllib.env.env_runner_group import EnvRunnerGroup

    _AlgorithmBase = Algorithm
else:
    _AlgorithmBase = object

#: Seconds between two health probes of an env-runner group that has unhealthy runners. A runner
#: that comes back is used again (and synced) at most this much later; a runner that never comes
#: back (its node is gone) costs one probe (up to ``env_runner_health_probe_timeout_s``; ~2 s for
#: a RESTARTING actor) per interval instead of one per ``training_step``.
PROBE_INTERVAL_S = 5.0

# The clock of the interval (module-level so that tests can replace it).
_clock = time.monotonic


def has_unhealthy_env_runners(env_runner_group: EnvRunnerGroup) -> bool:
    """Whether the group's actor manager marks any remote runner unhealthy (no remote call)."""
    return env_runner_group.num_healthy_remote_env_runners() < env_runner_group.num_remote_env_runners()


class ThrottledEnvRunnerProbe(_AlgorithmBase):
    """Algorithm mixin: RLlib's ``restore_env_runners`` probes unhealthy runners at most once every
    :data:`PROBE_INTERVAL_S` seconds per env-runner group (training and evaluation separately).

    Put it before RLlib's Algorithm class among the bases, e.g.
    ``class IMPACT(FiniteParametersGuard, ThrottledEnvRunnerProbe, APPO)``. Between probes the call
    returns ``[]`` (nothing restored) at once. While every runner of the group is healthy each call
    goes through to RLlib unchanged (its restored-runner counting, state sync and metrics).
    """

    @override(Algorithm)
    def restore_env_runners(self, env_runner_group: EnvRunnerGroup) -> list[int]:
        last_probe: dict[int, float] = self.__dict__.setdefault("_rllib_ext_last_probe_s", {})
        key = id(env_runner_group)
        if env_runner_group is None or not has_unhealthy_env_runners(env_runner_group):
            # A later failure is probed at once.
            last_probe.pop(key, None)
            return super().restore_env_runners(env_runner_group)
        last = last_probe.get(key)
        if last is not None and _clock() - last < PROBE_INTERVAL_S:
            return []
        try:
            return super().restore_env_runners(env_runner_group)
        finally:
            # From the end of the probe: at least PROBE_INTERVAL_S of training between two probes.
            last_probe[key] = _clock()
