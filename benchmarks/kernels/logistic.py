"""The logistic NLL gradient by the one-pass C kernel ``logistic.c``.

The limit of issue 24's logistic target: X read once, a row at a time (its dot
with ``w``, the residual, the row added into the gradient), against difgen's C,
which computes a gemv and then a transposed gemv.
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

from benchmarks import kernels


@cache
def _kernel() -> ctypes._CFuncPtr:
    function = kernels.load("logistic").logistic_gradient
    function.argtypes = [
        kernels.DOUBLE_P,
        kernels.DOUBLE_P,
        kernels.DOUBLE_P,
        kernels.DOUBLE_P,
        ctypes.c_long,
        ctypes.c_long,
    ]
    function.restype = None
    return function


def gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``X.T @ (1 / (1 + exp(-(X @ w))) - y)``, compiled on first use."""
    n, d = X.shape
    if w.shape != (d,) or y.shape != (n,):
        raise ValueError(f"w {w.shape} and y {y.shape} do not fit X {X.shape}")
    out = np.empty(d)
    p = kernels.pointer
    _kernel()(p(w), p(X), p(y), p(out), n, d)
    return out
