"""Functions indexing with int64 contexts at run time (``x[idx]``): the C loops'
gathers and scatter-adds (tests/targets/c/test_c_int_indices.py). Polynomials,
so that the C and the NumPy fallback compute the same roundings (a C library's
``tanh`` and NumPy's SIMD one may differ in the last bit)."""

import numpy as np


def gather_sq(x, idx):
    """A sum over gathered elements: repeated indices count once per repeat."""
    return np.sum(x[idx] ** 2 * x[idx]) + 0.5 * np.sum(x * x)


def columns(x, idx):
    """A vector of gathered columns: a jacobian through a gather along axis 1."""
    g = x[:, idx]
    return np.sum(g * g - 3.0 * g, axis=0)


def label(x, y):
    """One element chosen by a scalar int label, differentiated."""
    return x[y] ** 3 * np.sum(x**2)


def shifted(x, idx):
    """An index computed from the context (int64 arithmetic): vector code."""
    return np.sum(x[idx + 1] ** 2)
