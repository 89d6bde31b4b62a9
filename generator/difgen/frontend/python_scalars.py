"""Python's ``math`` module and the builtins ``min``/``max`` on traced scalars.

``math.exp(x)`` converts ``x`` to a Python float, which a traced value cannot be
(its value is not known at build time), and ``max(a, b)`` branches on ``b > a``.
While tracing, the user's modules see :data:`TRACING_MATH` in place of ``math`` and
:func:`traced_max`/:func:`traced_min` in place of the builtins (see
:mod:`difgen.frontend.namespace`); both delegate to Python's own for values that are
not traced, so constants are computed exactly as Python computes them.

A traced ``math.f(x)`` is NumPy's ``f`` of ``x`` taken as a 0-d array (``x`` must hold
one number, as ``math`` requires). Where Python's ``math`` raises (``math.log(-1.0)``,
``math.sqrt(-1.0)``: ValueError; ``math.exp(1000.0)``: OverflowError), the generated
code returns NumPy's NaN or inf instead: the user's function has no value at such a
point, so there is no value to differ from, and a run-time check would cost every
call. ``math`` functions without a difgen primitive (``erf``, ``gamma``...), those
whose value is a bool or an int used to branch (``isnan``, ``isclose``...) and
``fsum`` (exact summation) are refused, naming the user's line.
"""

from __future__ import annotations

import builtins
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.location import user_location
from difgen.core.tracer import Tracer, bind_name, contains_tracer, xp
from difgen.errors import TraceError
from difgen.frontend import selection_api


def _log(x: Any, base: Any = None) -> Any:
    """``math.log(x[, base])``: Python computes ``log(x) / log(base)``."""
    if base is None:
        return xp.log(x)
    return xp.log(x) / xp.log(base)


def _prod(values: Any, *, start: Any = 1) -> Any:
    """``math.prod``: ``start * v0 * v1 ...``, left to right as Python multiplies."""
    result = start
    for value in values:
        result = result * value
    return result


TRACED: dict[str, Callable[..., Any]] = {
    "exp": xp.exp,
    "expm1": xp.expm1,
    "exp2": xp.exp2,
    "log": _log,
    "log1p": xp.log1p,
    "log2": xp.log2,
    "log10": xp.log10,
    "sqrt": xp.sqrt,
    "cbrt": xp.cbrt,
    "sin": xp.sin,
    "cos": xp.cos,
    "tan": xp.tan,
    "asin": xp.arcsin,
    "acos": xp.arccos,
    "atan": xp.arctan,
    "atan2": xp.arctan2,
    "sinh": xp.sinh,
    "cosh": xp.cosh,
    "tanh": xp.tanh,
    "asinh": xp.arcsinh,
    "acosh": xp.arccosh,
    "atanh": xp.arctanh,
    "hypot": xp.hypot,
    "fabs": xp.fabs,
    "pow": xp.power,
    "fmod": xp.fmod,
    "floor": xp.floor,
    "ceil": xp.ceil,
    "trunc": xp.trunc,
    "degrees": xp.degrees,
    "radians": xp.radians,
}
"""``math`` functions on traced scalars, by name: the NumPy function of the same
values (``floor``/``ceil``/``trunc`` return a float where Python returns an int of
the same value)."""

TAKES_ITERABLE = {"prod": _prod}
"""``math`` functions of an iterable, written on traced values."""


def _scalar(name: str, value: Any) -> Any:
    """A traced argument of ``math.name`` as a 0-d traced array (one number)."""
    if not isinstance(value, Tracer):
        return value
    if value.size != 1:
        raise TraceError(
            f"{user_location()}: math.{name} of a traced array of shape "
            f"{value.shape}: Python's math takes one number (it raises TypeError); "
            f"use np.{name} for arrays"
        )
    return xp.reshape(value, ()) if value.shape else value


