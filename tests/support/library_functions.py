"""Functions that call libraries written in NumPy (SciPy's array-API code), for
tests/frontend/test_libraries.py: the library's own code is traced, as the user's."""

from __future__ import annotations

import numpy as np
import scipy.optimize
import scipy.special

P = np.array([0.5, -1.0, 2.0, 0.25, -0.75])


def rosen(x):
    return scipy.optimize.rosen(x)


def rosen_der(x):
    return scipy.optimize.rosen_der(x)


def rosen_hess_prod(x):
    return scipy.optimize.rosen_hess_prod(x, P)


def rosen_hess(x):
    return scipy.optimize.rosen_hess(x)


def gauss_legendre(x):
    """A library computing constants inside the traced function (its compiled code
    needs NumPy arrays, which it keeps)."""
    nodes, weights = scipy.special.roots_legendre(5)
    return (np.sin(x[0] * nodes + x[1]) * weights).sum()
