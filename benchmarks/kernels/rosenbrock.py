"""The hand-written Rosenbrock kernels (``rosenbrock.c``) as Python functions.

``gradient(x)`` and ``hvp(x, v)`` take and return what the NumPy references
``problems.rosenbrock_gradient`` and ``rosenbrock_hvp`` do: a fresh float64 array
per call, as every timed tool returns. They are the kernels compiled as a
CPython extension (:func:`benchmarks.kernels.load_extension`): a ``ctypes``
call spends microseconds converting its arrays, which at n = 10^4 would be a
large part of the kernel's time and flatter every ratio against it. The
extension is compiled on the first call, not at import, so listing the cases
needs no C compiler.
"""

from __future__ import annotations

import types
from functools import cache

import numpy as np

from benchmarks.kernels import load_extension

LABEL = "hand C kernel"
"""The kernel's tool label in the benchmark report."""


@cache
def extension() -> types.ModuleType:
    return load_extension("rosenbrock", "rosenbrock_kernel")


def gradient(x: np.ndarray) -> np.ndarray:
    """The gradient of ``problems.rosenbrock`` at the float64 vector ``x``."""
    result: np.ndarray = extension().gradient(x)
    return result


def hvp(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The hessian of ``problems.rosenbrock`` at ``x`` times ``v``."""
    result: np.ndarray = extension().hvp(x, v)
    return result
