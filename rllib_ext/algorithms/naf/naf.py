"""NAF_EXT: Normalized Advantage Functions (Gu et al. 2016) with ReF-ER (paper 003 §2, App. A).

Novati & Koumoutsakos (ICML 2019), ``../shared/papers/003_e2e49ddc84a31194.txt``. One network
gives V^w, m^w and L^w, Q^w = V − (a−m)ᵀLLᵀ(a−m) (Eq. 4), trained with the Q-learning target of
a soft-updated target network (τ 0.01) under ReF-ER (Eq. 10-13); exploration
π = m + N(0, 0.2²I). Sampling, storage and the update loop are shared with VRACER_EXT
(:mod:`rllib_ext.common.refer`); the loss is in ``torch/naf_torch_learner.py``.

Checkpoints hold the networks (trained and target), the optimizer, β, t and k, the state
statistics and the reward scale; the replay memory's contents only with ``checkpoint_replay``.
"""

from __future__ import annotations

from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.algorithm import ReFERAlgorithm
from rllib_ext.common.refer.config import ReFERQConfig
from rllib_ext.settings import Setting

#: Values of ``naf_beta_placement``: where β of Eq. (10) acts (``torch/naf_torch_learner.py``).
BETA_PLACEMENTS = ("mean", "whole")


class NAFConfig(ReFERQConfig):
    """NAF_EXT's configuration: paper 003 App. A (η 1e-4, B 256, γ 0.995, N 2^18, τ 0.01,
    σ 0.2) and the ReF-ER settings of :class:`~rllib_ext.common.refer.config.ReFERConfig`.

    Adds ``naf_beta_placement``: ``"mean"`` (default; as smarties' NAF, β and the D_KL penalty
    of Eq. 10 act on the gradient of the policy mean m only, V and L learn from the full
    Rule-1-masked TD error) or ``"whole"`` (β multiplies the whole Q-learning loss).
    """

    SETTINGS = {
        "naf_beta_placement": Setting(
            "mean",
            choices=BETA_PLACEMENTS,
            source="— (Eq. 10 is generic)",
            doc="`mean`: β and the D_KL penalty act on the gradient of m only (smarties); `whole`: β multiplies "
            "the whole Q-loss",
        ),
    }

    LEARNER_CLASS = "rllib_ext.algorithms.naf.torch.naf_torch_learner:NAFTorchLearner"
    RL_MODULE_CLASS = "rllib_ext.algorithms.naf.naf_rl_module:NAFTorchRLModule"

    def __init__(self, algo_class=None):
        """App. A defaults."""
        super().__init__(algo_class=algo_class or NAF)


class NAF(ReFERAlgorithm):
    """NAF_EXT (see the module docstring)."""

    @classmethod
    @override(ReFERAlgorithm)
    def get_default_config(cls) -> NAFConfig:
        """App. A defaults."""
        return NAFConfig()
