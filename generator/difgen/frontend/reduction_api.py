"""NumPy's reductions on tracers: sums, means, variances, extrema, cumulative
sums and products, ``any``/``all``, ``average`` and ``trace``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, contains_tracer, lift
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend.arguments import _axes, _count, _no_out
from difgen.frontend.selection_api import _is_bool, where
from difgen.frontend.shape_api import broadcast_to, diagonal, ravel, reshape


def _keep(
    result: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> Any:
    if not keepdims:
        return result
    return reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _counts(a: Any) -> Any:
    """Booleans summed or multiplied count as 1 and 0: NumPy's int64 result, as the
    float64 of the same value (exact below 2**53), which is what difgen traces."""
    if isinstance(a, Tracer) and a.dtype == np.bool_:
        return _bind("where", a, 1.0, 0.0)
    return a


_COUNTING = frozenset({"reduce_sum", "reduce_prod"})  # the reductions that count


def _reducer(prim: str) -> Callable[..., Any]:
    def reduce(
        a: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        keepdims: bool = False,
        **kwargs: Any,
    ) -> Any:
        _no_out({"out": out, "dtype": dtype, **kwargs})
        if prim in _COUNTING:
            a = _counts(a)
        shape = np.shape(a)
        axes = _axes(axis, len(shape))
        if not axes:
            return a
        return _keep(_bind(prim, a, axes=axes), shape, axes, keepdims)

    return reduce


sum_ = _reducer("reduce_sum")


def mean(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    **kwargs: Any,
) -> Any:
    _no_out({"out": out, "dtype": dtype, **kwargs})
    shape = np.shape(a)
    axes = _axes(axis, len(shape))
    return sum_(a, axis=axes, keepdims=keepdims) / float(_count(shape, axes))


def var(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    **kwargs: Any,
) -> Any:
    ddof = _ddof(ddof, kwargs)
    _no_out({"out": out, "dtype": dtype, **kwargs})
    shape = np.shape(a)
    axes = _axes(axis, len(shape))
    d = a - mean(a, axis=axes, keepdims=True)
    return sum_(d * d, axis=axes, keepdims=keepdims) / float(_count(shape, axes) - ddof)


def std(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    **kwargs: Any,
) -> Any:
    ddof = _ddof(ddof, kwargs)
    _no_out({"out": out, "dtype": dtype, **kwargs})
    return np.sqrt(var(a, axis=axis, ddof=ddof, keepdims=keepdims))


def _ddof(ddof: Any, kwargs: dict[str, Any]) -> Any:
    """NumPy 2's ``correction=`` is ``ddof``; a precomputed ``mean=`` is refused
    (it would replace the mean the function computes)."""
    if kwargs.pop("mean", None) is not None:
        raise TraceError(f"{_where()}: mean= is not supported while tracing")
    correction = kwargs.pop("correction", None)
    return ddof if correction is None or correction is np._NoValue else correction


def _cumulative(prim: str) -> Callable[..., Any]:
    def accumulate(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        _no_out({"out": out, "dtype": dtype})
        a = _counts(a)
        if axis is None:
            a, axis = ravel(a), 0
        return _bind(prim, a, axis=int(axis) % np.ndim(a))

    return accumulate


def trace_(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw: Any) -> Any:
    """``np.trace``: the sum of the ``offset`` diagonal of the ``axis1``/``axis2``
    planes (``dtype=``/``out=`` refused as for every reduction)."""
    _no_out(kw)
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1)


def _flat(value: Any) -> Any:
    operand = _operand(value)
    return ravel(operand) if isinstance(operand, Tracer) else operand.ravel()


def average(
    a: Any,
    axis: Any = None,
    weights: Any = None,
    returned: bool = False,
    *,
    keepdims: bool = False,
) -> Any:
    """``np.average``: ``sum(a w) / sum(w)``, 1-D weights laid along ``axis`` as
    NumPy requires; ``returned`` adds the sum of the weights (the count without
    weights), broadcast to the average's shape."""
    a = lift(a)
    shape = tuple(np.shape(a))
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        scl: Any = float(_count(shape, _axes(axis, len(shape))))
    else:
        w = _operand(weights)
        if tuple(np.shape(w)) != shape:
            w = _weights_along(w, shape, axis)
        scl = sum_(w, axis=axis, keepdims=keepdims)
        if not isinstance(scl, Tracer) and np.any(np.asarray(scl) == 0.0):
            raise TraceError(
                f"{_where()}: np.average weights sum to zero (NumPy raises "
                "ZeroDivisionError)"
            )
        avg = sum_(a * w, axis=axis, keepdims=keepdims) / scl
    if not returned:
        return avg
    if np.shape(scl) != np.shape(avg) or not isinstance(scl, Tracer):
        scl = broadcast_to(lift(scl) * 1.0, np.shape(avg)) * 1.0
    return avg, scl


def _operand(value: Any) -> Any:
    """A traced operand as one traced array, a constant one as a float array."""
    return lift(value) if contains_tracer(value) else np.asarray(value, float)


def _weights_along(w: Any, shape: tuple[int, ...], axis: Any) -> Any:
    """1-D weights of an ``np.average`` along ``axis``, broadcast to the array."""
    if axis is None or np.ndim(w) != 1 or isinstance(axis, (tuple, list)):
        raise TraceError(
            f"{_where()}: np.average weights of shape {np.shape(w)} for an array "
            f"of shape {shape} need one axis= and 1-D weights (NumPy raises)"
        )
    ax = int(axis) % len(shape)
    if np.shape(w)[0] != shape[ax]:
        raise TraceError(
            f"{_where()}: np.average weights of length {np.shape(w)[0]} along an "
            f"axis of length {shape[ax]} (NumPy raises)"
        )
    new = tuple(-1 if i == ax else 1 for i in range(len(shape)))
    w = reshape(w, new) if isinstance(w, Tracer) else np.reshape(w, new)
    return (
        broadcast_to(w, shape) if isinstance(w, Tracer) else np.broadcast_to(w, shape)
    )


def _truth(a: Any) -> Any:
    """Nonzero (NaN counts as true, as in NumPy) as 1.0, else 0.0."""
    a = lift(a)
    condition = a if _is_bool(a) else a != 0.0
    return where(condition, 1.0, 0.0)


def any_(
    a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any
) -> Any:
    """``np.any``: a boolean, true where some element is nonzero."""
    _no_out({"out": out, **kw})
    return sum_(_truth(a), axis=axis, keepdims=keepdims) > 0.0


def all_(
    a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any
) -> Any:
    """``np.all``: a boolean, true where no element is zero."""
    _no_out({"out": out, **kw})
    return sum_(1.0 - _truth(a), axis=axis, keepdims=keepdims) == 0.0


def reduce_list(reducer: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``reducer``, first making one traced array of a (nested) list that
    holds traced arrays, as ``np.asarray`` of their values would."""

    def reduce(a: Any, *args: Any, **kwargs: Any) -> Any:
        return reducer(lift(a) if contains_tracer(a) else a, *args, **kwargs)

    reduce.__name__ = getattr(reducer, "__name__", "reduce")
    reduce.__doc__ = getattr(reducer, "__doc__", None)
    return reduce
