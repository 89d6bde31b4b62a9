"""The ndarray methods of tracers: each is NumPy's function of the same name.

``x.sum(axis=0)`` is ``np.sum(x, axis=0)``, ``x.T`` is ``np.transpose(x)``: the
method calls the NumPy function, which reaches the frontend's handler through
``__array_function__`` (:mod:`difgen.frontend.numpy_api`), so a method supports
exactly what its function does and refuses the same way, naming the user's line.
They are NumPy's API, so they live here, one layer above the core: importing the
frontend installs :data:`METHODS` on :class:`~difgen.core.tracer.Tracer` with
:func:`~difgen.core.tracer.use_array_methods`, as :func:`~difgen.core.tracer.
use_numpy_dispatch` registers NumPy's dispatch (and as JAX's NumPy layer installs
its array methods on the core tracer). The tracer's own methods stay in its class:
operators, conversions, indexing, ``copy`` (a new array object) and ``astype``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.location import user_location
from difgen.core.tracer import Tracer, use_array_methods, xp
from difgen.errors import TraceError


def _T(self: Tracer) -> Any:
    return xp.transpose(self)


def _reshape(self: Tracer, *shape: Any, order: str = "C", copy: Any = None) -> Any:
    _c_order(order, "reshape")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return xp.reshape(self, shape)


def _ravel(self: Tracer, order: str = "C") -> Any:
    _c_order(order, "ravel")
    return xp.ravel(self)


def _flatten(self: Tracer, order: str = "C") -> Any:
    _c_order(order, "flatten")
    return xp.ravel(self).copy()  # NumPy's flatten copies; ravel is a view


def _transpose(self: Tracer, *axes: Any) -> Any:
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return xp.transpose(self, axes or None)


# Reductions and the rest take NumPy's keywords and pass them on, so that the
# function refuses (out=, where=, dtype=int...) what it cannot reproduce.
def _sum(
    self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.sum(self, axis=axis, dtype=dtype, out=out, **kw)


def _mean(
    self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.mean(self, axis=axis, dtype=dtype, out=out, **kw)


def _prod(
    self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.prod(self, axis=axis, dtype=dtype, out=out, **kw)


def _max(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.max(self, axis=axis, out=out, **kw)


def _min(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.min(self, axis=axis, out=out, **kw)


def _var(
    self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.var(self, axis=axis, dtype=dtype, out=out, **kw)


def _std(
    self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.std(self, axis=axis, dtype=dtype, out=out, **kw)


def _any(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.any(self, axis=axis, out=out, **kw)


def _all(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.all(self, axis=axis, out=out, **kw)


def _cumsum(self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    return xp.cumsum(self, axis=axis, dtype=dtype, out=out)


def _cumprod(self: Tracer, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    return xp.cumprod(self, axis=axis, dtype=dtype, out=out)


def _dot(self: Tracer, b: Any, out: Any = None) -> Any:
    return xp.dot(self, b, out=out)


def _clip(
    self: Tracer, min: Any = None, max: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.clip(self, min, max, out=out, **kw)


def _round_method(self: Tracer, decimals: int = 0, out: Any = None) -> Any:
    return xp.round(self, decimals, out=out)


def _take(
    self: Tracer, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
) -> Any:
    return xp.take(self, indices, axis=axis, out=out, mode=mode)


def _repeat(self: Tracer, repeats: Any, axis: Any = None) -> Any:
    return xp.repeat(self, repeats, axis=axis)


def _swapaxes(self: Tracer, axis1: int, axis2: int) -> Any:
    return xp.swapaxes(self, axis1, axis2)


def _squeeze(self: Tracer, axis: Any = None) -> Any:
    return xp.squeeze(self, axis=axis)


def _diagonal(self: Tracer, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    return xp.diagonal(self, offset, axis1, axis2)


def _trace(
    self: Tracer,
    offset: int = 0,
    axis1: int = 0,
    axis2: int = 1,
    dtype: Any = None,
    out: Any = None,
) -> Any:
    return xp.trace(self, offset, axis1, axis2, dtype=dtype, out=out)


def _conj(self: Tracer) -> Any:
    return xp.conjugate(self)


def _conjugate(self: Tracer) -> Any:
    return xp.conjugate(self)


def _real(self: Tracer) -> Any:
    return xp.real(self)


def _imag(self: Tracer) -> Any:
    return xp.imag(self)


def _fill(self: Tracer, value: Any) -> None:
    """Every element set to ``value``, in place (through a view into its base)."""
    self.write(xp.broadcast_to(value, self.shape) * 1.0)


# Permutations and indices: NumPy's function of the same name decides
# (frontend/runtime.py; refused, naming the line, where it is not supported).
def _argmax(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.argmax(self, axis=axis, out=out, **kw)


def _argmin(self: Tracer, axis: Any = None, out: Any = None, **kw: Any) -> Any:
    return xp.argmin(self, axis=axis, out=out, **kw)


def _argsort(self: Tracer, axis: Any = -1, **kw: Any) -> Any:
    return xp.argsort(self, axis=axis, **kw)


def _sort(self: Tracer, axis: Any = -1, **kw: Any) -> None:
    """In place, as ``ndarray.sort``."""
    self.write(xp.sort(self, axis=axis, **kw))


def _nonzero(self: Tracer) -> Any:
    return xp.nonzero(self)


def _round(self: Tracer, ndigits: Any = None) -> Any:
    """``round(x)``: NumPy's rounding (half to even, as Python's), traced as a
    float where Python returns an int of the same value."""
    return xp.round(self, 0 if ndigits is None else ndigits)


def _floor(self: Tracer) -> Any:
    return xp.floor(self)


def _ceil(self: Tracer) -> Any:
    return xp.ceil(self)


def _trunc(self: Tracer) -> Any:
    return xp.trunc(self)


def _c_order(order: str, method: str) -> None:
    """Only C order: another order would lay the elements out differently."""
    if order != "C":
        raise TraceError(
            f"{user_location()}: .{method}(order={order!r}) of a traced value is "
            "not supported (C order only)"
        )


def _no_such_method(self: Tracer, name: str) -> Any:
    """An attribute NumPy arrays do not have: ``x.cos()`` fails under NumPy
    (``AttributeError``), so it is refused while tracing too, saying what to write
    where NumPy has a function of that name. An ndarray attribute the tracer lacks
    (``x.nbytes``) is an AttributeError saying so, not NumPy's "no attribute"."""
    if hasattr(np.ndarray, name):  # an AttributeError: hasattr() probes it
        raise AttributeError(
            f"ndarray.{name} is not supported by difgen's tracer (at {user_location()})"
        )
    if not name.startswith("_") and callable(getattr(np, name, None)):
        raise TraceError(
            f"{user_location()}: NumPy arrays have no method {name}: use "
            f"np.{name}(x)"
        )
    raise AttributeError(f"'numpy.ndarray' object has no attribute {name!r}")


