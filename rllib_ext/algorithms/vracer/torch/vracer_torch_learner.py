"""V-RACER's loss with ReF-ER (paper 003 §2-3, Algorithm 3), and its write-back into the RM.

Per sampled step k (stored: s_k, a_k, μ_k, V̂^tbc_k and Q̂^ret_k = r̂_{k+1} + γ V̂^tbc_{k+1}):

* ρ_k = π^w(a_k|s_k)/μ_k(a_k|s_k) with the current network;
* off-PG (Eq. 5): L^off-PG = −ρ_k (Q̂^ret_k − V^w(s_k)), the advantage held constant;
* value (Eq. 9): L^tbc = ½ (V^w(s_k) − V̂^tbc_k)²;
* ReF-ER (Eq. 10-11): β·mean[near_k·(L^off-PG + L^tbc)] + (1−β)·mean[D_KL(μ_k ‖ π^w)], where
  near_k is Rule 1 (1/c_max < ρ_k < c_max); Rule 1 clips policy and value gradients (§4).

After the update the pre-update ρ_k and V^w(s_k) are written back, and V̂^tbc is corrected for
step k and the prior steps of its episode with Eq. (8) (Algorithm 3; down to where the
correction has shrunk below ``retrace_tolerance``, see ``ReplayMemory``); for the last step of a
truncated episode V^w(s_T) is refreshed too (the paper computes it once, at storage). The
states s_T of those rows are appended to the minibatch's forward pass (their outputs take no
part in the loss), so V^w(s_T) comes from the same pre-update network as the stored V^w(s_k)
(before issue 19's speedup: a second forward pass after the update); always
:data:`V_LAST_ROWS` of them, padded, so that the compiled step (issue 42) sees one shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rllib_ext.common.refer.learner import ReFERLearner
from rllib_ext.common.refer.rules import diag_gaussian_log_rho, refer_loss
from rllib_ext.common.refer.torch_learner import LOG_RHO_MAX, ReFERTorchLearner, StepOutputs, batch_metrics, split_mu

#: Rows of s_T appended to every forward pass (padded), so that the compiled step sees one shape; the s_T
#: of further truncated-episode ends in a minibatch (rare: B/T of them on average) take an eager pass.
V_LAST_ROWS = 8


class VRACERTorchLearner(ReFERTorchLearner):
    """Algorithm 3 (the loss) and the V-RACER write-back."""

    LOSS_METRIC_NAMES = ("policy_loss", "vf_loss")

    @override(ReFERTorchLearner)
    def loss_terms(
        self,
        module_id: str,
        module: Any,
        config: Any,
        batch: dict[str, Any],
        fwd_out: dict[str, Any],
        beta: torch.Tensor | float,
        c_max: torch.Tensor | float,
    ) -> StepOutputs:
        """β·mean[near·(off-PG + value loss)] + (1−β)·mean[D_KL] (Eq. 5, 9, 10, 11)."""
        pi_mean, pi_std = split_mu(fwd_out[Columns.ACTION_DIST_INPUTS])
        v = fwd_out[Columns.VF_PREDS]
        rho, kl, near = self.rho_kl(batch, pi_mean, pi_std, c_max)
        advantage = (batch["q_ret"] - v).detach()
        pg_loss = -rho * advantage  # Eq. (5)
        vf_loss = 0.5 * (v - batch["v_tbc"]) ** 2  # Eq. (9)
        refer = self.refer
        weights = batch["weights"] if config.replay_mode == "per" else None
        loss = refer_loss(pg_loss + vf_loss, kl, near, beta, rule1=refer.rule1, rule2=refer.rule2, weights=weights)
        outputs = {
            "rho": rho.detach(),
            "v": v.detach(),
            "metrics": batch_metrics(kl, near, rho, refer.rule1, pg_loss, vf_loss),
        }
        if "v_last" in fwd_out:
            outputs["v_last"] = fwd_out["v_last"]
        return loss, outputs

    @override(ReFERTorchLearner)
    def _prepare_batch(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Adds ``obs_last``: :data:`V_LAST_ROWS` rows of s_T for the minibatch's truncated-episode ends.

        The first of them are the s_T of the rows with ``truncated_last`` (padded with copies of
        the first state); V(s_T) of any beyond :data:`V_LAST_ROWS` is computed here, before the
        update, with the same weights as the forward pass.
        """
        last = batch["truncated_last"]
        obs = batch[Columns.OBS]
        ends = batch["next_obs"][last] if bool(last.any()) else obs[:0]
        k = min(len(ends), V_LAST_ROWS)
        pad = obs[:1].expand(V_LAST_ROWS - k, *obs.shape[1:])
        self._num_last = len(ends)
        self._v_last_extra = None
        if len(ends) > V_LAST_ROWS:
            with torch.no_grad():
                self._v_last_extra = self._rl_module().value_and_policy(ends[V_LAST_ROWS:])[0].cpu().numpy()
        return {**batch, "obs_last": torch.cat([ends[:k], pad])}

    @override(ReFERTorchLearner)
    def _forward_train(self, module: Any, batch: dict[str, Any]) -> dict[str, Any]:
        """``forward_train`` on the minibatch plus its ``obs_last`` rows (:meth:`_prepare_batch`).

        The outputs of the appended rows are cut off (``v_last``, detached, for
        :meth:`_write_back`); the loss sees the B rows of the minibatch only.
        """
        B = batch[Columns.OBS].shape[0]
        obs = torch.cat([batch[Columns.OBS], batch["obs_last"]])
        out = super()._forward_train(module, {**batch, Columns.OBS: obs})
        trimmed = {k: v[:B] for k, v in out.items()}
        trimmed["v_last"] = out[Columns.VF_PREDS][B:].detach()
        return trimmed

    def _rl_module(self):
        return next(iter(self.module.values())).unwrapped()

    @override(ReFERLearner)
    def _score_episode(self, episode: dict[str, np.ndarray]) -> dict[str, Any]:
        """V(s_0..s_T) and ρ_t with the current network (Algorithm 2 stores V; ρ ≈ 1)."""
        with torch.no_grad():
            v, mean, std = self._rl_module().value_and_policy(torch.as_tensor(episode["obs"], device=self.device))
            mu_mean, mu_std = split_mu(torch.as_tensor(episode["mu"], device=self.device))
            T = len(episode["actions"])
            actions = torch.as_tensor(episode["actions"], device=self.device).reshape(T, -1)
            log_rho = diag_gaussian_log_rho(actions, mean[:T], std[:T], mu_mean, mu_std)
        v = v.cpu().numpy()
        return {"values": v[:T], "rho": np.exp(np.minimum(log_rho.cpu().numpy(), LOG_RHO_MAX)), "v_boot": float(v[T])}

    @override(ReFERLearner)
    def _write_back(self, sample: dict[str, np.ndarray]) -> None:
        """Stores ρ_k, V(s_k); refreshes V(s_T) of truncated episodes; Eq. (8) (Algorithm 3)."""
        v_boot = None
        last = sample["truncated_last"]
        v_last = self._stash.get("v_last")
        if last.any():
            if v_last is not None:  # the fast path's appended rows (and those beyond them)
                v_last = v_last[: self._num_last]
                if self._v_last_extra is not None:
                    v_last = np.concatenate([v_last, self._v_last_extra])
            else:  # the step went through RLlib's Learner.update: one more forward pass
                with torch.no_grad():
                    v_last = self._rl_module().value_and_policy(
                        torch.as_tensor(sample["next_obs"][last], device=self.device)
                    )[0]
                v_last = v_last.cpu().numpy()
            v_boot = np.full(len(last), np.nan)
            v_boot[last] = v_last
        self.memory.write_back(
            sample["idx"],
            rho=self._stash["rho"],
            values=self._stash["v"],
            td_error=sample["v_tbc"] - self._stash["v"],
            v_boot=v_boot,
        )
