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


def logaddexp_pair(x: Any) -> Any:
    """logaddexp's weights were e**(a - y): 500 ulps at (1000, 1000), where y's
    last bit is; and d2/da2 = p - p**2 was 0 at (40, 0), where it is 4e-18."""
    return np.logaddexp(x[0], x[1])


def logaddexp2_pair(x: Any) -> Any:
    """logaddexp2, the same weights with base 2."""
    return np.logaddexp2(x[0], x[1])


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


def _softmax(base: Any) -> Callable[[Any, Any], list[Any]]:
    def gradient(a: Any, b: Any) -> list[Any]:
        # 1 / (1 + base**(b - a)): exact where e**a, e**b and y would not be
        return [1 / (1 + mp.power(base, b - a)), 1 / (1 + mp.power(base, a - b))]

    return gradient


def _softmax_hessian(base: Any) -> Callable[[Any, Any], list[list[Any]]]:
    def hessian(a: Any, b: Any) -> list[list[Any]]:
        p, q = _softmax(base)(a, b)
        c = mp.log(base) * p * q
        return [[c, -c], [-c, c]]

    return hessian


EXACT: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "hypot_pair": (_hypot_gradient, _hypot_hessian),
    "arctan2_pair": (_arctan2_gradient, _arctan2_hessian),
    "logaddexp_pair": (_softmax(mp.e), _softmax_hessian(mp.e)),
    "logaddexp2_pair": (_softmax(2), _softmax_hessian(2)),
}
"""The exact gradient and hessian of each function, on mpmath numbers."""
