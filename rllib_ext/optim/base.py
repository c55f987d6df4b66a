"""The fixed-norm step shared by MSGD and DSGD (paper 000, Eq. 19 and Eq. 22)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import overload

import torch

# Adam's update norm settles at about 0.23 of its first (largest) update η·√d; paper 000 §4.1
# measured the factor and uses it for MSGD's step norm (Eq. 19) and DSGD's lower clip (Eq. 21).
ADAM_STEP_FRACTION = 0.23


class NormalizedStepOptimizer(torch.optim.Optimizer):
    """Base class of optimizers that step a fixed distance along the normalized gradient.

    Each ``step()`` moves every parameter group ``g`` by ``-s_g · √d · grad_g / ‖grad‖``
    (paper 000 Eq. 19/22 with torch's minimizing sign), where

    * ``d`` is the number of scalars in **all** parameters of **all** groups, jointly — the
      dimension of the flat θ the paper writes; a parameter whose ``grad`` is ``None`` counts
      in ``d`` and contributes a zero gradient;
    * ``‖grad‖`` is the Euclidean norm of the concatenated gradient of all groups, jointly;
    * ``s_g`` is the per-group step factor given by :meth:`_step_factors` (``0.23·lr`` for MSGD,
      ``η_u`` for DSGD).

    With one learning rate for every group the whole step has norm exactly ``s·√d``. With
    groups of different learning rates, each group's share follows its own rate: the step's norm
    is ``√d · sqrt(Σ_g s_g² ‖grad_g‖²) / ‖grad‖``.

    A zero (or all-``None``) gradient has no direction, and a non-finite one no usable norm: in
    both cases the parameters are left unchanged (no NaN), and subclasses still run their
    bookkeeping.

    Sign convention: optimizers minimize, stepping along ``-param.grad``. For an ascent estimate
    ĝ of ∇J (ES, DFD), set ``param.grad = -ĝ``.
    """

    def _step_factors(self) -> list[float]:
        """Returns the step factor s_g of each param group (step norm per √d)."""
        raise NotImplementedError

    def _after_step(self) -> None:
        """Bookkeeping run after every step, zero gradient included (DSGD's controller)."""

    @overload
    def step(self, closure: None = None) -> None: ...

    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Takes one fixed-norm step along ``-grad/‖grad‖``.

        Args:
            closure: Optional; re-evaluates the model and returns the loss, as in torch.

        Returns:
            The closure's loss, or None.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._normalized_step()
        self._after_step()
        return loss

    @torch.no_grad()
    def _normalized_step(self) -> None:
        """Applies the fixed-norm step, with ‖grad‖ and d over all groups jointly."""
        params = [p for group in self.param_groups for p in group["params"]]
        d = sum(p.numel() for p in params)
        grads = [p.grad for p in params if p.grad is not None]
        grad_norm = 0.0
        if grads:
            norms = [torch.linalg.vector_norm(g, dtype=torch.float64).cpu() for g in grads]  # any dtype mix
            grad_norm = float(torch.linalg.vector_norm(torch.stack(norms)))
        if grad_norm == 0.0 or not math.isfinite(grad_norm):
            return
        for group, s in zip(self.param_groups, self._step_factors(), strict=True):
            scale = -s * math.sqrt(d) / grad_norm  # Eq. (19)/(22), paper 000 §4.1, minimizing sign
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=scale)
