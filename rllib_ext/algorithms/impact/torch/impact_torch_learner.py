"""IMPACT's loss in torch (paper 004, Algorithm 1 line 8; §3.1; §4.1).

Read top to bottom, :meth:`IMPACTTorchLearner.compute_loss_for_module` computes:

1. log-probabilities of the taken actions under πθ (learner, with gradient), πtarget (target
   network, cached at the batch's first draw) and πworker (behaviour, from the env runner);
2. V-trace GAE-λ advantages A^{V-GAE} (§3.1, Han & Sung 2019) with importance weights
   πtarget/πworker truncated at ρ̄ (on δ) and c̄ (on the traces) — a linear operator on the TD
   errors that is fixed per batch from its first draw, so it is built once and applied on each
   draw (``batch_constants``, ``utils.TraceOperator``), over the flat batch as one column so
   that each trace runs to the end of its fragment or episode — and the critic's target
   V̂_{V-GAE} of Algorithm 1 line 8: V + A^{V-GAE} by default, or the λ = 1 V-trace target v_s
   (``value_target``); with ``standardize_advantages`` (opt-in, not in the paper) the
   advantages are then standardised over the batch's valid steps;
3. the surrogate ratio R (R3 = πθ / max(πtarget, β πworker), β = 1/ρ, or the ablation R1/R2 of
   §4.1) inside PPO's ε-clipped objective min(R·A, clip(R, 1−ε, 1+ε)·A);
4. value loss ½ (V(s) − V̂)², entropy bonus, and the KL(πtarget ‖ πθ) penalty η·KL;
   total = −surrogate + c_vf · value loss − c_ent · entropy + η · KL.
Means run over the valid (loss_mask = 1) steps only and are NaN-safe (``masked_mean``).
Gradients are clipped by global norm (``grad_clip``) by RLlib's ``postprocess_gradients``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.utils.annotations import override
from ray.rllib.utils.typing import ModuleID, TensorType

from rllib_ext._compat import foreach_norm
from rllib_ext.algorithms.impact.impact_learner import (
    KL_COEFF_KEY,
    KL_KEY,
    TARGET_DIST_INPUTS,
    TARGET_LOGP,
    IMPACTLearner,
)
from rllib_ext.algorithms.impact.losses import (
    VGAETraces,
    clipped_surrogate,
    masked_mean,
    masked_standardize,
    ratio_stats,
    surrogate_log_ratio,
)
from rllib_ext.common.threads import TorchThreadsLearner
from rllib_ext.optim import make_optimizer

#: Batch key of the per-batch constants (:class:`BatchConstants`), built at the first draw.
BATCH_CONSTANTS = "_impact_batch_constants"


@dataclasses.dataclass
class BatchConstants:
    """What a drawn batch's loss needs that does not change between its K draws."""

    key: tuple  # the config values it was built with
    mask_tm: torch.Tensor  # loss mask, the batch as one time-major column [N, 1]
    logp_target_tm: torch.Tensor  # log π_target(a|s), [N, 1]
    logp_worker_tm: torch.Tensor  # log π_worker(a|s), [N, 1]
    traces: VGAETraces  # ρ, γ_t, r and the V-trace GAE-λ operator(s)


