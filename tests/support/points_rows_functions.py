"""Functions of tests/adversarial/test_points_rows.py (issue 20, item 6): each
puts NaN and inf in its derivatives at some points (square roots and logarithms at
0 and below, quotients by 0, ``where`` over a singular branch, products through
zeros, overflow at 1e308), where the rows of ``<op>_points`` once differed from the
one-point operator.

``MODULES`` lists, per function, its input shape, contexts and operators.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def energy(x: Any) -> Any:
    """Square roots, logarithms, a reversed product and a quotient: NaN and inf in
    every derivative at 0, below 0 and at the infinities."""
    return np.sum(np.sqrt(x) + np.log(x) * x[::-1]) + x[0] / x[1]


def masked(x: Any) -> Any:
    """``where`` over ``log`` (taken only above 1), a norm and a product: the
    product's derivative through a zero, the norm's at the origin."""
    return np.sum(np.where(x > 1, np.log(x), x**2)) + np.sqrt(np.sum(x**2)) + np.prod(x)


def field(x: Any) -> Any:
    """A vector of singular components, with ``abs`` and ``maximum`` kinks."""
    return np.array(
        [
            np.sqrt(x[0]) * np.log(x[1]),
            x[0] / x[2],
            np.where(x[1] > 0, np.sqrt(x[1]), x[2] ** 2),
            np.abs(x[0] - x[1]) + np.maximum(x[1], x[2]),
        ]
    )


def matrix(x: Any) -> Any:
    """A 2-D input and output: a product with an elementwise square root,
    scaled by the reciprocal of the sum."""
    return x @ np.sqrt(x) / np.sum(x)


def swept(x: Any, p: Any, c: Any) -> Any:
    """A per-point parameter ``p`` and a shared scalar ``c``: a logarithm over a
    quotient that is singular where ``c + x`` is 0, and a ``tanh``."""
    return np.sum(p * np.log(x) / (c + x)) + np.tanh(x[0] * p[0]) * np.exp(x[2])


def scalar_in(x: Any) -> Any:
    """A scalar input: ``sqrt(x) log(x) / x`` and a ``where`` between a power and
    an exponential."""
    return np.sqrt(x) * np.log(x) / x + np.where(x > 0, x**1.5, np.exp(x))


SCALAR_OUT = [
    "gradient",
    "value_and_gradient",
    "hessian",
    "hvp",
    "value_gradient_and_hessian",
]
VECTOR_OUT = [
    "jacobian",
    "value_and_jacobian",
    "pushforward",
    "pullback",
    "value_and_pushforward",
]
SCALAR_IN = [
    "derivative",
    "second_derivative",
    "value_derivative_and_second_derivative",
]

MODULES: dict[str, dict[str, Any]] = {
    "energy": {"shape": [4], "operators": SCALAR_OUT},
    "masked": {"shape": [4], "operators": SCALAR_OUT},
    "field": {"shape": [3], "operators": VECTOR_OUT},
    "matrix": {"shape": [2, 2], "operators": ["jacobian", "pullback"]},
    "swept": {
        "shape": [3],
        "operators": ["gradient", "hessian", "hvp"],
        "contexts": [("p", [3], True), ("c", [], False)],
    },
    "scalar_in": {
        "shape": [],
        "operators": SCALAR_IN,
    },
}
