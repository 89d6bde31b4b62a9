"""Functions whose sparse hessians are compiled as their lower or upper triangle
(tests/targets/c/test_c_triangle.py)."""

from __future__ import annotations

from typing import Any

import numpy as np


def chained(x: Any, a: Any) -> Any:
    """A banded hessian with one far corner (x[0] * x[-1]**3)."""
    return a * np.sum(x[:-1] ** 2 * x[1:]) + np.sum(np.sin(x)) + x[0] * x[-1] ** 3


def tiny(x: Any) -> Any:
    """Small enough for straight-line C without a triangle."""
    return x[0] ** 2 * x[1] + np.exp(x[1] * x[2])