METHODS: dict[str, Any] = {
    "T": property(_T),
    "reshape": _reshape,
    "ravel": _ravel,
    "flatten": _flatten,
    "transpose": _transpose,
    "sum": _sum,
    "mean": _mean,
    "prod": _prod,
    "max": _max,
    "min": _min,
    "var": _var,
    "std": _std,
    "any": _any,
    "all": _all,
    "cumsum": _cumsum,
    "cumprod": _cumprod,
    "dot": _dot,
    "clip": _clip,
    "round": _round_method,
    "take": _take,
    "repeat": _repeat,
    "swapaxes": _swapaxes,
    "squeeze": _squeeze,
    "diagonal": _diagonal,
    "trace": _trace,
    "conj": _conj,
    "conjugate": _conjugate,
    "real": property(_real),
    "imag": property(_imag),
    "fill": _fill,
    "argmax": _argmax,
    "argmin": _argmin,
    "argsort": _argsort,
    "sort": _sort,
    "nonzero": _nonzero,
    "__round__": _round,
    "__floor__": _floor,
    "__ceil__": _ceil,
    "__trunc__": _trunc,
}
METHODS["__getattr__"] = _no_such_method
# NumPy 2 arrays name their array-API namespace: NumPy itself, which dispatches
# on tracers. Array-API code (SciPy's array_api_extra) asks it, and takes an
# array without it for a read-only one.
METHODS["__array_namespace__"] = lambda self, api_version=None: np

use_array_methods(METHODS)
