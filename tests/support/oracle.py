"""Independent oracles: autograd on the same source, and central differences."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np


def under_autograd(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same function with its global ``np`` bound to ``autograd.numpy``."""
    import autograd.numpy as anp

    globals_ = dict(fn.__globals__)
    globals_["np"] = anp
    return types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__)


def jacobian(fn: Callable[..., Any], x: np.ndarray, *ctx: Any) -> np.ndarray:
    """dy/dx shaped y.shape + x.shape, by autograd."""
    import autograd

    g = under_autograd(fn)
    return np.asarray(autograd.jacobian(lambda z: g(z, *ctx))(np.asarray(x, float)))


def hessian(fn: Callable[..., Any], x: np.ndarray, *ctx: Any) -> np.ndarray:
    """d2y/dx2 shaped y.shape + x.shape + x.shape, by autograd."""
    import autograd

    g = under_autograd(fn)
    jac = autograd.jacobian(lambda z: g(z, *ctx))
    return np.asarray(autograd.jacobian(jac)(np.asarray(x, float)))


def central_jacobian(
    fn: Callable[..., Any], x: np.ndarray, *ctx: Any, h: float = 1e-6
) -> np.ndarray:
    """dy/dx by central differences (for code autograd cannot run)."""
    x = np.asarray(x, dtype=float)
    y0 = np.asarray(fn(x, *ctx))
    out = np.zeros(y0.shape + x.shape)
    for i in np.ndindex(*x.shape) if x.shape else [()]:
        e = np.zeros_like(x)
        e[i] = h
        d = (np.asarray(fn(x + e, *ctx)) - np.asarray(fn(x - e, *ctx))) / (2 * h)
        out[(..., *i)] = d
    return out
