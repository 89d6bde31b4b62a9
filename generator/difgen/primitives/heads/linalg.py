"""The SymPy side of the matrix functions (:mod:`difgen.primitives.linalg`):
SymPy's matrix algorithms on each matrix of a static stack."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from difgen.primitives.linalg import _each_matrix


def _sym_solve(a: Any, b: Any) -> Any:
    """LU solve of each system of the (static) stack."""

    def one(a: Any, b: Any) -> Any:
        with sp.evaluate(True):  # SymPy's matrix algorithms need evaluation
            x = sp.Matrix(a).LUsolve(sp.Matrix(b))
        return np.array(x.tolist(), dtype=object).reshape(np.shape(b))

    if np.ndim(b) == 1:
        return one(a, b)
    return _each_matrix(one, a, b)


def _sym_matrix(fn: Any, scalar: bool) -> Any:
    """A SymPy matrix function of each matrix of the (static) stack."""

    def one(a: Any) -> Any:
        with sp.evaluate(True):  # SymPy's matrix algorithms need evaluation
            value = fn(sp.Matrix(a))
        if scalar:
            return np.asarray(value, dtype=object)
        return np.array(value.tolist(), dtype=object)

    return lambda a: _each_matrix(one, a)


solve = _sym_solve
inv = _sym_matrix(lambda m: m.inv(), scalar=False)
det = _sym_matrix(lambda m: m.det(), scalar=True)
logabsdet = _sym_matrix(lambda m: sp.log(sp.Abs(m.det())), scalar=True)
detsign = _sym_matrix(lambda m: sp.sign(m.det()), scalar=True)
cholesky = _sym_matrix(lambda m: m.cholesky(hermitian=False), scalar=False)
