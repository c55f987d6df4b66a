"""The shared noise table of OpenAI ES (Salimans et al. 2017): ε_i as a slice of one block of noise.

One block of Gaussian noise (``noise_table_size`` numbers, ``noise_table_dtype``, drawn from
``noise_table_seed``) is put once in Ray's object store by the driver; every runner receives its
``ObjectRef`` with the payload and maps it read-only (one copy per node, shared by the node's
runners). Row ``i`` of batch ``seed`` is ε_i = ± ``noise[o : o + d]``, at the offset ``o`` that the
driver sends with the job (``PerturbationJob.noise_offset``): a slice costs a memory read, where
regenerating a row from a seeded generator costs d Gaussian draws (issue 41; the review measured
70 µs per row at d = 4.6k and 2.9 ms at d = 100k regenerated, against 47 µs for a slice), and the
driver's update gathers the rows of a batch in one indexed copy and takes one weighted sum
(:func:`~rllib_ext.common.blackbox.es_gradient.es_gradient`).

The offset of direction k of batch ``seed`` is a SplitMix64 hash of (seed, k) modulo
``size − d + 1``, so a batch is still reproducible from its seed; with antithetic pairs rows 2k and
2k + 1 share direction k's offset and row 2k + 1 is its negation. Slices of different rows overlap
(they are correlated for nearby offsets, as in OpenAI ES); each row is exactly N(0, I_d) in
distribution only over the table's draw, which is why the seeded samplers stay for what needs
exactness across table sizes (``noise_table=False``; jobs without an offset, e.g. in checkpoints
written before the table, always take the seeded path).

Only the i.i.d. Gaussian samplers (``gaussian``, with or without antithetic pairs, and
``antithetic``) have a table form: orthogonal, GCMC and QMC couple directions within a batch,
which slices of one block cannot do (``BlackBoxConfig.validate`` refuses ``noise_table=True`` with
them; ``"auto"`` keeps them on the seeded path).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TABLE_SAMPLERS", "NoiseTable", "make_noise"]

#: The samplers the table can stand for (i.i.d. Gaussian directions, antithetic pairs or not).
TABLE_SAMPLERS = ("gaussian", "antithetic")

#: Second word of the table's generator seed: the table's stream is no batch's or episode's.
_TABLE_STREAM = 0x5EED_7AB1E

_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def make_noise(size: int, seed: int, dtype: str = "float32") -> np.ndarray:
    """The table: ``size`` standard normal numbers from ``default_rng([seed, _TABLE_STREAM])``."""
    if int(size) < 1:
        raise ValueError(f"noise table size must be >= 1, got {size}")
    rng = np.random.default_rng([int(seed), _TABLE_STREAM])
    noise: np.ndarray = rng.standard_normal(int(size), dtype=np.float32).astype(np.dtype(dtype), copy=False)
    return noise


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


class NoiseTable:
    """Rows ε_i of d parameters as slices of ``noise`` (see the module docstring).

    Args:
        noise: The block of noise, 1-D (``make_noise``; a runner's is a read-only view of Ray's
            object store).
        dim: d.
        antithetic: Whether rows come in pairs (2k, 2k + 1) = (ε_k, −ε_k).
    """

    def __init__(self, noise: np.ndarray, dim: int, *, antithetic: bool):
        if noise.ndim != 1 or noise.size < dim:
            raise ValueError(
                f"the noise table holds {noise.size} numbers, fewer than the {dim} parameters perturbed: "
                "raise noise_table_size (or set noise_table=False)"
            )
        self.noise, self.dim, self.antithetic = noise, int(dim), bool(antithetic)
        self.windows = np.lib.stride_tricks.sliding_window_view(noise, self.dim)  # [size - d + 1, d], no copy

    def offsets(self, seed: int, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Where rows ``indices`` of batch ``seed`` start in the table (int64)."""
        rows = np.asarray(indices, dtype=np.uint64)
        k = rows // np.uint64(2) if self.antithetic else rows
        with np.errstate(over="ignore"):
            h = _mix(np.uint64(int(seed) & 0xFFFF_FFFF_FFFF_FFFF) * _GOLDEN ^ _mix(k + _GOLDEN))
        offsets: np.ndarray = (h % np.uint64(len(self.windows))).astype(np.int64)
        return offsets

    def _signs(self, indices: np.ndarray) -> np.ndarray | None:
        if not self.antithetic:
            return None
        signs: np.ndarray = np.where(np.asarray(indices) % 2 == 1, -1.0, 1.0).astype(np.float32)
        return signs

    def row(self, offset: int, index: int) -> np.ndarray:
        """ε of row ``index`` at ``offset``, float32 [d] (a read-only view where no sign or cast applies)."""
        eps = self.noise[int(offset) : int(offset) + self.dim]
        if self.antithetic and int(index) % 2 == 1:
            return -eps.astype(np.float32, copy=False)
        return eps.astype(np.float32, copy=False)

    def scaled_row_into(self, out: np.ndarray, offset: int, index: int, scale: np.float32) -> np.ndarray:
        """``out[:] = scale · row(offset, index)`` (float32 [d]) without a temporary: the runner's
        per-job θ_u + σε (the same numbers as ``scale * row(...)``: σ·(−ε) = −(σ·ε) exactly)."""
        eps = self.noise[int(offset) : int(offset) + self.dim]
        sign = -1 if self.antithetic and int(index) % 2 == 1 else 1
        np.multiply(eps, np.float32(sign * scale), out=out)
        return out

    def rows(self, offsets: np.ndarray, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """ε of many rows, float32 [n, d]: one indexed copy of the slices."""
        eps: np.ndarray = self.windows[np.asarray(offsets, dtype=np.int64)].astype(np.float32, copy=False)
        signs = self._signs(np.asarray(indices))
        if signs is not None:
            eps *= signs[:, None]
        return eps

    def weighted_sum(self, weights: np.ndarray, offsets: np.ndarray, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Σ_i w_i ε_i, float64 [d]: the update's one batched weighted sum over the slices."""
        w = np.asarray(weights, dtype=np.float64)
        signs = self._signs(np.asarray(indices))
        if signs is not None:
            w = w * signs
        total: np.ndarray = w @ self.windows[np.asarray(offsets, dtype=np.int64)]
        return total
