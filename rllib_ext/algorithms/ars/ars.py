"""ARS_EXT: Augmented Random Search (Mania, Guy, Recht 2018), versions V1, V1-t, V2 and V2-t.

"Simple random search provides a competitive approach to reinforcement learning"
(arXiv:1803.07055; the paper is not in ``../shared/papers``), Algorithm 2. Each update j:

1. Draw N directions δ_k (an ``antithetic`` sampler batch of 2N rows: row 2k = +δ_k, row
   2k + 1 = −δ_k) and run one episode of each of the 2N linear policies M_j ± ν·δ_k on the env
   runners (step 5). V2 feeds the policies states standardized by the running mean and std of
   every state seen so far (the engine's observation filter, merged from all runners; step 8).
2. Keep the b directions with the largest max(r⁺, r⁻) (step 6), and take
   M_{j+1} = M_j + α/(b·σ_R) Σ_{k≤b} (r⁺_(k) − r⁻_(k)) δ_(k), σ_R the std of the 2b returns used
   (step 7): :func:`~rllib_ext.algorithms.ars.estimator.ars_gradient` gives the direction, the
   ``sgd`` optimizer (``rllib_ext.optim``) the step α.

The versions are settings: V1 = ``observation_filter=False``, V2 = ``True``; "-t" = ``top_directions``
b < ``num_directions`` N. The synchronous batch (wait for all 2N rows of M_j, re-run failed
episodes, drop stale returns) is ES_EXT's: ARS subclasses :class:`~rllib_ext.algorithms.es.es.ES`
and replaces only the estimator (:meth:`ARS.estimate_gradient`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.ars.estimator import ars_gradient
from rllib_ext.algorithms.es.es import ES, ESConfig
from rllib_ext.common.blackbox import BlackBoxAlgorithm, BlackBoxConfig
from rllib_ext.common.blackbox.shaping import shape_returns
from rllib_ext.common.validation import is_integer, is_number
from rllib_ext.settings import Setting, changed


class ARSConfig(ESConfig):
    """Config of ARS_EXT. Shared settings (σ = ν, optimizer, policy, filter, …): :class:`BlackBoxConfig`.

    Defaults: ARS V2 with the authors' README example (``code/ars.py --n_directions 8
    --step_size 0.02 --delta_std 0.03``, modestyachts/ARS): N = 8 directions, all of them used
    (b = N), α = 0.02 (``lr``, plain ``sgd``), ν = 0.03 (``noise_stdev``), the linear policy
    a = clip(M·s + c) (``policy_hiddens=[]``, ``policy_head="linear"``) started at 0, raw returns
    (``return_shaping="none"``), states standardized without clipping (``observation_filter=True``,
    ``obs_clip=None``). ``configs/ars.yaml`` holds the paper's per-task values.

    Versions: V1 = ``observation_filter=False``; V2 = ``observation_filter=True``; V1-t / V2-t:
    ``top_directions`` < ``num_directions`` (:attr:`ars_version` names the one configured).

    Example:
        >>> from rllib_ext import ARSConfig
        >>> config = ARSConfig().environment("Pendulum-v1").training(num_directions=16, top_directions=4)
    """

    SETTINGS = {
        "num_directions": Setting(
            8,
            int,
            ge=1,
            symbol="N",
            source="1–60 per task (tables)",
            doc="directions per update; the batch is 2N episodes",
        ),
        "episodes_per_batch": changed(  # checked through num_directions (validate() checks what was given)
            default=16,
            kind=None,
            symbol="2N",
            source="—",
            doc="derived: 2·`num_directions`; setting it sets N, a value that is not 2N is rejected",
        ),
        "top_directions": Setting(
            None,
            int,
            ge=1,
            also=(None,),
            symbol="b",
            source="b ≤ N (tables)",
            doc="directions used in the step (step 6)",
            shown="None (= N)",
        ),
        "zero_init": Setting(
            True,
            bool,
            symbol="M_0 = 0",
            source="M_0 = 0 (Algorithm 2)",
            doc="zero the output layer (all of M for the linear policy)",
        ),
        "lr": changed(default=0.02, symbol="α", source="0.01–0.03 (tables)", doc="step size of the `sgd` step"),
        "noise_stdev": changed(default=0.03, symbol="ν", source="0.0075–0.03 (tables)", doc="perturbation M ± ν·δ"),
        "optimizer": changed(default="sgd", source="plain step (step 7)", doc="any `rllib_ext.optim` name works"),
        "return_shaping": changed(
            default="none",
            source="raw returns",
            doc="others are accepted (not ARS): applied to all 2N returns before selection",
        ),
        "sampler": changed(source="± pairs (step 5)", doc="the only one accepted"),
        "policy_hiddens": changed(default=[], source="linear policy", doc="a = clip(M·s + c) in half-range units"),
        "policy_head": changed(default="linear", source="linear policy", doc="a = clip(M·s + c) in half-range units"),
        "observation_filter": changed(source="V2 (step 8)", doc="False: V1"),
        "obs_clip": changed(default=None, source="no clipping", doc="clip standardized states (engine setting)"),
        "eval_episodes": changed(source="—", doc="episodes of the unperturbed M per update"),
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or ARS)
        self._episodes_per_batch_given = None  # what a user set episodes_per_batch to, if anything

    @property
    def episodes_per_batch(self):
        """2N: the rows of the antithetic batch (derived from ``num_directions``, its one source)."""
        n = self.num_directions
        return 2 * n if is_number(n) else n

    @episodes_per_batch.setter
    def episodes_per_batch(self, value) -> None:
        # BlackBoxConfig's __init__, the engine's training(episodes_per_batch=...) and RLlib's
        # update_from_dict set it: an even integer sets N; whatever was given is checked in validate().
        self._episodes_per_batch_given = value
        if is_integer(value) and value >= 2 and value % 2 == 0:
            self.num_directions = value // 2

    @property
    def ars_version(self) -> str:
        """``"V1"``, ``"V1-t"``, ``"V2"`` or ``"V2-t"``: the paper's name of this configuration."""
        top = self.top_directions
        truncated = top is not None and is_number(self.num_directions) and top < self.num_directions
        return ("V2" if self.observation_filter else "V1") + ("-t" if truncated else "")

    @override(BlackBoxConfig)
    def validate(self) -> None:
        # What was given for episodes_per_batch first: the engine's checks read 2N. The table
        # checks N and b (super), then the rules between them.
        given = self._episodes_per_batch_given
        if given is not None and not (is_integer(given) and given >= 2 and given % 2 == 0):
            self._value_error(
                f"episodes_per_batch is 2·num_directions for ARS_EXT (N antithetic pairs), an even integer "
                f">= 2; got episodes_per_batch={given!r}: set num_directions (N) instead"
            )
        super().validate()
        n, b = self.num_directions, self.top_directions
        if given is not None and given != 2 * n:
            self._value_error(
                f"episodes_per_batch is 2·num_directions for ARS_EXT (N antithetic pairs); got "
                f"episodes_per_batch={given!r} with num_directions={n!r}: set num_directions (N) only"
            )
        if b is not None and b > n:
            self._value_error(
                f"top_directions (b) must be None (all N) or an integer in [1, num_directions={n}], got {b!r}"
            )
        if self.sampler != "antithetic" or self.sampler_antithetic is False:
            self._value_error(
                "ARS_EXT needs sampler='antithetic' (rows 2k, 2k+1 = +δ_k, −δ_k; directions are ranked by "
                f"max(r+, r−)), got sampler={self.sampler!r}"
                + (", sampler_antithetic=False" if self.sampler_antithetic is False else "")
            )

    @property
    def top_b(self) -> int:
        """b, with None resolved to N."""
        return int(self.num_directions if self.top_directions is None else self.top_directions)


