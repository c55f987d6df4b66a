"""The ReF-ER family's home (paper 003): what VRACER_EXT, DDPG_EXT and NAF_EXT share.

Novati & Koumoutsakos, "Remember and Forget for Experience Replay" (ICML 2019),
``../shared/papers/003_e2e49ddc84a31194.txt``. Each algorithm's own folder
(``algorithms/{vracer,ddpg,naf}/``) holds its Config and Algorithm, its RL module and its loss;
everything else is here, one module per role:

- :class:`ReFERConfig`, :class:`ReFERQConfig` (``config.py``): the shared settings (replay mode,
  C, A, D, β's step, N, N_start, F, PER, optimizer), their App. A defaults and checks; the
  Q-learners (DDPG, NAF) add τ and the exploration σ.
- :class:`ReFERAlgorithm` (``algorithm.py``): Algorithm 1's loop on RLlib's env runners and
  Learner (sample, hand the chunks to the Learner, sync weights); its module docstring has the
  numbered data flow.
- ``learner.py``: :class:`~rllib_ext.common.refer.learner.ReFERLearner`, the Learner that owns
  the replay memory and the ReF-ER state and runs Algorithm 1 from "store" to "update β".
- ``torch_learner.py``: :class:`~rllib_ext.common.refer.torch_learner.ReFERTorchLearner`, the
  torch side: optimizers by name, η's annealing, ρ and D_KL against the stored behaviour, soft
  target updates.
- ``rl_module.py``: the RL module bases (truncated-normal exploration, App. B standardization,
  Gaussian exploration around a deterministic policy with target networks);
  ``networks.py``: the paper's MLP and the state standardizer; ``distributions.py``: the
  truncated diagonal Gaussian.
- :class:`ReplayMemory` (``memory.py``): whole-episode FIFO memory with stored ρ, V and V̂^tbc,
  uniform or rank-based prioritized sampling, App. B statistics.
- ``rules.py``: ρ and D_KL of diagonal Gaussians, Rule 1, Rule 2 (Eq. 10-12), annealing
  (Eq. 13), the :class:`ReFER` state (β, t).
- ``retrace.py``: the V̂^tbc recursion (Eq. 8), vectorized; ``episodes.py``: whole episodes from
  RLlib's episode chunks.

The learners and RL modules are imported by path, not from here, so that an algorithm's
``<algo>.py`` (imported on ``import rllib_ext``) loads them only when RLlib asks for them.
"""

from rllib_ext.common.refer.algorithm import ReFERAlgorithm
from rllib_ext.common.refer.config import ReFERConfig, ReFERQConfig
from rllib_ext.common.refer.memory import ReplayMemory
from rllib_ext.common.refer.rules import REPLAY_MODES, ReFER

__all__ = ["REPLAY_MODES", "ReFER", "ReFERAlgorithm", "ReFERConfig", "ReFERQConfig", "ReplayMemory"]
