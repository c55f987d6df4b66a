"""Modified SGD (MSGD), Eq. (19) of paper 000 (``000_918eb0e7bb8ca864``, §4.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from rllib_ext.optim.base import ADAM_STEP_FRACTION, NormalizedStepOptimizer
from rllib_ext.optim.sgd import DEFAULT_LR


class MSGD(NormalizedStepOptimizer):
    """Modified SGD: every update has the fixed norm 0.23·η·√d (paper 000 Eq. 19).

    θ_{u+1} = θ_u − 0.23·η·√d · grad/‖grad‖ (Eq. 19 with torch's minimizing sign). Adam's first
    update has norm η·√d (paper 000 App. B) and its later updates settle near 0.23 of that
    (§4.1); MSGD takes that settled magnitude from the first update on.

    ``d`` and ``‖grad‖`` are taken over all parameters of all param groups jointly (the flat θ of
    the paper); see :class:`~rllib_ext.optim.base.NormalizedStepOptimizer`. A zero gradient
    leaves the parameters unchanged.

    Sign convention: minimizes (steps along ``-param.grad``); ES-style callers holding an ascent
    estimate ĝ set ``param.grad = -ĝ``.

    Args:
        params: Parameters or parameter groups.
        lr: η (paper 000 Table 3: 0.01). RLlib may overwrite ``param_groups[*]["lr"]`` with a
            schedule; the step norm follows it.
        step_fraction: The 0.23 of Eq. (19).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = DEFAULT_LR,
        step_fraction: float = ADAM_STEP_FRACTION,
    ):
        if lr < 0.0:
            raise ValueError(f"MSGD: lr must be >= 0, got {lr}")
        if not step_fraction > 0.0:
            raise ValueError(f"MSGD: step_fraction must be > 0, got {step_fraction}")
        super().__init__(params, dict(lr=lr, step_fraction=step_fraction))

    def _step_factors(self) -> list[float]:
        return [group["step_fraction"] * group["lr"] for group in self.param_groups]  # 0.23·η, Eq. (19)
