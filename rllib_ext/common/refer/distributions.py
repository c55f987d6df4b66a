"""Diagonal Gaussian policy sampled as a normal truncated at ±3σ (paper 003 App. A).

"When sampling the components of the action vectors, the policies are treated as truncated
normal distributions with symmetric bounds at three standard deviations from the mean."
Sampling is exact (inverse CDF on [Φ(−3), Φ(3)]). ``logp`` stays the untruncated Gaussian
density: the truncation constant erf(3/√2) is the same for every σ, so it cancels in ρ = π/μ
(see :func:`rllib_ext.common.refer.rules.diag_gaussian_log_rho`). ``from_logits`` takes RLlib's
layout (mean, log σ); ``to_deterministic`` gives the mean (``explore=False``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian
from ray.rllib.utils.annotations import override

__all__ = ["TruncatedDiagGaussian", "TRUNCATION"]

#: Truncation bound in standard deviations.
TRUNCATION = 3.0


class TruncatedDiagGaussian(TorchDiagGaussian):
    """RLlib's diagonal Gaussian whose samples are truncated at mean ± 3σ."""

    # The signatures are RLlib's TorchDistribution's (sample_shape only); its abstract Distribution
    # declares return_logp and **kwargs, which no torch distribution of RLlib's takes.
    @override(TorchDiagGaussian)
    def sample(self, *, sample_shape: Sequence[int] | None = None) -> torch.Tensor:  # type: ignore[override]
        """a = m + σ·Φ⁻¹(u), u ~ U[Φ(−3), Φ(3)]."""
        dist: torch.distributions.Normal = self._dist
        loc: torch.Tensor = dist.loc  # torch's Normal leaves its parameters unannotated
        scale: torch.Tensor = dist.scale
        shape = torch.Size(sample_shape or ()) + loc.shape
        lo = 0.5 * (1.0 + math.erf(-TRUNCATION / math.sqrt(2.0)))
        u = lo + (1.0 - 2.0 * lo) * torch.rand(shape, dtype=loc.dtype, device=loc.device)
        z: torch.Tensor = torch.special.ndtri(u)  # unannotated in torch
        return loc + scale * z

    @override(TorchDiagGaussian)
    def rsample(self, *, sample_shape: Sequence[int] | None = None) -> torch.Tensor:  # type: ignore[override]
        """Reparameterized truncated sample (gradient flows through m and σ)."""
        return self.sample(sample_shape=sample_shape)
