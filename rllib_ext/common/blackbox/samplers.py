"""Perturbation samplers for ES-style gradient estimates, reproducible from (batch seed, index).

Paper 000 §2.2 (``000_918eb0e7bb8ca864``) perturbs θ with ε ~ N(0, I) (Eq. 7); paper 002 §4
(``002_0511cdacd6792c57``) compares general-purpose variance reduction for that noise: antithetic
pairs, orthogonal directions, geometrically coupled lengths (GCMC) and quasi Monte Carlo (QMC).

**Low bandwidth.** A batch of perturbations is fully determined by an integer *batch seed* (and
the sampler's construction arguments), so the driver and each remote worker build the same
sampler, and a job or a result carries only ``(seed, n, i)``, never a noise vector::

    sampler = make_sampler("orthogonal", dim=d)
    eps = sampler.sample(seed, n)                  # driver: [n, d] float32
    eps_i = sampler.perturbation(seed, n, i)       # worker: == eps[i], bit for bit

**Layout of a batch.** ``sample(seed, n)`` returns ``n`` rows. A sampler draws *directions*
δ_0, δ_1, ...; without antithetic pairs row ``i`` is δ_i. With antithetic pairs (``antithetic``
true: always for ``"antithetic"`` and ``"gcmc"``, optional for ``"gaussian"``, ``"orthogonal"``
and ``"qmc"``), ``n`` must be even and rows ``2k`` and ``2k + 1`` are the pair of direction
``k``: (δ_k, −δ_k), or for GCMC (δ_k, δ'_k) with δ'_k pointing along −δ_k with the coupled
length. Every row is marginally N(0, I_d), so :func:`rllib_ext.common.blackbox.es_gradient.es_gradient`
applies to any batch, and on the antithetic layout it equals the pairwise form
(1/(2σN)) Σ (F⁺ − F⁻) ε.

**Cost of regenerating one row** (``perturbation``): ``gaussian``, ``antithetic`` and ``gcmc``
draw only direction ``i // 2`` (or ``i``): O(d). ``orthogonal`` rebuilds the block of up to d
directions containing row ``i`` (Gaussian draws and a QR factorization, O(d·m²) for a block of m
directions); ``qmc`` adds a per-batch shift to a cached Halton point, O(d) after the Halton points
were generated once per sampler. Both cache their last few blocks, so a worker evaluating several
rows of the same batch pays for the block once.

Seeds: a batch seed is a non-negative integer; direction or block ``k`` of batch ``seed`` uses
``numpy.random.default_rng([seed, k])``. Results are equal bit for bit within one process; across
processes with different BLAS builds the orthogonal sampler's QR may differ in the last bits.
"""

from __future__ import annotations

import abc
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from rllib_ext.common.names import lookup

__all__ = [
    "AntitheticSampler",
    "GCMCSampler",
    "GaussianSampler",
    "OrthogonalSampler",
    "PerturbationSampler",
    "QMCSampler",
    "SAMPLERS",
    "get_sampler",
    "make_sampler",
]