def _traced(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    """``math.name``: Python's own on plain numbers, NumPy's on traced ones."""
    numpy_version = TRACED[name]

    def function(*args: Any) -> Any:
        if not any(isinstance(a, Tracer) for a in args):
            return real(*args)
        return numpy_version(*(_scalar(name, a) for a in args))

    function.__name__ = name
    function.__doc__ = f"math.{name} on traced scalars (NumPy's np.{name} values)."
    return function


def _over_iterable(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def function(values: Any, **kwargs: Any) -> Any:
        values = list(values)
        if not contains_tracer(values) and not contains_tracer(list(kwargs.values())):
            return real(values, **kwargs)
        return TAKES_ITERABLE[name](
            [_scalar(name, v) for v in values],
            **{k: _scalar(name, v) for k, v in kwargs.items()},
        )

    function.__name__ = name
    return function


def _refused(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    """``math.name`` without a traced version: fine on constants, refused on tracers."""

    def function(*args: Any, **kwargs: Any) -> Any:
        if not contains_tracer(list(args) + list(kwargs.values())):
            return real(*args, **kwargs)
        raise TraceError(
            f"{user_location()}: math.{name} of a traced value is not supported by "
            f"difgen's tracer (traced: {', '.join(sorted(TRACED))}, prod)"
        )

    function.__name__ = name
    return function


class TracingMath(types.ModuleType):
    """``math`` whose functions accept traced scalars; constants are Python's."""

    def __init__(self) -> None:
        super().__init__("math")
        for name in dir(math):
            value = getattr(math, name)
            if name.startswith("_"):
                continue
            if not callable(value):
                setattr(self, name, value)
            elif name in TRACED:
                setattr(self, name, _traced(name, value))
            elif name in TAKES_ITERABLE:
                setattr(self, name, _over_iterable(name, value))
            else:
                setattr(self, name, _refused(name, value))


TRACING_MATH = TracingMath()
MATH_REPLACEMENTS = {
    id(getattr(math, name)): getattr(TRACING_MATH, name)
    for name in dir(math)
    if not name.startswith("_") and callable(getattr(math, name))
}
"""``from math import exp``-style names: the real function's id -> the tracing one."""


# ------------------------------------------------------------------ min, max
_NO_DEFAULT = object()


def _extremum(name: str, real: Callable[..., Any], prim: str) -> Callable[..., Any]:
    """Python's ``max``/``min`` on traced scalars, folded left over the arguments.

    ``max(a, b)`` is ``b if b > a else a``: the first of equal values (so
    ``max(-0.0, 0.0)`` is ``-0.0``) and NaN-order dependent (``max(nan, 1.0)`` is
    NaN, ``max(1.0, nan)`` is 1.0). That is NumPy's ``maximum(b, a)`` (which
    returns its second argument on ties and NaN if either is NaN) except where
    ``b`` is NaN: ``where(b >= -inf, maximum(b, a), a)``, written on primitives
    whose SymPy form (``Max``) nests without piecewise conditions."""

    def extremum(*args: Any, key: Any = None, default: Any = _NO_DEFAULT) -> Any:
        items = list(args[0]) if len(args) == 1 else list(args)
        if not contains_tracer(items):
            options: dict[str, Any] = {"key": key}
            if default is not _NO_DEFAULT:
                options["default"] = default
            return real(items, **options) if len(args) == 1 else real(*args, **options)
        if key is not None:
            raise TraceError(
                f"{user_location()}: {name}(..., key=...) of traced values is not "
                "supported: the key decides a branch; use np.where"
            )
        shapes = {tuple(np.shape(v)) for v in items}
        if len(shapes) > 1 or any(np.size(v) != 1 for v in items):
            raise TraceError(
                f"{user_location()}: {name}() of traced values of shapes "
                f"{sorted(shapes)}: Python's {name} compares single numbers and "
                f"returns one of its arguments; use np.{name}imum for arrays"
            )
        result = items[0]
        for item in items[1:]:
            result = selection_api.where(
                selection_api.not_nan(item), bind_name(prim, item, result), result
            )
        return result

    extremum.__name__ = name
    return extremum


traced_max = _extremum("max", builtins.max, "maximum")
traced_min = _extremum("min", builtins.min, "minimum")
BUILTINS = {"max": traced_max, "min": traced_min}
"""Builtins the user's modules see while tracing (when they do not define their own)."""