class ARS(ES):
    """Augmented Random Search on the black-box engine: ES_EXT's batch, ARS's estimator (step 7)."""

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> ARSConfig:
        return ARSConfig()

    @override(BlackBoxAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        if self.config.zero_init:
            # Algorithm 2: M_0 = 0. The output layer is the module's last nn.Linear.
            def zero_output_layer(learner):
                layers = [m for m in learner.module[DEFAULT_MODULE_ID].modules() if isinstance(m, torch.nn.Linear)]
                with torch.no_grad():
                    layers[-1].weight.zero_()
                    layers[-1].bias.zero_()
                return learner.get_flat()

            self.theta = self._on_learner(zero_output_layer)  # published by the base setup

    @override(ES)
    def estimate_gradient(self, seed: int, rows: list[Any]) -> tuple[np.ndarray, dict[str, float]]:
        """ĝ of step 7 (without α) from the 2N returns of batch ``seed``, in row order."""
        cfg = self.config
        returns = self.row_returns(rows)
        if cfg.return_shaping != "none":  # not ARS: shape all 2N returns, then select and scale
            returns = shape_returns(returns, cfg.return_shaping)
        eps = self.perturbations(rows)
        return ars_gradient(returns, eps, cfg.top_b)  # Algorithm 2, steps 6–7
