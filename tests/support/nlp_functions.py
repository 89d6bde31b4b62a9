"""A sample NLP of 80 variables and 81 constraints, in NumPy and for CasADi.

The chained Rosenbrock function with Lukšan and Vlček's trigonometric-exponential
constraints (Lukšan & Vlček 1999, "Sparse and partially separable test problems for
unconstrained and equality constrained optimization", problem 5.1: 78 equalities
chaining three neighbours), and three inequalities of our own: a bound on the
squared norm, one on the sum and one on the product of the two ends. Each
function is written once over a namespace of array operations (``ops``), NumPy's
or CasADi's, so that IPOPT sees the same model through difgen's adapter and
through CasADi's ``nlpsol``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

N = 80
M = 81
LOWER = np.concatenate([np.zeros(78), [-np.inf, -np.inf, -10.0]])
UPPER = np.concatenate([np.zeros(78), [200.0, 100.0, np.inf]])
"""cl <= g(x) <= cu: the 78 equalities, then the three inequalities."""
START = np.where(np.arange(N) % 2 == 0, -1.2, 1.0)
"""Rosenbrock's classic start, as the paper takes it."""


def objective_of(x: Any, ops: Any) -> Any:
    """sum(100 (x[i]^2 - x[i+1])^2 + (x[i] - 1)^2) over i < N - 1."""
    return ops.sum(100.0 * (x[:-1] ** 2 - x[1:]) ** 2 + (x[:-1] - 1.0) ** 2)


def constraints_of(x: Any, ops: Any) -> Any:
    """The 78 chained equalities, then ||x||^2, sum(x) and x[0] * x[-1]."""
    a, b, c = x[:-2], x[1:-1], x[2:]
    chained = (
        3.0 * b**3
        + 2.0 * c
        - 5.0
        + ops.sin(b - c) * ops.sin(b + c)
        + 4.0 * b
        - a * ops.exp(a - b)
        - 3.0
    )
    rest = [ops.sum(x**2), ops.sum(x), x[0] * x[N - 1]]
    return ops.concatenate([chained, *rest])


class _NumPy:
    """NumPy's operations (the traced namespace while difgen traces)."""

    @staticmethod
    def sum(a: Any) -> Any:
        return np.sum(a)

    @staticmethod
    def sin(a: Any) -> Any:
        return np.sin(a)

    @staticmethod
    def exp(a: Any) -> Any:
        return np.exp(a)

    @staticmethod
    def concatenate(parts: list[Any]) -> Any:
        return np.concatenate([np.reshape(p, (-1,)) for p in parts])


def objective(x: Any) -> Any:
    """The objective of the sample NLP."""
    return objective_of(x, _NumPy)


def constraints(x: Any) -> Any:
    """The 81 constraints of the sample NLP."""
    return constraints_of(x, _NumPy)
