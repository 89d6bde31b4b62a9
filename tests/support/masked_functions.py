"""Functions that compute a singular value (sqrt(0), log(0), arcsin(1), 0**0.5) in
entries they then throw away (issue 20, item 1), each with the same function
written on the kept entries only in mpmath, the oracle of
tests/adversarial/test_masked_singularities.py.

Each NumPy function ``name`` has its oracle ``MP[name]``, which takes the input's
elements as mpmath numbers and returns the output's elements (a list).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath as mp
import numpy as np

D = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.5], [2.0, 1.5, 0.0]])
LOWER = np.tri(3, k=-1, dtype=bool)
KEEP = np.array([True, False, True, True])
A = np.array([[0.0, 1.0], [1.0, 0.5], [2.0, -1.0]])


def _distances(x: Any) -> Any:
    p = np.reshape(x, (3, 2))
    return np.sqrt(np.sum((p[:, None] - p[None, :]) ** 2, -1))


def dist_tril(x: Any) -> Any:
    """The issue's energy: the diagonal sqrt(0) is discarded by tril."""
    r = _distances(x)
    return np.sum(np.tril((r - D) ** 2, -1))


def dist_triu(x: Any) -> Any:
    r = _distances(x)
    return np.sum(np.triu((r - D) ** 2, 1))


def dist_where(x: Any) -> Any:
    """The same energy, discarded by where on a constant mask."""
    r = _distances(x)
    return np.sum(np.where(LOWER, (r - D) ** 2, 0.0))


def dist_rows(x: Any) -> Any:
    """A vector output (a jacobian): each point's distances to the earlier ones."""
    return np.sum(np.tril(_distances(x), -1), axis=1)


def dist_scaled(t: Any) -> Any:
    """A scalar input (derivative, second_derivative): the points A scaled by t."""
    p = t * A
    r = np.sqrt(np.sum((p[:, None] - p[None, :]) ** 2, -1))
    return np.sum(np.tril((r - D) ** 2, -1))


def log_masked(x: Any) -> Any:
    """A log barrier: log((x_i - x_j)^2) is log(0) = -inf on the discarded diagonal."""
    z = (x[:, None] - x[None, :]) ** 2
    return np.sum(np.tril(np.log(z), -1))


def arcsin_masked(x: Any) -> Any:
    """arcsin(2 x_i x_j / (x_i^2 + x_j^2)) is arcsin(1) on the discarded diagonal."""
    c = 2.0 * (x[:, None] * x[None, :]) / (x[:, None] ** 2 + x[None, :] ** 2)
    return np.sum(np.triu(np.arcsin(c), 1))


def pow_masked(x: Any) -> Any:
    """x**0.5 at x[1] = 0, discarded by where on a constant mask."""
    return np.sum(np.where(KEEP, x**0.5, 0.0))


def pow_sliced(x: Any) -> Any:
    """x**1.5 is smooth at 0 to first order only: x[0] = 0 is dropped by a slice."""
    return np.sum((x**1.5)[1:] * x[1:])


def where_runtime(x: Any) -> Any:
    """A run-time mask: sqrt of the negatives is NaN in the branch not taken."""
    return np.sum(np.where(x > 0, np.sqrt(x), 0.0))


def sin_log_masked(x: Any) -> Any:
    """A bounded rule between the singular one and the mask: cos(log(0)) is NaN."""
    z = (x[:, None] - x[None, :]) ** 2
    return np.sum(np.tril(np.sin(np.log(z)), -1))


def dist_times_mask(x: Any) -> Any:
    """The mask written as a product, as np.tril was: 0 * (0 * inf) in forward mode."""
    r = _distances(x)
    return np.sum((r - D) ** 2 * LOWER.astype(float))


def broadcast_quotient(x: Any) -> Any:
    """log(0) discarded, divided by a traced scalar read by every element: the
    scalar's cotangent sums over kept and discarded elements alike."""
    return np.sum(np.where(KEEP[:3], np.log(x) / x[2], 0.0))


# ------------------------------------------------------------------ oracles
def _mp_distance(x: list[Any], i: int, j: int) -> Any:
    return mp.sqrt((x[2 * i] - x[2 * j]) ** 2 + (x[2 * i + 1] - x[2 * j + 1]) ** 2)


def _lower_pairs() -> list[tuple[int, int]]:
    return [(i, j) for i in range(3) for j in range(i)]


def _mp_energy(x: list[Any]) -> list[Any]:
    return [sum((_mp_distance(x, i, j) - D[i, j]) ** 2 for i, j in _lower_pairs())]


def _mp_rows(x: list[Any]) -> list[Any]:
    return [sum((_mp_distance(x, i, j) for j in range(i)), mp.mpf(0)) for i in range(3)]


def _mp_scaled(x: list[Any]) -> list[Any]:
    (t,) = x
    points = [t * mp.mpf(v) for v in A.ravel()]
    return _mp_energy(points)


def _mp_log(x: list[Any]) -> list[Any]:
    return [sum(mp.log((x[i] - x[j]) ** 2) for i, j in _lower_pairs())]


def _mp_arcsin(x: list[Any]) -> list[Any]:
    pairs = [(i, j) for i, j in _lower_pairs()]
    return [sum(mp.asin(2 * x[i] * x[j] / (x[i] ** 2 + x[j] ** 2)) for i, j in pairs)]


def _mp_pow_masked(x: list[Any]) -> list[Any]:
    return [sum(mp.sqrt(v) for v, keep in zip(x, KEEP) if keep)]


def _mp_pow_sliced(x: list[Any]) -> list[Any]:
    return [sum(v**2.5 for v in x[1:])]


def _mp_where_runtime(x: list[Any]) -> list[Any]:
    return [sum((mp.sqrt(v) if v > 0 else mp.mpf(0)) for v in x)]


def _mp_sin_log(x: list[Any]) -> list[Any]:
    return [sum(mp.sin(mp.log((x[i] - x[j]) ** 2)) for i, j in _lower_pairs())]


def _mp_broadcast_quotient(x: list[Any]) -> list[Any]:
    return [(mp.log(x[0]) + mp.log(x[2])) / x[2]]


MP: dict[str, Callable[[list[Any]], list[Any]]] = {
    "broadcast_quotient": _mp_broadcast_quotient,
    "sin_log_masked": _mp_sin_log,
    "dist_times_mask": _mp_energy,
    "dist_tril": _mp_energy,
    "dist_triu": _mp_energy,  # D is symmetric: the upper triangle is the lower one
    "dist_where": _mp_energy,
    "dist_rows": _mp_rows,
    "dist_scaled": _mp_scaled,
    "log_masked": _mp_log,
    "arcsin_masked": _mp_arcsin,
    "pow_masked": _mp_pow_masked,
    "pow_sliced": _mp_pow_sliced,
    "where_runtime": _mp_where_runtime,
}
