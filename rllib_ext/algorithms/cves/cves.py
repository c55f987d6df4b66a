"""CVES_EXT: evolution strategies with structured (policy-gradient) control variates.

Paper 002 (``../shared/papers/002_0511cdacd6792c57.txt``): Tang, Choromanski, Kucukelbir,
"Variance Reduction for Evolution Strategies via Structured Control Variates". Each update u:

1. Perturb θ_u with a sampler batch ε_i (antithetic pairs by default: N = 5 directions,
   ``episodes_per_batch`` = 2N = 10 rollouts, §4) and run one episode of the *stochastic* policy
   π_{θ_u+σε_i} per row on the env runners (:class:`CVESEnvRunner`), which return J¹, J^γ and
   the policy gradient ĝ^pg,γ at θ_u + σε_i (Eq. 1, 5).
2. ĝ^es,1, ĝ^es,γ (Eq. 4), ĝ^re,γ (Eq. 7), ĝ^cv = ĝ^es,1 + η ⊙ (ĝ^es,γ − ĝ^re,γ) (Eq. 8) with
   App. C.2's normalization (:mod:`~rllib_ext.algorithms.cves.control_variate`); one optimizer step
   (Adam, lr 0.01) along ĝ^cv.
3. η ← η − α_η · (2/S)·mean_k(η⊙y_k² + y_k⊙x_k) over the S antithetic pairs of the batch (Eq. 9).
   γ is frozen by default (``adapt_gamma=False``, γ = 0.995, which App. C.1 allows); with
   ``adapt_gamma``, φ ← φ − α_φ ĝ_φ with γ = 1 − exp(φ) ≤ ``gamma_max`` and ĝ_φ the ES estimate
   (Eq. 13) of ∇_φ ‖ĝ^cv(γ)‖² over N_φ perturbed γ's, evaluated on the same rollouts (App. C.1).
   Why frozen: on Pendulum ‖ĝ^cv(γ)‖² falls monotonically up to γ = 1 (the control variate
   turns ĝ^cv into the policy gradient as η → −1), so the adaptation only walks γ to
   ``gamma_max`` (in 5–7 updates) while costing N_φ extra ĝ^pg per episode
   (``docs/algorithms/cves_ext.md``, "Differences").
4. The batch's mean reward sequence becomes the next batch's PG baseline (``pg_baseline``).

``control_variate=False`` turns CVES into ES with the same policy, normalization and sampler, so
the paper's baselines are one switch away: vanilla (``sampler="antithetic"``), ORTHO
(``"orthogonal"`` with ``sampler_antithetic=True``), GCMC (``"gcmc"``), QMC (``"qmc"`` with
``sampler_antithetic=True``); the control variate combines with any of them (§5).

The synchronous batch (wait for all rows of θ_u, re-run failed episodes, drop stale returns)
is ES_EXT's: CVES subclasses :class:`~rllib_ext.algorithms.es.es.ES` and replaces only the
estimator (:meth:`CVES.estimate_gradient`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.annotations import override

from rllib_ext.algorithms.cves import control_variate as cv
from rllib_ext.algorithms.cves.cves_env_runner import CVESEnvRunner, CVESPayload, CVESResult
from rllib_ext.algorithms.es.es import ES
from rllib_ext.common.blackbox import BlackBoxAlgorithm, BlackBoxConfig
from rllib_ext.common.blackbox.samplers import make_sampler
from rllib_ext.common.policies import DETERMINISTIC_HEADS
from rllib_ext.settings import Setting, changed


class CVESConfig(BlackBoxConfig):
    """Config of CVES_EXT; defaults are paper 002 §4's. Shared settings: :class:`BlackBoxConfig`.

    §4 defaults: 2×32 ReLU MLP mean with a state-independent diagonal σ0 (``policy_head=
    "gaussian"``, actions sampled: ``explore_perturbations=True``), antithetic pairs with N = 5
    directions (``episodes_per_batch=10`` rollouts), σ 0.02, Adam lr 0.01, returns normalized
    (``return_shaping="standardize"``, App. C.2), no observation normalization. γ (RLlib's
    ``gamma`` setting) is 0.995 and frozen, not the paper's 0.99 adapted (see ``adapt_gamma``);
    ``configs/cves.yaml`` sets the paper's.

    Example:
        >>> from rllib_ext import CVESConfig
        >>> config = CVESConfig().environment("Pendulum-v1").training(eta_lr=1e-4)
    """

    SETTINGS = {
        "control_variate": Setting(True, bool, doc="use ĝ^cv (Eq. 8); False: ES baseline"),
        "eta_lr": Setting(1e-4, float, ge=0, symbol="α_η", doc="step of the η update (Eq. 9)"),
        "eta_init": Setting(0.0, float, doc="initial η (0: start as plain ES)"),
        # The black-box family does not read γ; here it discounts the policy-gradient control variate.
        "gamma": Setting(
            cv.DEFAULT_GAMMA_MAX,  # 0.995: where App. C.1's adaptation from 0.99 ends (adapt_gamma)
            float,
            ge=0,
            le=1,
            rllib=True,
            symbol="γ",
            doc="discount of the control variate (RLlib's setting; the paper starts at 0.99)",
        ),
        "adapt_gamma": Setting(
            False,
            bool,
            doc="adapt γ = 1 − exp(φ) from `gamma` (App. C.1); False: γ frozen, one ĝ^pg per episode",
        ),
        "gamma_max": Setting(
            cv.DEFAULT_GAMMA_MAX,
            float,
            gt=cv.GAMMA_MIN,
            le=cv.GAMMA_MAX,
            doc="the largest γ, frozen or adapted (not in the paper)",
        ),
        "pg_baseline": Setting(
            "previous_batch",
            choices=cv.PG_BASELINES,
            doc="baseline of ĝ^pg: the previous batch's mean weight per time step; `none` = Eq. 5",
        ),
        "phi_lr": Setting(1e-5, float, ge=0, symbol="α_φ", doc="φ step"),
        "phi_noise_stdev": Setting(0.02, float, gt=0, symbol="σ_φ", doc="φ perturbation scale"),
        "phi_num_perturbations": Setting(10, int, ge=2, symbol="N_φ", doc="φ perturbations (antithetic, even)"),
        "noise_stdev": changed(source="0.02 (§4)"),
        "episodes_per_batch": changed(default=10, symbol="—", doc="2N rollouts, N = 5 antithetic directions"),
        "sampler": changed(source="antithetic (§4)"),
        "return_shaping": changed(default="standardize", choices=cv.SHAPINGS, doc="App. C.2"),
        "optimizer": changed(source="Adam (§4)"),
        "lr": changed(symbol="—", source="0.01 (§4)"),
        "policy_hiddens": changed(default=[32, 32], source="2×32 (§4)"),
        "policy_activation": changed(default="relu", source="ReLU (§4)"),
        "policy_head": changed(default="gaussian", doc="state-independent diagonal σ0"),
        "explore_perturbations": changed(default=True, source="a stochastic policy (§3.2)"),
        "observation_filter": changed(default=False, source="no observation normalization (§4)"),
        "eval_episodes": changed(source="—"),
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or CVES)
        self.env_runner_cls = CVESEnvRunner

    @override(BlackBoxConfig)
    def validate(self) -> None:
        super().validate()
        if not (isinstance(self.env_runner_cls, type) and issubclass(self.env_runner_cls, CVESEnvRunner)):
            self._value_error(
                f"CVES_EXT needs env_runner_cls to be a CVESEnvRunner (subclass), got {self.env_runner_cls!r}"
            )
        if not cv.GAMMA_MIN <= self.gamma <= self.gamma_max:
            self._value_error(
                f"gamma (γ) must be in [{cv.GAMMA_MIN}, gamma_max={self.gamma_max}] (γ = 1 − exp(φ)), got {self.gamma}"
            )
        n_phi = self.phi_num_perturbations
        if n_phi % 2:
            self._value_error(
                f"phi_num_perturbations (N_φ) must be an even integer >= 2 (antithetic pairs), got {n_phi!r}"
            )
        if self.control_variate:
            if self.policy_head in DETERMINISTIC_HEADS or not self.explore_perturbations:
                self._value_error(
                    "the control variate needs a stochastic policy (paper 002 §3.2): policy_head 'gaussian' "
                    f"and explore_perturbations=True, got policy_head={self.policy_head!r}, "
                    f"explore_perturbations={self.explore_perturbations}"
                )
            if self.policy_head == "gaussian_2a":
                # Its std maps tanh outputs onto [0, 1]·half and can fall to ~1e-6: ∇log π ~ z/s then
                # reaches ~1e6 and the η step 2α_η·Y² ≫ 2 diverges. §4's policy has a state-independent σ0.
                self._value_error(
                    "the control variate takes policy_head 'gaussian' (paper 002 §4: a state-independent σ0), "
                    "not 'gaussian_2a', whose state-dependent std can collapse to ~1e-6 and blow up the η update"
                )


class CVES(ES):
    """ES with the structured control variate (Eq. 8), η (Eq. 9) and γ (App. C.1) adaptation.

    Attributes:
        eta: η, float64 [d].
        phi: φ, with γ = 1 − exp(φ).
    """

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> CVESConfig:
        return CVESConfig()

    @override(BlackBoxAlgorithm)
    def setup_state(self) -> None:
        super().setup_state()
        self.phi = cv.phi_of(float(self.config.gamma))  # the payload ships the γ's
        self._phi_sampler = make_sampler("antithetic", 1)
        self._eps_phi = np.zeros(0)
        self.mean_rewards: np.ndarray | None = None  # r̄_t of the previous batch (PG baseline)
        self.eta = np.full(self.theta.size, float(self.config.eta_init))

    @property
    def gamma(self) -> float:
        """The current discount factor γ = 1 − exp(φ)."""
        return cv.gamma_of(self.phi)

    def gammas_to_evaluate(self) -> np.ndarray | None:
        """[γ, γ_1 … γ_{N_φ}] whose J^γ and ĝ^pg,γ the runners compute for update u (None: no CV).

        ε_j of update u are the rows of an antithetic batch of the 1-d sampler, seeded by
        (config seed, u), so a restored checkpoint re-creates them.
        """
        cfg = self.config
        if not cfg.control_variate:
            return None
        if not cfg.adapt_gamma:
            self._eps_phi = np.zeros(0)
            return np.array([self.gamma])
        seed = 1_000_003 * int(cfg.seed or 0) + self.update_index
        self._eps_phi = self._phi_sampler.sample(seed, cfg.phi_num_perturbations)[:, 0].astype(np.float64)
        return np.concatenate([[self.gamma], cv.phi_perturbations(self.phi, self._eps_phi, cfg.phi_noise_stdev)])

    @override(BlackBoxAlgorithm)
    def make_payload(self) -> CVESPayload:
        """(θ_u, filter state, γ's of update u, their PG baseline) for every runner."""
        gammas = self.gammas_to_evaluate()
        baseline = None
        if gammas is not None and self.config.pg_baseline == "previous_batch" and self.mean_rewards is not None:
            baseline = cv.discounted_weights(self.mean_rewards, gammas)  # b_t(γ_j): mean w_t(γ_j) of batch u − 1
        return CVESPayload(
            theta=self.theta, filter_state=self.obs_filter.get_state(), gammas=gammas, pg_baseline=baseline
        )

    @override(ES)
    def estimate_gradient(self, seed: int, rows: list[CVESResult]) -> tuple[np.ndarray, dict[str, float]]:
        """ĝ^cv (Eq. 8) of the batch, then the η (Eq. 9) and φ (Eq. 13) updates on the same batch."""
        cfg = self.config
        if not cfg.control_variate:
            return super().estimate_gradient(seed, rows)
        eps = self.perturbations(rows)
        x, y, scale = cv.cv_terms(
            self.row_returns(rows),
            np.array([r.return_gamma for r in rows]),
            np.stack([r.g_pg for r in rows]),
            eps,
            float(cfg.noise_stdev),
            cfg.return_shaping,
            group=2 if self.sampler.antithetic else 1,
        )
        est = cv.cv_estimate(x, y, self.eta)
        info = {
            "cv_gamma": self.gamma,
            "cv_eta_abs_mean": float(np.abs(self.eta).mean()),
            "cv_return_scale": scale,
            "cv_pg_bytes_per_episode": float(rows[0].g_pg.nbytes),
        }
        if np.isfinite(est.var_es):
            info.update(cv_var_es=est.var_es, cv_var_cv=est.var_cv, cv_var_ratio=est.var_cv / max(est.var_es, 1e-300))
        if np.isfinite(est.corr):
            info["cv_corr"] = est.corr
        self.eta = cv.update_eta(self.eta, x, y[:, 0], float(cfg.eta_lr))  # Eq. (9), every pair
        if cfg.adapt_gamma:
            g_phi = cv.phi_gradient(est.f_gamma, self._eps_phi, float(cfg.phi_noise_stdev))  # Eq. (13)
            self.phi = cv.update_phi(self.phi, g_phi, float(cfg.phi_lr), float(cfg.gamma_max))
            info["cv_phi_grad"] = g_phi
        if cfg.pg_baseline == "previous_batch":
            self.mean_rewards = cv.mean_reward_sequence(np.stack([r.rewards for r in rows]))
        if not np.all(np.isfinite(self.eta)):
            raise FloatingPointError("CVES_EXT: η became non-finite; lower eta_lr (α_η)")
        return est.g_cv.astype(np.float32), info

    @override(BlackBoxAlgorithm)
    def _extra_state(self) -> dict[str, Any]:
        return {"eta": self.eta.copy(), "phi": self.phi, "mean_rewards": self.mean_rewards}

    @override(BlackBoxAlgorithm)
    def _set_extra_state(self, state: dict[str, Any]) -> None:
        self.eta = np.asarray(state["eta"], dtype=np.float64).copy()
        self.phi = float(state["phi"])
        mean_rewards = state.get("mean_rewards")  # absent in checkpoints before the PG baseline
        self.mean_rewards = None if mean_rewards is None else np.asarray(mean_rewards, dtype=np.float64)