class IMPACTTorchLearner(TorchThreadsLearner, IMPACTLearner, TorchLearner):
    """Torch implementation of IMPACT's loss, target evaluation and optimizer choice."""

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: ModuleID, config=None) -> None:
        """One optimizer over the module's parameters, chosen by ``config.optimizer``."""
        config = config or self.config.get_config_for_module(module_id)
        params = self.get_parameters(self.module[module_id])
        kwargs = dict(config.optimizer_kwargs or {})
        kwargs.pop("lr", None)
        lr0 = config.lr if isinstance(config.lr, (int, float)) else config.lr[0][1]
        optimizer = make_optimizer(config.optimizer, params, lr=lr0, **kwargs)
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params, lr_or_lr_schedule=config.lr)

    @override(IMPACTLearner)
    def _attach_target_outputs(self, batch) -> None:
        """Algorithm 1 line 7: evaluate the batch on θ' once (k = 0) and keep the output."""
        with torch.no_grad():
            for module_id, module_batch in batch.policy_batches.items():
                module = self.module[module_id].unwrapped()
                dist_inputs = module.forward_target(module_batch)[TARGET_NETWORK_ACTION_DIST_INPUTS]
                dist = module.get_train_action_dist_cls().from_logits(dist_inputs)
                module_batch[TARGET_DIST_INPUTS] = dist_inputs
                module_batch[TARGET_LOGP] = dist.logp(module_batch[Columns.ACTIONS])

    @override(IMPACTLearner)
    def _nonfinite_weights(self, module_ids: list[ModuleID]) -> list[str]:
        """One fused reduction (:func:`~rllib_ext._compat.foreach_norm`) over the modules' parameters on their
        device and one sync; the per-parameter check (exact, naming them) only when it flags.

        A norm is NaN or inf when its tensor holds a NaN or ±inf, and can also overflow to inf
        for finite weights beyond ~1e19 (float32): the exact check then clears them.
        """
        named = [
            (f"{mid}/{name}", p)
            for mid in module_ids
            for name, p in self.module[mid].unwrapped().named_parameters()
            if p.numel() and p.is_floating_point()
        ]
        if not named:
            return []
        with torch.no_grad():
            norms = foreach_norm([p.detach() for _, p in named])
            if bool(torch.isfinite(torch.stack([n.to(norms[0].device) for n in norms])).all()):
                return []
            return [name for name, p in named if not bool(torch.isfinite(p).all())]

    @override(IMPACTLearner)
    def _set_kl_coeff(self, module_id: ModuleID, value: float) -> None:
        self.curr_kl_coeffs_per_module[module_id].data.fill_(float(value))

    @override(IMPACTLearner)
    def _all_reduce(self, values: list[float], op: str) -> list[float]:
        """torch.distributed's all-reduce in the learners' process group (DDP's: gloo or NCCL)."""
        if not values:
            return []
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        reduce_op = {"sum": torch.distributed.ReduceOp.SUM, "min": torch.distributed.ReduceOp.MIN}[op]
        torch.distributed.all_reduce(tensor, op=reduce_op)
        return tensor.tolist()

    @staticmethod
    def _time_major_fn(config, batch):
        """The flat batch as one time-major column: [B*T] (or a recurrent [B, T]) -> [N, 1].

        The traces of §3.1 run per worker sample batch (fragment) and stop at an episode's end.
        RLlib's learner connector lays the batch out chunk by chunk, one chunk per (fragment,
        episode) piece, each followed by its phantom step (and, with a recurrent module, by
        zero-padding up to a multiple of ``max_seq_len``, row by row in the same order). Those
        steps have discount 0 and TD error 0, so over the one column every trace stops exactly
        at its chunk's end: per fragment, as the paper defines it. (APPO's rows of
        ``rollout_fragment_length`` steps, or of ``max_seq_len`` steps with an LSTM, would cut
        traces inside fragments, because the phantom steps shift the row boundaries.)
        """

        def tm(x):
            return x.reshape(-1, 1)

        return tm

    def batch_constants(self, *, config, batch) -> BatchConstants:
        """The batch's time-major constants and its V-trace GAE-λ operator, built once.

        Everything here depends only on the batch, π_target (attached at the first draw, k = 0,
        Algorithm 1 line 7) and the config, so it is computed at the batch's first loss and kept
        in the batch (key :data:`BATCH_CONSTANTS`) for its later draws; only the critic's values
        change between draws. A different config (e.g. another λ) rebuilds it.

        Layout: RLlib's learner connector appends one bootstrap ("phantom") step per episode
        chunk (loss_mask = 0; reward 0) and flags a terminal on the chunk's last real step. Here
        the phantom step's discount and TD error are 0, so the last real step bootstraps from
        V(s_T), the phantom step's value (or from 0 when it is terminal), and no trace crosses
        into the next chunk. The whole batch is one column (:meth:`_time_major_fn`), so each
        trace runs to its chunk's end: per fragment, §3.1. RLlib's APPO cuts rows of
        ``rollout_fragment_length`` steps instead, and treats every chunk end as a terminal
        (see benchmarks/RESULTS.md).
        ``tests/smoke/algorithms/impact/test_impact_learner.py`` checks this layout on real
        batches (feed-forward and LSTM) against closed forms computed from the sampled
        episodes, and ``tests/unit/algorithms/impact/test_impact_torch_learner.py`` off-policy
        against §3.1's double sum per fragment at Table 1's scale.

        Raises:
            ValueError: The batch's last step is a real step (loss_mask 1): its bootstrap value
                V(s_T) would be missing, which RLlib's learner connector never produces.
        """
        key = (
            config.gamma,
            config.lambda_,
            config.vtrace_clip_rho_threshold,
            config.vtrace_clip_c_threshold,
            config.value_target,
        )
        cached = batch.get(BATCH_CONSTANTS)
        if cached is not None and cached.key == key:
            return cached
        tm = self._time_major_fn(config, batch)
        with torch.no_grad():
            mask_tm = tm(batch[Columns.LOSS_MASK].float())
            if mask_tm.numel() and bool(mask_tm[-1, 0]):  # once per batch
                raise ValueError(
                    "IMPACT_EXT: the train batch ends on a real step (loss_mask 1), not on the "
                    "bootstrap (phantom) step RLlib's learner connector appends to every episode "
                    "chunk; V(s_T) of its last chunk is missing. Keep APPO's learner connector "
                    "(AddOneTsToEpisodesAndTruncate) in the learner pipeline."
                )
            logp_target, logp_worker = tm(batch[TARGET_LOGP]), tm(batch[Columns.ACTION_LOGP])
            traces = VGAETraces(
                target_logp=logp_target,
                behaviour_logp=logp_worker,
                discounts=(1.0 - tm(batch[Columns.TERMINATEDS]).float()) * config.gamma * mask_tm,
                rewards=tm(batch[Columns.REWARDS]) * mask_tm,
                valid=mask_tm,
                lam=config.lambda_,
                rho_bar=config.vtrace_clip_rho_threshold,
                c_bar=config.vtrace_clip_c_threshold,
                value_target=config.value_target,
            )
        constants = BatchConstants(key, mask_tm, logp_target, logp_worker, traces)
        batch[BATCH_CONSTANTS] = constants
        return constants

    def value_targets_and_advantages(self, *, config, batch, values: torch.Tensor):
        """The critic's targets V̂ and V-trace GAE-λ advantages (§3.1), both one column [N, 1].

        V̂ is V + A^{V-GAE} (``value_target="v_gae"``, Algorithm 1 line 8) or the λ = 1 V-trace
        target v_s (``"vtrace"``); see :class:`~rllib_ext.algorithms.impact.losses.VGAETraces`
        and :meth:`batch_constants` for the layout. Importance weights are πtarget/πworker
        (``TARGET_LOGP`` must be attached, Algorithm 1 line 7).
        """
        constants = self.batch_constants(config=config, batch=batch)
        return self._traces(constants, self._time_major_fn(config, batch)(values))

    @staticmethod
    def _traces(constants: BatchConstants, values_tm: torch.Tensor):
        """(V̂, A^{V-GAE}) of the batch's one column for V = ``values_tm`` [N, 1].

        The column ends on a phantom (or padding) step whose TD error and discount are 0, so
        the bootstrap V(s_N) after it is multiplied by 0: any value does (zeros here).
        """
        return constants.traces(values_tm, values_tm.new_zeros(values_tm.shape[1:]))

    @override(TorchLearner)
    def compute_loss_for_module(
        self,
        *,
        module_id: ModuleID,
        config,
        batch: dict[str, Any],
        fwd_out: dict[str, TensorType],
    ) -> TensorType:
        """The IMPACT objective of Algorithm 1 line 8 for one module (see module docstring)."""
        module = self.module[module_id].unwrapped()

        tm = self._time_major_fn(config, batch)
        constants = self.batch_constants(config=config, batch=batch)  # built at k = 0, then kept
        mask = batch[Columns.LOSS_MASK].float()
        count = torch.sum(mask)
        mask_tm = constants.mask_tm

        # 1. The three policies' log-likelihoods of the taken actions.
        dist_cls = module.get_train_action_dist_cls()
        pi_theta = dist_cls.from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        pi_target = dist_cls.from_logits(batch[TARGET_DIST_INPUTS])
        logp_theta = tm(pi_theta.logp(batch[Columns.ACTIONS]))
        logp_target = constants.logp_target_tm
        logp_worker = constants.logp_worker_tm

        # 2. V-trace GAE-λ advantages (§3.1) and the critic's targets (Algorithm 1 line 8).
        values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        values_tm = tm(values)
        value_targets, advantages = self._traces(constants, values_tm)
        raw_advantages_mean = masked_mean(advantages, mask_tm, count).detach()
        if config.standardize_advantages:  # opt-in, not in the paper (RLlib PPO's habit)
            advantages = masked_standardize(advantages, mask_tm, count)

        # 3. Surrogate ratio (R3 by default, Algorithm 1 line 8 / §4.1) with PPO's ε-clip.
        rho = float(config.target_worker_clipping)
        log_ratio = surrogate_log_ratio(
            config.surrogate_ratio,
            logp_theta=logp_theta,
            logp_target=logp_target,
            logp_worker=logp_worker,
            rho=rho,
        )
        # A phantom step's log-ratio can overflow exp(); its gradient would then be 0·inf = NaN
        # even though the masked mean ignores it, so masked steps get log R = 0.
        log_ratio = torch.where(mask_tm > 0, log_ratio, torch.zeros_like(log_ratio))
        ratio = torch.exp(log_ratio)
        surrogate = clipped_surrogate(ratio, advantages, config.clip_param)
        mean_pi_loss = -masked_mean(surrogate, mask_tm, count)

        # 4. Value loss on V̂ (Algorithm 1 line 8), entropy bonus, KL(πtarget ‖ πθ) penalty.
        mean_vf_loss = 0.5 * masked_mean(torch.square(values_tm - value_targets), mask_tm, count)
        mean_entropy = masked_mean(pi_theta.entropy(), mask, count)
        mean_kl = masked_mean(pi_target.kl(pi_theta), mask, count)
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        kl_coeff = self.curr_kl_coeffs_per_module[module_id]
        total_loss = mean_pi_loss + config.vf_loss_coeff * mean_vf_loss - entropy_coeff * mean_entropy
        if config.use_kl_loss:
            total_loss = total_loss + kl_coeff * mean_kl
        self._last_kl[module_id] = mean_kl.detach()

        # Diagnostics: each ratio's mean and max, fractions clipped by ρ and by ε.
        with torch.no_grad():
            stats = {
                POLICY_LOSS_KEY: mean_pi_loss,
                VF_LOSS_KEY: mean_vf_loss,
                ENTROPY_KEY: mean_entropy,
                KL_KEY: mean_kl,
                KL_COEFF_KEY: kl_coeff,
                "advantages_mean": raw_advantages_mean,  # before any standardisation
                # β·πworker > πtarget  <=>  πworker/πtarget > ρ: R3's denominator is clipped.
                "frac_clipped_rho": masked_mean((logp_worker - math.log(rho) > logp_target).float(), mask_tm, count),
                "frac_clipped_eps": masked_mean((torch.abs(ratio - 1.0) > config.clip_param).float(), mask_tm, count),
            }
            for name, kind in (("ratio_r1", "r1"), ("ratio_r2", "r2"), ("ratio_r3", "r3")):
                lr_k = surrogate_log_ratio(
                    kind, logp_theta=logp_theta, logp_target=logp_target, logp_worker=logp_worker, rho=rho
                )
                stats.update(ratio_stats(name, lr_k, mask_tm, count))
        self.metrics.log_dict(stats, key=module_id, window=1)
        return total_loss
