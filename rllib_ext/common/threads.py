"""torch's thread count for the learners (``torch_num_threads``), one setting for every algorithm.

On a small machine the learner's torch threads contend with the env runners for the same cores,
and the small networks of these papers gain little or nothing from more threads. Measured here:
a V-RACER step at B 64 takes 8 ms on one thread and 45 ms with torch's default. IMPACT_EXT's
learner on CartPole made the same number of updates either way (benchmarks/RESULTS.md).
The local Learner (``num_learners=0``) shares the driver's process, so the setting applies to
the driver too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from rllib_ext.common.validation import is_integer

if TYPE_CHECKING:
    from ray.rllib.core.learner.learner import Learner

    _LearnerBase = Learner
else:
    _LearnerBase = object


class ThreadsConfig(Protocol):
    """An AlgorithmConfig with the ``torch_num_threads`` setting."""

    torch_num_threads: int | None

    def _value_error(self, errmsg: str) -> None: ...


def check_torch_num_threads(config: ThreadsConfig) -> None:
    """Rejects a ``torch_num_threads`` that is neither None nor an integer >= 1."""
    n = config.torch_num_threads
    if n is not None and (not is_integer(n) or n < 1):
        config._value_error(f"`torch_num_threads` must be None or an integer >= 1, got {n!r}")


class TorchThreadsLearner(_LearnerBase):
    """Learner mixin (put it first in the bases): sets torch's thread count, then builds."""

    def build(self) -> None:
        n = getattr(self.config, "torch_num_threads", None)
        if n is not None:
            torch.set_num_threads(int(n))
        super().build()
