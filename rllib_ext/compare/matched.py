"""Matched settings (``rllib race --matched TARGET:SOURCE``): a rival given IMPACT_EXT's settings in its own units.

Paper 004 defines two equivalences; each is one function here, and :data:`RULES` names them by
(target's registered name, source's registered name):

- **APPO ← IMPACT_EXT** (:func:`appo_from_impact`; paper 004 §3.2 "Circular Buffer" and §4.1.1
  "Target Network Update Frequency"). The circular buffer C(N, K) and the batch size M carry over
  as they are (``circular_buffer_num_batches`` = N, ``circular_buffer_iterations_per_batch`` = K,
  ``train_batch_size_per_learner`` = M, the paper's "Train Batch Size"), as do lr, the clip ε, the
  KL term (``use_kl_loss``, ``kl_coeff``, ``kl_target``), γ, the loss coefficients, the gradient
  clip and τ. The target period differs in unit: IMPACT_EXT's ``target_network_update_freq`` t
  counts learner updates (None: n = N·K, §4.1.1), RLlib 2.60's APPO syncs once
  ``NUM_ENV_STEPS_TRAINED_LIFETIME`` grew by ``target_network_update_freq · N · K · M`` since the
  last sync (``APPOLearner.after_gradient_based_update``), and each update trains on M env steps,
  so APPO's value is t / (N·K) (1.0 at the paper's n = N·K). APPO adapts its KL coefficient at
  each target sync, as IMPACT_EXT does.
- **PPO ← IMPACT_EXT** (:func:`ppo_from_impact`; paper 004 §3.2: "When target network's update
  frequency n = NK, the circular buffer is equivalent to distributed PPO's training batch when the
  learner samples N minibatches for K SGD iterations", and §4.1.1): train batch N·M, minibatch M,
  K epochs, so both make K/M updates per env step, and the same lr, ε, KL term, γ, λ and loss
  coefficients. It holds only at n = N·K: another target period is refused.

Execution settings (``rollout_fragment_length`` S, runners, learners) are not mapped: the race
holds them equal through ``--common``. Nothing here imports Ray or builds anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class MatchError(ValueError):
    """A mapping that cannot be made (the message names the setting)."""


#: Settings with the same meaning and unit in IMPACT_EXT and APPO/PPO, copied as they are.
SAME_MEANING = ("lr", "clip_param", "use_kl_loss", "kl_coeff", "kl_target", "gamma", "vf_loss_coeff", "entropy_coeff")


def _impact_nkm(impact: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(N, K, M, t) of an IMPACT_EXT config: t the target period in learner updates (None means N·K)."""
    try:
        n = int(impact["circular_buffer_num_batches"])
        k = int(impact["circular_buffer_iterations_per_batch"])
        m = int(impact["train_batch_size_per_learner"])
    except KeyError as e:
        raise MatchError(f"the IMPACT_EXT settings lack {e.args[0]}") from None
    t = impact.get("target_network_update_freq")
    return n, k, m, n * k if t is None else int(t)


def _same(impact: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: impact[key] for key in keys if key in impact}


def appo_from_impact(impact: Mapping[str, Any]) -> dict[str, Any]:
    """APPO's settings equal to an IMPACT_EXT config's (paper 004 §3.2, §4.1.1; see the module docstring).

    Args:
        impact: IMPACT_EXT's settings (its built config's values, defaults included).

    Returns:
        APPO's ``{key: value}``.
    """
    n, k, m, t = _impact_nkm(impact)
    out = {
        "use_circular_buffer": True,
        "circular_buffer_num_batches": n,
        "circular_buffer_iterations_per_batch": k,
        "train_batch_size_per_learner": m,
        # APPO: sync when trained env steps grew by freq·N·K·M; one update trains M steps: t updates = t/(N·K).
        "target_network_update_freq": t / (n * k),
        **_same(impact, (*SAME_MEANING, "tau", "grad_clip", "grad_clip_by")),
    }
    return out


def ppo_from_impact(impact: Mapping[str, Any]) -> dict[str, Any]:
    """PPO's settings equivalent to an IMPACT_EXT config (paper 004 §3.2: train batch N·M, minibatch M, K epochs).

    Raises:
        MatchError: When IMPACT_EXT's target period is not N·K (the equivalence needs n = N·K).
    """
    n, k, m, t = _impact_nkm(impact)
    if t != n * k:
        raise MatchError(
            f"PPO matches IMPACT_EXT only at a target period n = N·K = {n * k} learner updates (paper 004 §3.2); "
            f"IMPACT_EXT has target_network_update_freq = {t}"
        )
    return {
        "train_batch_size_per_learner": n * m,
        "minibatch_size": m,
        "num_epochs": k,
        **_same(impact, (*SAME_MEANING, "lambda_", "grad_clip", "grad_clip_by")),
    }


#: ``{(target registered name, source registered name): (mapping, where the paper defines it)}``.
RULES: dict[tuple[str, str], tuple[Callable[[Mapping[str, Any]], dict[str, Any]], str]] = {
    ("APPO", "IMPACT_EXT"): (appo_from_impact, "paper 004 §3.2, §4.1.1"),
    ("PPO", "IMPACT_EXT"): (ppo_from_impact, "paper 004 §3.2 (n = N·K)"),
}

#: The keys a source config must give a mapping (read from the built config: defaults included).
SOURCE_KEYS = (
    "circular_buffer_num_batches",
    "circular_buffer_iterations_per_batch",
    "train_batch_size_per_learner",
    "target_network_update_freq",
    *SAME_MEANING,
    "tau",
    "lambda_",
    "grad_clip",
    "grad_clip_by",
)


def matched_settings(target: str, source: str, source_config: Any) -> tuple[dict[str, Any], str]:
    """The target's settings matched to the source's built config, and where the rule is defined.

    Args:
        target: The target's registered name (``APPO``, ``PPO``).
        source: The source's registered name (``IMPACT_EXT``).
        source_config: The source's config (an ``AlgorithmConfig``, or a mapping of its values).

    Raises:
        MatchError: No rule for the pair, or a rule that does not hold for these settings.
    """
    if (target, source) not in RULES:
        known = ", ".join(f"{t}:{s}" for t, s in RULES)
        raise MatchError(f"no matched mapping from {source} to {target} (the papers define {known})")
    rule, where = RULES[(target, source)]
    if isinstance(source_config, Mapping):
        values = dict(source_config)
    else:
        values = {key: getattr(source_config, key) for key in SOURCE_KEYS if hasattr(source_config, key)}
    return rule(values), where
