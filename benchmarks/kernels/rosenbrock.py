"""The hand-written Rosenbrock kernels (``rosenbrock.c``) as NumPy functions.

``gradient(x)`` and ``hvp(x, v)`` take and return what the NumPy references
``problems.rosenbrock_gradient`` and ``rosenbrock_hvp`` do: a fresh float64 array
per call, as every timed tool returns. The library is compiled on the first call
(not at import, so listing the cases needs no C compiler).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np

from benchmarks.kernels import DOUBLE_P, load, pointer

LABEL = "hand C kernel"
"""The kernel's tool label in the benchmark report."""


@cache
def library() -> ctypes.CDLL:
    lib = load("rosenbrock")
    lib.rosenbrock_gradient.argtypes = [DOUBLE_P, DOUBLE_P, ctypes.c_ssize_t]
    lib.rosenbrock_gradient.restype = None
    lib.rosenbrock_hvp.argtypes = [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_ssize_t]
    lib.rosenbrock_hvp.restype = None
    return lib


def gradient(x: np.ndarray) -> np.ndarray:
    """The gradient of ``problems.rosenbrock`` at the float64 vector ``x``."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    g = np.empty_like(x)
    library().rosenbrock_gradient(pointer(x), pointer(g), x.size)
    return g


def hvp(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The hessian of ``problems.rosenbrock`` at ``x`` times ``v``."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    v = np.ascontiguousarray(v, dtype=np.float64)
    if v.shape != x.shape:
        raise ValueError(f"v has shape {v.shape}, x {x.shape}")
    out = np.empty_like(x)
    library().rosenbrock_hvp(pointer(x), pointer(v), pointer(out), x.size)
    return out
