"""VRACER_EXT: V-RACER with Remember-and-Forget Experience Replay (paper 003 §2, App. A).

Novati & Koumoutsakos (ICML 2019), ``../shared/papers/003_e2e49ddc84a31194.txt``. One network
(2×128 Softsign) outputs V^w, the policy mean m^w and a state-independent σ; the policy is
trained with the off-policy policy gradient (Eq. 5), the value with the Retrace/TBC target
V̂^tbc (Eq. 6-9) stored and refreshed in the replay memory, under ReF-ER's Rules 1-2 (Eq. 10-13).
Sampling, storage and the update loop are shared with DDPG_EXT and NAF_EXT
(:mod:`rllib_ext.common.refer`); the loss is in ``torch/vracer_torch_learner.py``.

Checkpoints hold the network, the optimizer, β, the annealing step t and the gradient-step
count, the state statistics and the reward scale; the replay memory's contents only with
``checkpoint_replay`` (default False: after a restore the memory refills N_start steps before
training resumes).

Example:
    >>> from rllib_ext import VRACERConfig
    >>> config = VRACERConfig().environment("Pendulum-v1").training(n_start=1000)
    >>> algo = config.build_algo()  # doctest: +SKIP
"""

from __future__ import annotations

from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.algorithm import ReFERAlgorithm
from rllib_ext.common.refer.config import ReFERConfig


class VRACERConfig(ReFERConfig):
    """VRACER_EXT's configuration: paper 003 App. A (γ 0.995, B 256, η 1e-4, F 1, N 2^18,
    C 4, A 5e-7, D 0.1); see :class:`~rllib_ext.common.refer.config.ReFERConfig` for the
    settings. Network: ``model_config`` keys ``fcnet_hiddens`` ([128, 128]) and ``init_sigma``
    (σ of the initial policy, √0.2 ≈ 0.447: the paper's Σ = 0.2 I is a covariance)."""

    model_config_keys = (*ReFERConfig.model_config_keys, "init_sigma")

    LEARNER_CLASS = "rllib_ext.algorithms.vracer.torch.vracer_torch_learner:VRACERTorchLearner"
    RL_MODULE_CLASS = "rllib_ext.algorithms.vracer.vracer_rl_module:VRACERTorchRLModule"

    def __init__(self, algo_class=None):
        """App. A defaults."""
        super().__init__(algo_class=algo_class or VRACER)

    @override(ReFERConfig)
    def validate(self) -> None:
        """ReFERConfig's checks plus σ > 0 of the initial policy (``model_config["init_sigma"]``)."""
        super().validate()
        from rllib_ext.algorithms.vracer.vracer_rl_module import INIT_SIGMA

        sigma = self.model_config.get("init_sigma", INIT_SIGMA)
        if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) or not sigma > 0:
            self._value_error(f"`model_config['init_sigma']` (σ of the initial policy) must be > 0, got {sigma!r}")


class VRACER(ReFERAlgorithm):
    """VRACER_EXT (see the module docstring)."""

    @classmethod
    @override(ReFERAlgorithm)
    def get_default_config(cls) -> VRACERConfig:
        """App. A defaults."""
        return VRACERConfig()
