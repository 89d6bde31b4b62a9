"""NumPy's selection functions on tracers: ``where``, ``clip``, ``select``,
``nan_to_num``."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, lift
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend.arguments import _no_out


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        raise TraceError(f"{_where()}: one-argument np.where is not supported")
    return _bind("where", condition, x, y)


def clip(
    a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kw: Any
) -> Any:
    _no_out({"out": out, "dtype": kw.get("dtype"), "where": kw.get("where", True)})
    a_min = kw.get("min", a_min)
    a_max = kw.get("max", a_max)
    if a_min is not None:
        a = _bind("maximum", a, a_min)
    if a_max is not None:
        a = _bind("minimum", a, a_max)
    return a


def select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """``np.select``: the first true condition wins (nested ``where`` from the last,
    as NumPy copies the choices in reverse order), everything broadcast together."""
    if len(condlist) != len(choicelist) or not len(condlist):
        raise TraceError(
            f"{_where()}: np.select needs as many conditions as choices, at least one"
        )
    if not all(_is_bool(cond) for cond in condlist):
        raise TraceError(
            f"{_where()}: np.select conditions must be boolean arrays (NumPy "
            "raises TypeError)"
        )
    result = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        result = where(cond, choice, result)
    return result


def _is_bool(value: Any) -> bool:
    dtype = value.dtype if isinstance(value, Tracer) else np.asarray(value).dtype
    return bool(dtype == np.bool_)


def nan_to_num(
    x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
) -> Any:
    """``np.nan_to_num`` for float64: NaN, +inf and -inf replaced (by default
    0, the largest and the most negative float)."""
    big = np.finfo(np.float64).max
    posinf = big if posinf is None else float(posinf)
    neginf = -big if neginf is None else float(neginf)
    x = lift(x)
    # the three cases are disjoint: each condition reads x itself (so none is a
    # condition on a selection, which the SymPy backend handles poorly)
    finite = where(x == -np.inf, neginf, x)
    finite = where(x == np.inf, posinf, finite)
    return where(not_nan(x), finite, float(nan))


def not_nan(x: Any) -> Any:
    """Where ``x`` is not NaN, as ``x >= -inf``: NaN is the only float that
    compares false with -inf. (``x == x`` is the same test in NumPy, but SymPy,
    whose symbols are real numbers, folds it to True, and rewrites a negated
    comparison as its opposite, ``x < -inf``, false for NaN too.)"""
    return _bind("ge", x, -np.inf)
