"""ReFERAlgorithm: the loop the ReF-ER learners of paper 003 share (VRACER_EXT, DDPG_EXT, NAF_EXT).

Novati & Koumoutsakos, "Remember and Forget for Experience Replay" (ICML 2019),
``../shared/papers/003_e2e49ddc84a31194.txt``.

Data flow (Algorithm 1, App. C):

1. RLlib's env runners (``SingleAgentEnvRunner``; the local one when ``num_env_runners=0``)
   sample ``rollout_fragment_length`` steps per runner with the current policy; the actions'
   behaviour statistics μ_t are RLlib's ``action_dist_inputs`` recorded in the episodes.
2. The chunks go to the Learner, which owns the replay memory (RM): completed episodes enter
   the RM (FIFO by episode beyond N). Until the RM holds N_start steps nothing is trained; then
   the state statistics are fixed and the reward scale set (App. B).
3. The Learner takes one gradient step per F env steps (Algorithm 1's ``t < F·k`` loop): sample
   B steps, update (the algorithm's loss with Rules 1-2, Eq. 10-11), write ρ, V and targets
   back into the RM, update β (Eq. 12); c_max and η are annealed with t (Eq. 13; η not in the
   ``er``/``per`` baselines); every 1000
   steps the reward scale is refreshed.
4. The weights (and the state statistics, module buffers) go back to the env runners.

Differences from the paper's serial loop: the env runners act with weights that are at most
one ``training_step`` (``rollout_fragment_length`` gradient steps at F = 1) old; μ_t is the
behaviour actually used, so ρ stays exact. The RM lives in the Learner (no replay actor on the
hot path: one gradient step reads and writes the RM twice, and a Ray call costs ~2.5 ms on this
machine); :class:`~rllib_ext.common.refer.memory.ReplayMemory` also runs as a Ray actor
(``ray.remote(num_cpus=0)``) for other uses.
"""

from __future__ import annotations

from rllib_ext.common.offpolicy.algorithm import OffPolicyAlgorithm


class ReFERAlgorithm(OffPolicyAlgorithm):
    """Algorithm 1 of paper 003 on RLlib's env runners and Learner (see the module docstring).

    The loop is :class:`~rllib_ext.common.offpolicy.algorithm.OffPolicyAlgorithm`'s
    ``training_step``; the ReF-ER steps are the Learner's
    (:class:`~rllib_ext.common.refer.learner.ReFERLearner`).
    """
