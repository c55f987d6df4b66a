"""The ERL family's typed messages, on top of :mod:`rllib_ext.common.blackbox.protocol`.

:class:`ERLPayload` is what the driver publishes once per update (μ, σ², the replay actor);
:class:`ERLResult` is what a runner sends back for an individual or for μ; :class:`CriticReply`
is what the critic worker answers to a ``train`` call. Individuals
themselves travel as :class:`~rllib_ext.common.blackbox.protocol.IndividualJob`\\ s (a seed, or a
parameter reference), and μ's evaluations as
:class:`~rllib_ext.common.blackbox.protocol.EvaluationJob`\\ s.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from rllib_ext.common.blackbox.protocol import EpisodeResult, Payload

if TYPE_CHECKING:
    from rllib_ext.common.offpolicy.transitions import ReplayHandle


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class ERLPayload(Payload):
    """Update u of the population: μ (as ``theta``), σ² and the replay actor's handle."""

    var: np.ndarray | None = None
    replay: ReplayHandle | None = None


@dataclasses.dataclass(kw_only=True, slots=True)
class ERLResult(EpisodeResult):
    """An individual's (or μ's) fitness, with what an RL individual brings back.

    Attributes:
        params: The trained parameters of an RL individual (None for an ES individual or μ).
        rl: Whether the individual was trained with TD3 first.
        actor_loss: Mean TD3 actor loss of that training (NaN otherwise).
        train_s: Seconds spent fetching/training before the episode.
    """

    params: np.ndarray | None = None
    rl: bool = False
    actor_loss: float = float("nan")
    train_s: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class CriticReply:
    """The critic worker's answer to one ``train`` call (paper 001 Algorithm 1 line 3).

    Attributes:
        critic: The new critic weights (CPU arrays by parameter name), or None when nothing was
            trained (the replay holds less than one minibatch, e.g. after a restore without
            replay contents).
        stats: Mean TD3 critic statistics over the call's steps (loss, Q values), by name.
        steps: Critic steps taken (0: nothing trained).
        train_s: Seconds the call took in the worker.
    """

    critic: dict[str, np.ndarray] | None
    stats: dict[str, float]
    steps: int
    train_s: float
