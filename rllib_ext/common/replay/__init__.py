"""Replay for the off-policy learners of paper 003 (VRACER_EXT, DDPG_EXT, NAF_EXT).

* :mod:`rllib_ext.common.replay.rules` — ReF-ER: ρ and D_KL of diagonal Gaussians, Rule 1,
  Rule 2 (Eq. 10-12), annealing (Eq. 13), the :class:`ReFER` state.
* :mod:`rllib_ext.common.replay.memory` — :class:`ReplayMemory`, whole-episode FIFO memory
  with stored ρ, V and V̂^tbc, uniform or rank-based prioritized sampling, App. B statistics.
* :mod:`rllib_ext.common.replay.retrace` — the V̂^tbc recursion (Eq. 8), vectorized.
* :mod:`rllib_ext.common.replay.episodes` — assembles RLlib episode chunks into whole episodes.
"""

from rllib_ext.common.replay.memory import ReplayMemory
from rllib_ext.common.replay.rules import REPLAY_MODES, ReFER

__all__ = ["REPLAY_MODES", "ReFER", "ReplayMemory"]
