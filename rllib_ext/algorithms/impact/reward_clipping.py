"""Reward clipping for training only: the ``clip_rewards`` setting, which RLlib 2.60's new API stack does not read.

RLlib's ``AlgorithmConfig.environment(clip_rewards=...)`` is read only by the old API stack
(``RolloutWorker`` and its sample collectors in ``ray/rllib/evaluation/``, and the old agent
connectors in ``ray/rllib/connectors/util.py``); on the new stack it is silently ignored, also
in RLlib's own Atari examples that set it. The old stack clipped the rewards of the train batch
(``np.sign`` for ``True``, ``np.clip`` to ±c for a number) while the episode returns it reported
stayed the game's score. :class:`ClipRewards` does the same as a learner connector piece: the
env runners, and so ``env_runners/episode_return_mean``, see the raw rewards; the loss sees the
clipped ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns


def clip_rewards_error(value: Any) -> str | None:
    """Why ``value`` is not a valid ``clip_rewards`` setting, or None if it is."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return None
    return (
        f"`clip_rewards` must be None or False (no clipping), True (the sign of each reward, as the "
        f"paper's RLlib did on Atari) or a number > 0 (clip to [-c, c]), got {value!r}"
    )


def clip(rewards, limit: float | None):
    """The sign of each reward (``limit`` None) or the rewards clipped to [-limit, limit]; numpy or torch."""
    if isinstance(rewards, np.ndarray):
        return np.sign(rewards) if limit is None else np.clip(rewards, -limit, limit)
    return rewards.sign() if limit is None else rewards.clamp(-limit, limit)


class ClipRewards(ConnectorV2):
    """Learner connector piece: clips ``Columns.REWARDS`` of the train batch (not the episodes).

    Placed after the batching pieces (RLlib's ``BatchIndividualItems``), so it sees
    ``{module_id: {column: array}}`` (or the columns at the top level). The bootstrap steps
    RLlib's ``AddOneTsToEpisodesAndTruncate`` appends carry reward 0, which stays 0.

    Args:
        limit: None: the sign of each reward (``clip_rewards=True``, RLlib's old stack and the
            DQN Atari setup); a number c > 0: clip to [-c, c].
    """

    def __init__(self, input_observation_space=None, input_action_space=None, *, limit: float | None = None, **kwargs):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.limit = None if limit is None else float(limit)

    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        if batch is None:
            return batch
        if Columns.REWARDS in batch and not isinstance(batch[Columns.REWARDS], dict):
            batch[Columns.REWARDS] = clip(batch[Columns.REWARDS], self.limit)
        for value in batch.values():
            if isinstance(value, dict) and Columns.REWARDS in value and not isinstance(value[Columns.REWARDS], dict):
                value[Columns.REWARDS] = clip(value[Columns.REWARDS], self.limit)
        return batch


def add_reward_clipping(pipeline, clip_rewards) -> None:
    """Puts :class:`ClipRewards` into a learner connector ``pipeline`` for a truthy ``clip_rewards``.

    Before RLlib's ``NumpyToTensor`` when the pipeline has it (the default), else at its end.
    """
    if not clip_rewards:
        return
    from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor

    piece = ClipRewards(limit=None if clip_rewards is True else clip_rewards)
    if any(type(c) is NumpyToTensor for c in pipeline.connectors):
        pipeline.insert_before(NumpyToTensor, piece)
    else:
        pipeline.append(piece)
