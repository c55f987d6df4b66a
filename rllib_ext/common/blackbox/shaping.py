"""Return shaping for ES-style estimators: ``centered_rank``, ``standardize``, ``none``, by name.

ES replaces the raw returns F_i of a batch by shaped ones before the gradient estimate
(:func:`rllib_ext.common.blackbox.es_gradient.es_gradient`): Salimans et al. (2017) use centered ranks;
paper 000 (App. A.2) and paper 002 (App., "returns are normalized") standardize each batch.
Every function takes an array of any shape, shapes all of its elements jointly (e.g. the
[N, 2] returns of N antithetic pairs) and returns a float32 array of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rllib_ext.common.names import lookup

__all__ = ["SHAPINGS", "centered_rank", "get_shaping", "none", "shape_returns", "standardize"]


def centered_rank(returns: np.ndarray) -> np.ndarray:
    """Ranks mapped linearly onto [−0.5, 0.5] (Salimans et al. 2017).

    The lowest return gets −0.5, the highest +0.5; tied returns share their average rank
    (``scipy.stats.rankdata(method="average")``), so equal returns get equal weights and the
    result always sums to zero. A single return maps to 0.

    Args:
        returns: Returns of one batch, any shape.

    Returns:
        float32 array of the same shape.
    """
    x = np.asarray(returns, dtype=np.float64)
    if x.size <= 1:
        return np.zeros(x.shape, dtype=np.float32)
    from scipy import stats  # lazy: keeps scipy.stats out of every worker's import

    ranks: np.ndarray = stats.rankdata(x.ravel(), method="average") - 1.0  # 0 ... n − 1
    return (ranks / (x.size - 1) - 0.5).reshape(x.shape).astype(np.float32)


def standardize(returns: np.ndarray) -> np.ndarray:
    """(F − mean) / std over the batch (paper 000 App. A.2; paper 002 App.).

    A batch whose returns are all equal (std 0, or below 1e-8 of their scale) carries no
    gradient signal: it maps to zeros rather than dividing by zero.

    Args:
        returns: Returns of one batch, any shape.

    Returns:
        float32 array of the same shape, zero mean and unit (population) std unless constant.
    """
    x = np.asarray(returns, dtype=np.float64)
    if x.size == 0:
        return x.astype(np.float32)
    centered = x - x.mean()
    std = float(centered.std())
    if std <= 1e-8 * max(1.0, float(np.abs(x).max())):
        return np.zeros(x.shape, dtype=np.float32)
    shaped: np.ndarray = (centered / std).astype(np.float32)
    return shaped


def none(returns: np.ndarray) -> np.ndarray:
    """The raw returns, as float32 (no shaping)."""
    return np.array(returns, dtype=np.float32)


SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "centered_rank": centered_rank,
    "standardize": standardize,
    "none": none,
}


def get_shaping(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Returns the shaping function registered under ``name``.

    Raises:
        ValueError: ``name`` is not one of :data:`SHAPINGS`.
    """
    return lookup(SHAPINGS, name, "return shaping")


def shape_returns(returns: np.ndarray, name: str) -> np.ndarray:
    """Applies the shaping ``name`` (``"centered_rank"``, ``"standardize"`` or ``"none"``)."""
    return get_shaping(name)(returns)