class PerturbationSampler(abc.ABC):
    """Base class: a batch of ``n`` perturbations ε ~ N(0, I_d), reproducible from a seed.

    Subclasses define :meth:`_directions`, how directions are drawn: one at a time from
    ``default_rng([seed, k])`` (:class:`GaussianSampler` and its subclasses) or in blocks kept
    in a small cache (:meth:`_cached_block`; orthogonal, QMC); and :meth:`_mirror`, the
    antithetic partner of a direction.

    Args:
        dim: d, the number of parameters perturbed.
        antithetic: Whether rows come in pairs (2k, 2k + 1) of direction k; None takes the
            sampler's default (:attr:`default_antithetic`).

    Attributes:
        name: The registry name.
        dim: d.
        antithetic: Whether batches are made of antithetic pairs.
    """

    name: ClassVar[str]
    default_antithetic: ClassVar[bool] = False
    allowed_antithetic: ClassVar[tuple[bool, ...]] = (False, True)
    _cache_size: ClassVar[int] = 2

    def __init__(self, dim: int, *, antithetic: bool | None = None):
        if isinstance(dim, bool) or int(dim) != dim or dim < 1:
            raise ValueError(f"{type(self).__name__}: dim must be a positive integer, got {dim!r}")
        antithetic = self.default_antithetic if antithetic is None else bool(antithetic)
        if antithetic not in self.allowed_antithetic:
            raise ValueError(
                f"Sampler {self.name!r} requires antithetic={self.allowed_antithetic[0]}, got {antithetic}"
            )
        self.dim = int(dim)
        self.antithetic = antithetic
        self._blocks: OrderedDict[tuple[int, ...], np.ndarray] = OrderedDict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, antithetic={self.antithetic})"

    # -- public API ------------------------------------------------------------------------------

    def num_directions(self, n: int) -> int:
        """Number of directions δ_k drawn for a batch of ``n`` rows (n/2 with antithetic pairs)."""
        self._check_n(n)
        return n // 2 if self.antithetic else n

    def sample(self, seed: int, n: int) -> np.ndarray:
        """Returns the batch of ``n`` perturbations of batch ``seed``.

        Args:
            seed: The batch seed, a non-negative integer.
            n: Number of rows (even with antithetic pairs).

        Returns:
            float32 array [n, dim]; row i equals ``perturbation(seed, n, i)``.
        """
        self._check_seed(seed)
        n_dirs = self.num_directions(n)
        directions = self._directions(seed, n_dirs, np.arange(n_dirs))
        return self._rows(directions).astype(np.float32)

    def perturbation(self, seed: int, n: int, i: int) -> np.ndarray:
        """Regenerates row ``i`` of ``sample(seed, n)`` (see the module docstring for its cost).

        Args:
            seed: The batch seed.
            n: The batch's number of rows (block samplers need it; the others ignore it).
            i: Row index, 0 <= i < n.

        Returns:
            float32 array [dim].
        """
        self._check_seed(seed)
        n_dirs = self.num_directions(n)
        if isinstance(i, bool) or int(i) != i or not 0 <= i < n:
            raise ValueError(f"perturbation index i must be in [0, {n}), got {i!r}")
        k = i // 2 if self.antithetic else i
        directions = self._directions(seed, n_dirs, np.array([k]))
        row: np.ndarray = self._rows(directions)[i % 2 if self.antithetic else 0]
        return row.astype(np.float32)

    # -- subclass hooks --------------------------------------------------------------------------

    @abc.abstractmethod
    def _directions(self, seed: int, n_dirs: int, ks: np.ndarray) -> np.ndarray:
        """Directions δ_k for ``ks`` of a batch of ``n_dirs`` directions, float64 [len(ks), d]."""

    def _mirror(self, directions: np.ndarray) -> np.ndarray:
        """The antithetic partner of each direction: −δ (Salimans et al. 2017)."""
        return -directions

    def _cached_block(self, key: tuple[int, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
        """Returns ``build()`` for ``key``, keeping the last few blocks."""
        if key in self._blocks:
            self._blocks.move_to_end(key)
            return self._blocks[key]
        block = build()
        self._blocks[key] = block
        while len(self._blocks) > self._cache_size:
            self._blocks.popitem(last=False)
        return block

    # -- helpers ---------------------------------------------------------------------------------

    def _rows(self, directions: np.ndarray) -> np.ndarray:
        """Lays directions out as rows: δ_k, or interleaved pairs (δ_k, δ'_k)."""
        if not self.antithetic:
            return directions
        rows = np.empty((2 * len(directions), self.dim), dtype=directions.dtype)
        rows[0::2] = directions
        rows[1::2] = self._mirror(directions)
        return rows

    def _check_n(self, n: int) -> None:
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"number of perturbations n must be a positive integer, got {n!r}")
        if self.antithetic and n % 2:
            raise ValueError(f"Sampler {self.name!r} with antithetic pairs needs an even n, got {n}")

    @staticmethod
    def _check_seed(seed: int) -> None:
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"batch seed must be a non-negative integer, got {seed!r}")


class GaussianSampler(PerturbationSampler):
    """i.i.d. ε ~ N(0, I_d) (paper 000 Eq. 7); no pairs unless ``antithetic=True``.

    Direction k of batch ``seed`` is drawn from ``default_rng([seed, k])`` on its own, so one row
    costs O(d) to regenerate.
    """

    name = "gaussian"

    def _directions(self, seed: int, n_dirs: int, ks: np.ndarray) -> np.ndarray:
        return np.stack([np.random.default_rng([seed, int(k)]).standard_normal(self.dim) for k in ks])


