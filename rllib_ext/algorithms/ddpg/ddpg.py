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

from typing import Any, Self

from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.algorithm import ReFERAlgorithm
from rllib_ext.common.refer.config import ReFERQConfig


class DDPGConfig(ReFERQConfig):
    """DDPG_EXT's configuration (paper 003 App. A).

    Settings beyond :class:`~rllib_ext.common.refer.config.ReFERQConfig`: ``actor_lr``
    (1e-5), ``critic_lr`` (1e-4; ``lr`` is unused), ``critic_weight_decay`` (1e-4), ``ou_theta``
    (0.15) and ``ou_sigma`` (0.2) of the OU noise used in ``er``/``per`` modes. Both learning
    rates are annealed with Eq. (13) in the ReF-ER modes (not with ``er``/``per``); β's step
    (Eq. 12) is ``refer_beta_rate`` (1e-4); with ``refer_beta_rate=None`` it is the policy
    network's η(t), since β weighs the policy gradient (Algorithm 4).
    """

    unused_settings = {**ReFERQConfig.unused_settings, "lr": "DDPG's learning rates are `actor_lr` and `critic_lr`"}
    model_config_keys = (*ReFERQConfig.model_config_keys, "ou_noise", "ou_theta", "ou_sigma")

    def __init__(self, algo_class=None):
        """App. A defaults."""
        super().__init__(algo_class=algo_class or DDPG)
        self.train_batch_size_per_learner = 128
        self.actor_lr = 1e-5
        self.critic_lr = 1e-4
        self.critic_weight_decay = 1e-4
        self.ou_theta = 0.15
        self.ou_sigma = 0.2

    @override(ReFERQConfig)
    def training(
        self,
        *,
        actor_lr: float | None = NotProvided,
        critic_lr: float | None = NotProvided,
        critic_weight_decay: float | None = NotProvided,
        ou_theta: float | None = NotProvided,
        ou_sigma: float | None = NotProvided,
        **kwargs,
    ) -> Self:
        """Sets DDPG's settings (class docstring) and those of :class:`ReFERQConfig`."""
        super().training(**kwargs)
        for name, value in (
            ("actor_lr", actor_lr),
            ("critic_lr", critic_lr),
            ("critic_weight_decay", critic_weight_decay),
            ("ou_theta", ou_theta),
            ("ou_sigma", ou_sigma),
        ):
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    @property
    @override(ReFERQConfig)
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return super()._model_config_auto_includes | {
            "ou_noise": self.replay_mode in ("er", "per"),  # App. A: OU noise with ER and PER
            "ou_theta": self.ou_theta,
            "ou_sigma": self.ou_sigma,
        }

    @override(ReFERQConfig)
    def validate(self) -> None:
        """ReFERQConfig's checks plus positive learning rates and a non-negative decay."""
        super().validate()
        for name in ("actor_lr", "critic_lr"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                self._value_error(f"`{name}` must be > 0, got {value!r}")
        if not isinstance(self.critic_weight_decay, (int, float)) or self.critic_weight_decay < 0:
            self._value_error(f"`critic_weight_decay` must be >= 0, got {self.critic_weight_decay!r}")

    @override(ReFERQConfig)
    def get_default_learner_class(self):
        """DDPGTorchLearner (imported lazily)."""
        from rllib_ext.algorithms.ddpg.torch.ddpg_torch_learner import DDPGTorchLearner

        return DDPGTorchLearner

    @override(ReFERQConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        """DDPGTorchRLModule (imported lazily)."""
        from rllib_ext.algorithms.ddpg.ddpg_rl_module import DDPGTorchRLModule

        return RLModuleSpec(module_class=DDPGTorchRLModule)


class DDPG(ReFERAlgorithm):
    """DDPG_EXT (see the module docstring)."""

    @classmethod
    @override(ReFERAlgorithm)
    def get_default_config(cls) -> DDPGConfig:
        """App. A defaults."""
        return DDPGConfig()
