"""Functions for tests/frontend/test_numpy_namespace.py: ufuncs of lists of traced
scalars, and copies of a module's constant array that traced values are stored
into."""

from __future__ import annotations

import numpy as np
from numpy import cos

BOUND = np.linspace(0.0, 1.0, 16).reshape(4, 4)


def ufunc_of_a_list(x):
    return np.sin([x[0], x[1] * x[2]]).sum() + np.exp((x[2], x[3])).prod()


def imported_ufunc_of_a_list(x):
    return cos([x[0] * x[3], x[1]]) @ np.array([1.0, 2.0])


def binary_ufunc_of_lists(x):
    return np.arctan2([x[0], x[1]], [x[2], 1.5]).sum()


def ufunc_method_of_a_list(x):
    return np.add.reduce([x[0] * x[1], x[2], x[3] ** 2]) + np.maximum.reduce(x)


def copy_of_a_constant(x):
    U = np.copy(BOUND)
    U[1:-1, 1:-1] = x.reshape(2, 2) ** 2
    return (U * BOUND[::-1]).sum()


def array_of_a_constant(x):
    U = np.array(BOUND)
    U[0, 0] = x[0] * x[1]
    U[3] = x
    return np.sin(U).sum()