class AntitheticSampler(GaussianSampler):
    """Antithetic pairs (ε, −ε) of i.i.d. Gaussian directions (Salimans et al. 2017; paper 002 §4)."""

    name = "antithetic"
    default_antithetic = True
    allowed_antithetic = (True,)


class GCMCSampler(GaussianSampler):
    """Geometrically coupled pairs (Rowland et al. 2018; paper 002 §4, "GCMC").

    Pair k is (δ_k, δ'_k): δ_k ~ N(0, I_d), and δ'_k points along −δ_k with the length r' that
    solves F_R(‖δ_k‖) + F_R(r') = 1, F_R the CDF of the norm of a d-dimensional standard Gaussian
    (the chi distribution with d degrees of freedom, ``scipy.stats.chi``). As 1 − F_R(‖δ_k‖) is
    uniform, r' is chi-distributed too, so δ'_k is marginally N(0, I_d). Directions of different
    pairs are independent, as paper 002 describes the method.
    """

    name = "gcmc"
    default_antithetic = True
    allowed_antithetic = (True,)

    def _mirror(self, directions: np.ndarray) -> np.ndarray:
        r = np.array([np.linalg.norm(delta) for delta in directions])
        # F_R(r) + F_R(r') = 1  <=>  r' = F_R^{-1}(1 − F_R(r)) = isf(F_R(r)), precise in both tails.
        from scipy import stats  # lazy: scipy.stats costs ~1 s of every worker's import

        r_coupled: np.ndarray = stats.chi.isf(stats.chi.cdf(r, self.dim), self.dim)
        mirrored: np.ndarray = -directions * (r_coupled / r)[:, None]
        return mirrored


