"""DDPG_EXT: DDPG (Lillicrap et al. 2016) with ReF-ER (paper 003 §2, Algorithm 4, App. A).

Novati & Koumoutsakos (ICML 2019), ``../shared/papers/003_e2e49ddc84a31194.txt``. A tanh-bounded
policy network m^w and a critic Q^w' (2×128 Softsign each) with soft-updated targets (τ 0.01);
critic L2 weight decay 1e-4; policy lr 1e-5, critic lr 1e-4; B 128. Exploration: Gaussian
σ 0.2 with ReF-ER (also the behaviour μ for ρ and D_KL), Ornstein–Uhlenbeck noise (σ 0.2,
θ 0.15) in ``er``/``per`` modes. Sampling, storage and the update loop are shared with
VRACER_EXT (:mod:`rllib_ext.common.refer`); the loss is in
``torch/ddpg_torch_learner.py``.

Checkpoints hold the networks (trained and target), both optimizers, β, t and k, the state
statistics and the reward scale; the replay memory's contents only with ``checkpoint_replay``.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.algorithm import ReFERAlgorithm
from rllib_ext.common.refer.config import ReFERQConfig
from rllib_ext.settings import Setting, changed, unused


class DDPGConfig(ReFERQConfig):
    """DDPG_EXT's configuration (paper 003 App. A).

    Settings beyond :class:`~rllib_ext.common.refer.config.ReFERQConfig`: ``actor_lr``
    (1e-5), ``critic_lr`` (1e-4; ``lr`` is unused), ``critic_weight_decay`` (1e-4), ``ou_theta``
    (0.15) and ``ou_sigma`` (0.2) of the OU noise used in ``er``/``per`` modes. Both learning
    rates are annealed with Eq. (13) in the ReF-ER modes (not with ``er``/``per``); β's step
    (Eq. 12) is ``refer_beta_rate`` (1e-4); with ``refer_beta_rate=None`` it is the policy
    network's η(t), since β weighs the policy gradient (Algorithm 4).
    """

    SETTINGS = {
        "train_batch_size_per_learner": changed(default=128, source="128 (App. A)"),
        "actor_lr": Setting(
            1e-5,
            float,
            gt=0,
            symbol="η (policy)",
            source="1e-5 (App. A)",
            doc="policy learning rate; annealed (Eq. 13) in the ReF-ER modes",
        ),
        "critic_lr": Setting(
            1e-4,
            float,
            gt=0,
            symbol="η (critic)",
            source="1e-4 (App. A)",
            doc="critic learning rate; annealed (Eq. 13) in the ReF-ER modes; `lr` is unused",
        ),
        "critic_weight_decay": Setting(1e-4, float, ge=0, source="1e-4 (App. A)", doc="critic L2 weight decay"),
        "ou_theta": Setting(
            0.15, float, ge=0, symbol="θ (OU)", source="0.15 (App. A)", doc="OU noise, used in `er`/`per` modes only"
        ),
        "ou_sigma": Setting(
            0.2, float, ge=0, symbol="σ (OU)", source="0.2 (App. A)", doc="OU noise, used in `er`/`per` modes only"
        ),
        "lr": unused("DDPG's learning rates are `actor_lr` and `critic_lr`"),
    }
    model_config_keys = (*ReFERQConfig.model_config_keys, "ou_noise", "ou_theta", "ou_sigma")

    LEARNER_CLASS = "rllib_ext.algorithms.ddpg.torch.ddpg_torch_learner:DDPGTorchLearner"
    RL_MODULE_CLASS = "rllib_ext.algorithms.ddpg.ddpg_rl_module:DDPGTorchRLModule"

    def __init__(self, algo_class=None):
        """App. A defaults."""
        super().__init__(algo_class=algo_class or DDPG)

    @property
    @override(ReFERQConfig)
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return super()._model_config_auto_includes | {
            "ou_noise": self.replay_mode in ("er", "per"),  # App. A: OU noise with ER and PER
            "ou_theta": self.ou_theta,
            "ou_sigma": self.ou_sigma,
        }


class DDPG(ReFERAlgorithm):
    """DDPG_EXT (see the module docstring)."""

    @classmethod
    @override(ReFERAlgorithm)
    def get_default_config(cls) -> DDPGConfig:
        """App. A defaults."""
        return DDPGConfig()
