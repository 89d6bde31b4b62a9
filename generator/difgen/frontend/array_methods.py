"""The ndarray methods of tracers: each is NumPy's function of the same name.

``x.sum(axis=0)`` is ``np.sum(x, axis=0)``, ``x.T`` is ``np.transpose(x)``: the
method calls the NumPy function, which reaches the frontend's handler through
``__array_function__`` (:mod:`difgen.frontend.numpy_api`), so a method supports
exactly what its function does and refuses the same way, naming the user's line.
Which methods forward so is declared with their entry points
(:class:`~difgen.frontend.numpy_api.Method`); the others are written here
(:data:`OWN`).
They are NumPy's API, so they live here, one layer above the core: importing the
frontend installs :data:`METHODS` on :class:`~difgen.core.tracer.Tracer` with
:func:`~difgen.core.tracer.use_array_methods`, as :func:`~difgen.core.dispatch.
use_numpy_dispatch` registers NumPy's dispatch (and as JAX's NumPy layer installs
its array methods on the core tracer). The tracer's own methods stay in its class:
operators, conversions, indexing, ``copy`` (a new array object) and ``astype``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from difgen.core.location import user_location
from difgen.core.tracer import Tracer, use_array_methods, xp
from difgen.errors import TraceError

# linalg_api and runtime add their entries to numpy_api's tables when imported
from difgen.frontend import linalg_api, numpy_api, runtime  # noqa: F401


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


def _clip(
    self: Tracer, min: Any = None, max: Any = None, out: Any = None, **kw: Any
) -> Any:
    return xp.clip(self, min, max, out=out, **kw)


def _conj(self: Tracer) -> Any:
    return xp.conjugate(self)


def _real(self: Tracer) -> Any:
    return xp.real(self)


def _imag(self: Tracer) -> Any:
    return xp.imag(self)


def _fill(self: Tracer, value: Any) -> None:
    """Every element set to ``value``, in place (through a view into its base)."""
    self.write(xp.broadcast_to(value, self.shape) * 1.0)


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


def forwarding(function: Any) -> Any:
    """The ndarray method that calls ``function`` (a NumPy function or ufunc) with
    the array first: NumPy's dispatch brings the call to the frontend's handler."""

    def method(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        return function(self, *args, **kwargs)

    functools.update_wrapper(method, function, ("__name__", "__qualname__"), ())
    method.__doc__ = f"``np.{function.__name__}(x, ...)``, as NumPy's method."
    return method


def forwarded(
    functions: Mapping[Any, Any], ufuncs: Mapping[str, Any]
) -> dict[str, Any]:
    """The ndarray methods that the entry points declare (a
    :class:`~difgen.frontend.numpy_api.Method` handler), by name: the NumPy
    function's own for ``functions``, the ufunc's (``np.<name>``) for ``ufuncs``."""
    methods = {
        function.__name__: forwarding(function)
        for function, handler in functions.items()
        if isinstance(handler, numpy_api.Method)
    }
    for name, handler in ufuncs.items():
        if isinstance(handler, numpy_api.Method):
            methods[name] = forwarding(getattr(np, name))
    return methods


OWN: dict[str, Any] = {
    "T": property(_T),
    "reshape": _reshape,
    "ravel": _ravel,
    "flatten": _flatten,
    "transpose": _transpose,
    "clip": _clip,
    "conj": _conj,
    "real": property(_real),
    "imag": property(_imag),
    "fill": _fill,
    "sort": _sort,
    "nonzero": _nonzero,
    "__round__": _round,
    "__floor__": _floor,
    "__ceil__": _ceil,
    "__trunc__": _trunc,
    "__getattr__": _no_such_method,
    # NumPy 2 arrays name their array-API namespace: NumPy itself, which
    # dispatches on tracers. Array-API code (SciPy's array_api_extra) asks it, and
    # takes an array without it for a read-only one.
    "__array_namespace__": lambda self, api_version=None: np,
}
"""The methods that are not their NumPy function with the array first: properties,
other parameters (``reshape(*shape)``, ``clip(min=, max=)``, C order only), in
place (``fill``, ``sort``), an alias (``conj``), a method whose function has no
entry point and so refuses as it does (``nonzero``), Python's protocols."""

FORWARDED = forwarded(numpy_api.FUNCTIONS, numpy_api.UFUNCS)
"""The methods the entry points declare, as installed."""
if FORWARDED.keys() & OWN.keys():  # a declaration would replace a written method
    raise ValueError(f"declared and written: {sorted(FORWARDED.keys() & OWN.keys())}")

METHODS: dict[str, Any] = {**FORWARDED, **OWN}

use_array_methods(METHODS)