class OrthogonalSampler(PerturbationSampler):
    """Orthogonal directions with chi-distributed lengths (Choromanski et al. 2018; paper 002 §4).

    Directions are drawn in blocks of m = min(d, remaining) directions: block b (directions
    b·d ... b·d + m − 1) takes an m×d Gaussian matrix from ``default_rng([seed, b])``,
    orthonormalizes its rows (QR with the signs fixed, i.e. Gram–Schmidt, so each row is uniform
    on the sphere), and gives each row an independent length ~ chi(d), the length of a
    d-dimensional Gaussian. Rows are marginally N(0, I_d) and exactly orthogonal within a block;
    blocks are independent (N > d needs several).

    Regenerating one direction rebuilds its block: m·d Gaussian draws and an O(d·m²) QR, cached
    (about 17 ms for d = 5318, m = 20 on this machine; later rows of the same batch are free).
    """

    name = "orthogonal"

    def _directions(self, seed: int, n_dirs: int, ks: np.ndarray) -> np.ndarray:
        blocks = {int(b): self._block(seed, n_dirs, int(b)) for b in np.unique(ks // self.dim)}
        return np.stack([blocks[int(k) // self.dim][int(k) % self.dim] for k in ks])

    def _block(self, seed: int, n_dirs: int, b: int) -> np.ndarray:
        m = min(self.dim, n_dirs - b * self.dim)

        def build() -> np.ndarray:
            rng = np.random.default_rng([seed, b])
            gaussian = rng.standard_normal((m, self.dim))
            q, r = np.linalg.qr(gaussian.T)  # q: [d, m], orthonormal columns
            signs = np.sign(np.diag(r))
            q = q * np.where(signs == 0.0, 1.0, signs)  # Gram–Schmidt's signs: Haar-distributed
            from scipy import stats

            lengths: np.ndarray = stats.chi.rvs(self.dim, size=m, random_state=rng)
            block: np.ndarray = q.T * lengths[:, None]
            return block

        return self._cached_block((seed, n_dirs, b), build)


class QMCSampler(PerturbationSampler):
    """Randomized quasi Monte Carlo: Halton points through the inverse normal CDF (paper 002 §4).

    Paper 002 takes the N points r_k of a low-discrepancy Halton sequence in [0, 1]^d and sets
    ε_k = Φ^{-1}(r_k). To give every batch fresh, unbiased noise, this sampler randomizes the
    points per batch with a Cranley–Patterson rotation: r_k = (h_k + s) mod 1 with h_k the k-th
    point of one scrambled Halton sequence (``scipy.stats.qmc.Halton``, scrambled with
    ``scramble_seed``; scrambling is needed in high dimension, where the unscrambled points of a
    large prime base barely move over the first N indices) and s ~ U[0, 1)^d drawn from the batch
    seed. Each ε_k is then exactly N(0, I_d) marginally, while a batch keeps the Halton set's low
    discrepancy.

    Cost: the scrambled Halton sequence is built once per sampler, on first use; scipy's
    construction grows with the sum of the first d primes (about 0.3 s at d = 1000, 4 s at
    d = 3000, 16 s at d = 6000 on this machine; so build the sampler once per worker, not per
    job). After that a batch costs O(n·d) and a single row O(d) (under a millisecond at d = 5318).

    Args:
        dim: d.
        antithetic: Pairs (ε_k, −ε_k) of each QMC point (paper 002 combines QMC with them).
        scramble_seed: Seed of the Halton scrambling; driver and workers must use the same.
    """

    name = "qmc"

    def __init__(self, dim: int, *, antithetic: bool | None = None, scramble_seed: int = 0):
        super().__init__(dim, antithetic=antithetic)
        self.scramble_seed = int(scramble_seed)
        self._halton: Any = None  # scipy.stats.qmc.Halton (scipy ships no types), built on first use
        self._points = np.empty((0, self.dim))

    def _halton_points(self, n_dirs: int) -> np.ndarray:
        """The first ``n_dirs`` points h_k of the scrambled Halton sequence (cached, grown)."""
        if len(self._points) < n_dirs:
            if self._halton is None:
                from scipy.stats import qmc

                try:
                    self._halton = qmc.Halton(self.dim, scramble=True, rng=self.scramble_seed)
                except TypeError:  # scipy < 1.15 calls it seed
                    self._halton = qmc.Halton(self.dim, scramble=True, seed=self.scramble_seed)
            self._halton.reset()
            self._points = self._halton.random(n_dirs)
        return self._points[:n_dirs]

    def _directions(self, seed: int, n_dirs: int, ks: np.ndarray) -> np.ndarray:
        shift = self._cached_block((seed,), lambda: np.random.default_rng([seed, 0]).random(self.dim))
        r = np.mod(self._halton_points(n_dirs)[ks] + shift, 1.0)  # Cranley–Patterson rotation
        from scipy import special

        tiny = 2.0**-53  # keep Φ^{-1} finite: r in [2^-53, 1 - 2^-53] bounds |ε| by 8.3
        eps: np.ndarray = special.ndtri(np.clip(r, tiny, 1.0 - tiny))  # ε_k = Φ^{-1}(r_k), paper 002 §4
        return eps


# The registry: name -> class.
SAMPLERS: dict[str, type[PerturbationSampler]] = {
    cls.name: cls for cls in (GaussianSampler, AntitheticSampler, OrthogonalSampler, GCMCSampler, QMCSampler)
}


def get_sampler(name: str) -> type[PerturbationSampler]:
    """Returns the sampler class registered under ``name`` (case-insensitive).

    Raises:
        ValueError: ``name`` is not one of :data:`SAMPLERS`.
    """
    return lookup(SAMPLERS, name, "perturbation sampler")


def make_sampler(name: str, dim: int, **kwargs: Any) -> PerturbationSampler:
    """Builds the sampler ``name`` for ``dim`` parameters.

    Args:
        name: One of ``"gaussian"``, ``"antithetic"``, ``"orthogonal"``, ``"gcmc"``, ``"qmc"``.
        dim: d, the number of parameters perturbed.
        **kwargs: ``antithetic`` (None: the sampler's default) and sampler-specific arguments
            (``scramble_seed`` for ``"qmc"``).

    Raises:
        ValueError: Unknown name, bad ``dim`` or an ``antithetic`` the sampler cannot do.
    """
    return get_sampler(name)(dim, **kwargs)
