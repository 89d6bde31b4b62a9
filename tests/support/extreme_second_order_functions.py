"""Functions of a pair (a, b) whose second derivatives overflowed, underflowed or
cancelled at extreme inputs (tests/adversarial/test_extreme_second_order.py), and
their exact derivatives for mpmath."""

from collections.abc import Callable
from typing import Any

import mpmath as mp
import numpy as np


def hypot_pair(x: Any) -> Any:
    """hypot's hessian was b**2 / h**3: inf or 0 from h = 6e102 on, and below."""
    return np.hypot(x[0], x[1])


def arctan2_pair(x: Any) -> Any:
    """atan2's derivative was b / (a*a + b*b): 0 where it is 5e-201 at 1e200."""
    return np.arctan2(x[0], x[1])


def _hypot_gradient(a: Any, b: Any) -> list[Any]:
    h = mp.hypot(a, b)
    return [a / h, b / h]


def _hypot_hessian(a: Any, b: Any) -> list[list[Any]]:
    h3 = mp.hypot(a, b) ** 3
    return [[b * b / h3, -a * b / h3], [-a * b / h3, a * a / h3]]


def _arctan2_gradient(a: Any, b: Any) -> list[Any]:
    r = a * a + b * b
    return [b / r, -a / r]


def _arctan2_hessian(a: Any, b: Any) -> list[list[Any]]:
    r2 = (a * a + b * b) ** 2
    mixed = (a * a - b * b) / r2
    return [[-2 * a * b / r2, mixed], [mixed, 2 * a * b / r2]]


EXACT: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "hypot_pair": (_hypot_gradient, _hypot_hessian),
    "arctan2_pair": (_arctan2_gradient, _arctan2_hessian),
}
"""The exact gradient and hessian of each function, on mpmath numbers."""

MP_FUNCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "hypot_pair": mp.hypot,
    "arctan2_pair": mp.atan2,
}
"""Each function on mpmath numbers (its third derivatives by mp.diff)."""
