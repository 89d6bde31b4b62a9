"""NumPy's API on tracers: each supported function written with the core primitives.

Two tables: ``UFUNCS`` (NumPy's ufuncs by name, reached through
``__array_ufunc__``; SciPy's are keyed by the ufunc object in
:mod:`difgen.frontend.special_api`) and ``FUNCTIONS`` (by function object, reached
through ``__array_function__``). Anything not in them is an error that names the
function (as the user's module calls it) and the user's line. An entry whose
function is also an ndarray method taking the array first says so (:class:`Method`),
and :mod:`difgen.frontend.array_methods` installs that method.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from difgen.core.ir import FrozenArray
from difgen.core.location import user_location as _where
from difgen.core.tracer import (
    Tracer,
    constant,
    contains_tracer,
    lift,
    use_numpy_dispatch,
    view_of,
)
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend import special_api
from difgen.primitives.indexing import scatter_add


class Method:
    """An entry point whose NumPy function is also the ndarray method of the same
    name on the array (``x.sum(0, keepdims=True)`` is ``np.sum(x, 0,
    keepdims=True)``, every argument in the same place): declared with the entry,
    ``np.sum: Method(sum_)``, so :mod:`difgen.frontend.array_methods` installs the
    method and a function with an ndarray method is one declaration. Not for a
    method that differs from its function: in place (``sort``, ``fill``), other
    parameters (``reshape(*shape)``, ``clip(min=)``), or a property (``T``)."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)


# ------------------------------------------------------------------ helpers
def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(int(a) % ndim if ndim else 0 for a in axes))


def _keep(
    result: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> Any:
    if not keepdims:
        return result
    return reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _no_out(kwargs: dict[str, Any]) -> None:
    """Refuse the keywords that would change what the call computes: ``out=``,
    ``where=`` and a ``dtype=`` other than float64 (which NumPy would cast to)."""
    if kwargs.get("out") is not None:
        raise TraceError(f"{_where()}: out= is not supported while tracing")
    dtype = kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype) != np.float64:
        raise TraceError(
            f"{_where()}: dtype={np.dtype(dtype)} would compute in another type "
            "than float64 (NumPy casts, rounding toward zero for integers); "
            "difgen differentiates float64 values only"
        )
    if kwargs.get("where", True) is not True:
        raise TraceError(f"{_where()}: where= is not supported while tracing")
    if kwargs.get("initial", np._NoValue) not in (None, np._NoValue):
        raise TraceError(f"{_where()}: initial= is not supported while tracing")


# --------------------------------------------------------------- reductions
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


# -------------------------------------------------------------- structure
def reshape(a: Any, shape: Any = None, order: str = "C", newshape: Any = None) -> Any:
    shape = newshape if shape is None else shape
    shape = (
        (shape,)
        if isinstance(shape, (int, np.integer))
        else tuple(int(n) for n in shape)
    )
    size = int(np.prod(np.shape(a), dtype=np.int64))
    if -1 in shape:
        known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
        shape = tuple(size // known if n == -1 else n for n in shape)
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise TraceError(f"{_where()}: cannot reshape size {size} into {shape}")
    return view_of(a, _bind("reshape", a, shape=shape), lambda v: np.reshape(v, shape))


def ravel(a: Any, order: str = "C") -> Any:
    return reshape(a, (-1,))


def transpose(a: Any, axes: Any = None) -> Any:
    ndim = np.ndim(a)
    axes = (
        tuple(reversed(range(ndim)))
        if axes is None
        else tuple(int(x) % ndim for x in axes)
    )
    return view_of(a, _bind("transpose", a, axes=axes), lambda v: np.transpose(v, axes))


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    perm = list(range(np.ndim(a)))
    i, j = axis1 % len(perm), axis2 % len(perm)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    ndim = np.ndim(a)
    src = [s % ndim for s in np.atleast_1d(source)]
    dst = [d % ndim for d in np.atleast_1d(destination)]
    order = [n for n in range(ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def expand_dims(a: Any, axis: Any) -> Any:
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = np.ndim(a) + len(axes)
    axes = [x % ndim for x in axes]
    dims = iter(np.shape(a))
    return reshape(a, tuple(1 if i in axes else next(dims) for i in range(ndim)))


def squeeze(a: Any, axis: Any = None) -> Any:
    shape = np.shape(a)
    axes = (
        [i for i, n in enumerate(shape) if n == 1]
        if axis is None
        else _axes(axis, len(shape))
    )
    return reshape(a, tuple(n for i, n in enumerate(shape) if i not in axes))


def broadcast_to(a: Any, shape: Any, subok: bool = False) -> Any:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    result = _bind("broadcast_to", a, shape=shape)
    return view_of(a, result, lambda v: np.broadcast_to(v, shape), writable=False)


def atleast_2d(*arrays: Any) -> Any:
    out = [reshape(a, (1, -1)) if np.ndim(a) < 2 else a for a in arrays]
    return out[0] if len(out) == 1 else out


def concatenate(arrays: Any, axis: Any = 0, out: Any = None, **kwargs: Any) -> Any:
    _no_out({"out": out})
    arrays = [lift(a) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    ndim = np.ndim(arrays[0])
    return _bind("concatenate", *arrays, axis=int(axis) % ndim)


def stack(arrays: Any, axis: int = 0, out: Any = None, **kwargs: Any) -> Any:
    arrays = [lift(a) for a in arrays]
    ndim = np.ndim(arrays[0]) + 1
    return concatenate([expand_dims(a, axis % ndim) for a in arrays], axis=axis % ndim)


def hstack(arrays: Any, **kwargs: Any) -> Any:
    arrays = [lift(a) for a in arrays]
    arrays = [reshape(a, (1,)) if np.ndim(a) == 0 else a for a in arrays]
    return concatenate(arrays, axis=0 if np.ndim(arrays[0]) == 1 else 1)


def vstack(arrays: Any, **kwargs: Any) -> Any:
    return concatenate([atleast_2d(lift(a)) for a in arrays], axis=0)


def _take_along(a: Any, axis: int, positions: np.ndarray) -> Any:
    axis %= np.ndim(a)
    index = (slice(None),) * axis + (positions,)
    return a[index]


def flip(m: Any, axis: Any = None) -> Any:
    axes = _axes(axis, np.ndim(m))
    return m[
        tuple(
            slice(None, None, -1) if i in axes else slice(None)
            for i in range(np.ndim(m))
        )
    ]


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), np.shape(a))
    shifts = (
        shift
        if isinstance(shift, (tuple, list))
        else (shift,) * len(np.atleast_1d(axis))
    )
    for s, ax in zip(shifts, np.atleast_1d(axis)):
        a = _take_along(a, int(ax), np.roll(np.arange(np.shape(a)[ax]), int(s)))
    return a


def repeat(a: Any, repeats: Any, axis: Any = None) -> Any:
    if axis is None:
        a, axis = ravel(a), 0
    n = np.shape(a)[axis]
    return _take_along(a, int(axis), np.repeat(np.arange(n), repeats))


def tile(a: Any, reps: Any) -> Any:
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    shape = np.shape(a)
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + tuple(shape)
    reps = (1,) * (ndim - len(reps)) + reps
    a = reshape(a, tuple(x for n in shape for x in (1, n)))
    a = broadcast_to(a, tuple(x for r, n in zip(reps, shape) for x in (r, n)))
    return reshape(a, tuple(r * n for r, n in zip(reps, shape)))


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    ndim = np.ndim(array)
    widths = tuple(
        tuple(int(w) for w in pair) for pair in np.broadcast_to(pad_width, (ndim, 2))
    )
    if mode == "constant":
        value = kwargs.get("constant_values", 0)
        out = _bind("pad", array, widths=widths)
        if np.any(np.asarray(value) != 0):
            out = out + np.pad(np.zeros(np.shape(array)), widths, constant_values=value)
        return out
    if mode in ("edge", "wrap", "reflect", "symmetric"):
        for ax, (lo, hi) in enumerate(widths):
            # mode is one of the four above; the stubs want it as a Literal
            idx = np.pad(np.arange(np.shape(array)[ax]), (lo, hi), mode=cast(Any, mode))
            array = _take_along(array, ax, idx)
        return array
    raise TraceError(f"{_where()}: np.pad mode {mode!r} is not supported")


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    ndim = np.ndim(a)
    a = moveaxis(a, (axis1 % ndim, axis2 % ndim), (-2, -1))
    rows, cols = np.shape(a)[-2:]
    i = np.arange(max(0, -offset), min(rows, cols - offset))
    return view_of(a, a[..., i, i + offset], lambda v: v[..., i, i + offset], False)


def diag(v: Any, k: int = 0) -> Any:
    if np.ndim(v) == 2:
        return diagonal(v, k)
    n = np.shape(v)[0] + abs(k)
    i = np.arange(np.shape(v)[0])
    rows, cols = (i, i + k) if k >= 0 else (i - k, i)
    return scatter_add(v, (FrozenArray(rows), FrozenArray(cols)), (n, n))


def _triangle(keep: Callable[..., np.ndarray]) -> Callable[..., Any]:
    def apply(m: Any, k: int = 0) -> Any:
        # NumPy selects (np.where): a product with the 0/1 mask would turn a
        # discarded inf or NaN into NaN and a discarded negative into -0.0
        return where(keep(np.ones(np.shape(m)[-2:]), k) != 0, m, 0.0)

    return apply


def trace_(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw: Any) -> Any:
    """``np.trace``: the sum of the ``offset`` diagonal of the ``axis1``/``axis2``
    planes (``dtype=``/``out=`` refused as for every reduction)."""
    _no_out(kw)
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1)


# ---------------------------------------------------------- linear algebra
def matmul(a: Any, b: Any, **kwargs: Any) -> Any:
    _no_out(kwargs)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise TraceError(f"{_where()}: matmul of a 0-d array (use *)")
    return _bind("matmul", a, b)


def vdot(a: Any, b: Any) -> Any:
    return sum_(ravel(a) * ravel(b))


def outer(a: Any, b: Any, out: Any = None) -> Any:
    return expand_dims(ravel(a), 1) * expand_dims(ravel(b), 0)


def inner(a: Any, b: Any) -> Any:
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    la, lb = "abcdefgh"[: np.ndim(a) - 1], "ijklmnop"[: np.ndim(b) - 1]
    return _bind("einsum", a, b, spec=f"{la}z,{lb}z->{la}{lb}")


# ---------------------------------------------------------------- selection
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


def _like(fill: float) -> Callable[..., Any]:
    def create(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        return constant(np.full(np.shape(a), fill))

    return create


def full_like(a: Any, fill_value: Any, *args: Any, **kwargs: Any) -> Any:
    return np.broadcast_to(fill_value, np.shape(a)) * 1.0 + _like(0.0)(a)


def copy(a: Any, *args: Any, **kwargs: Any) -> Any:
    return a.copy() if isinstance(a, Tracer) else np.copy(a)


# ------------------------------------------------------ differences and sums
def diff(
    a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None
) -> Any:
    """``np.diff``: ``prepend``/``append`` broadcast to the array along the other
    axes, then ``n`` first differences (``a[1:] - a[:-1]``, in NumPy's order)."""
    if n < 0:
        raise TraceError(f"{_where()}: np.diff order must be non-negative, got {n}")
    a = lift(a)
    if np.ndim(a) == 0:
        raise TraceError(f"{_where()}: np.diff of a 0-d array (NumPy raises)")
    axis = int(axis) % np.ndim(a)
    parts = [
        _along(value, a, axis) for value in (prepend, a, append) if value is not None
    ]
    if len(parts) > 1:
        a = concatenate(parts, axis=axis)
    for _ in range(n):
        length = np.shape(a)[axis]
        a = _slice_along(a, axis, slice(1, None)) - _slice_along(
            a, axis, slice(None, max(length - 1, 0))
        )
    return a


def _along(value: Any, a: Any, axis: int) -> Any:
    """``value`` shaped for concatenation to ``a`` along ``axis`` (as np.diff does:
    a scalar is broadcast to length 1 there)."""
    if value is a:
        return a
    if np.ndim(value) == 0:
        shape = list(np.shape(a))
        shape[axis] = 1
        return broadcast_to(lift(value) * 1.0, tuple(shape))
    return _operand(value)


def _slice_along(a: Any, axis: int, part: slice) -> Any:
    return a[(slice(None),) * axis + (part,)]


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """``np.ediff1d``: differences of the flattened array, with ends attached."""
    parts = [diff(ravel(lift(ary)))]
    if to_begin is not None:
        parts.insert(0, _flat(to_begin))
    if to_end is not None:
        parts.append(_flat(to_end))
    return concatenate(parts) if len(parts) > 1 else parts[0]


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


def column_stack(tup: Any) -> Any:
    """``np.column_stack``: 1-D arrays become columns, 2-D ones are kept."""
    arrays = [lift(a) for a in tup]
    arrays = [reshape(a, (-1, 1)) if np.ndim(a) < 2 else a for a in arrays]
    return concatenate(arrays, axis=1)


def append(arr: Any, values: Any, axis: Any = None) -> Any:
    """``np.append``: flattened unless ``axis`` is given."""
    if axis is None:
        return concatenate([ravel(lift(arr)), ravel(lift(values))], axis=0)
    return concatenate([lift(arr), lift(values)], axis=axis)


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """``np.gradient`` with uniform (scalar) spacings: second-order central
    differences inside, first- or second-order one-sided ones at the edges, in
    NumPy's own formulas and order of operations."""
    f = lift(f)
    ndim = np.ndim(f)
    axes = (
        list(range(ndim))
        if axis is None
        else [int(a) % ndim for a in np.atleast_1d(axis)]
    )
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(v) == 0 for v in varargs):
        spacing = list(varargs)
    else:
        raise TraceError(
            f"{_where()}: np.gradient with coordinate arrays is not supported (give "
            "one scalar spacing per axis)"
        )
    if edge_order not in (1, 2):
        raise TraceError(f"{_where()}: np.gradient edge_order must be 1 or 2")
    out = [_gradient_axis(f, ax, dx, edge_order) for ax, dx in zip(axes, spacing)]
    return out[0] if len(out) == 1 else tuple(out)


def _gradient_axis(f: Any, axis: int, dx: Any, edge_order: int) -> Any:
    n = np.shape(f)[axis]
    if n < edge_order + 1:
        raise TraceError(
            f"{_where()}: np.gradient needs at least edge_order + 1 = "
            f"{edge_order + 1} points along axis {axis} (NumPy raises)"
        )

    def at(part: Any) -> Any:
        return _slice_along(f, axis, part)

    inner = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * dx)
    if edge_order == 1:
        first = (at(slice(1, 2)) - at(slice(0, 1))) / dx
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / dx
    else:
        a, b, c = -1.5 / dx, 2.0 / dx, -0.5 / dx
        first = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        a, b, c = 0.5 / dx, -2.0 / dx, 1.5 / dx
        last = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    return concatenate([first, inner, last], axis=axis)


def kron(a: Any, b: Any) -> Any:
    """``np.kron``: the outer product with the axes interleaved, then merged."""
    a, b = lift(a), lift(b)
    ndim = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (ndim - np.ndim(a)) + tuple(np.shape(a))
    sb = (1,) * (ndim - np.ndim(b)) + tuple(np.shape(b))
    a = reshape(a, tuple(x for n in sa for x in (n, 1)))
    b = reshape(b, tuple(x for n in sb for x in (1, n)))
    return reshape(a * b, tuple(m * n for m, n in zip(sa, sb)))


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


def flipud(m: Any) -> Any:
    return flip(m, 0)


def fliplr(m: Any) -> Any:
    if np.ndim(m) < 2:
        raise TraceError(
            f"{_where()}: np.fliplr needs an array of 2 or more dimensions"
        )
    return flip(m, 1)


def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Any:
    """``np.rot90``: flips and a transpose, as NumPy composes them."""
    ndim = np.ndim(m)
    a0, a1 = (int(x) % ndim for x in axes)
    k %= 4
    if k == 0:
        return m[...]
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), perm)
    return flip(transpose(m, perm), a1)


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """``np.rollaxis``, as NumPy defines it with ``moveaxis``."""
    n = np.ndim(a)
    axis = int(axis) % n
    start = int(start) + n if start < 0 else int(start)
    if not 0 <= start <= n:
        raise TraceError(f"{_where()}: np.rollaxis start {start} out of range")
    if axis < start:
        start -= 1
    if axis == start:
        return a[...]
    return moveaxis(a, axis, start)


def _atleast(ndim: int) -> Callable[..., Any]:
    def apply(*arrays: Any) -> Any:
        out = [_promote(lift(a), ndim) for a in arrays]
        return out[0] if len(out) == 1 else tuple(out)

    apply.__name__ = f"atleast_{ndim}d"
    return apply


def _promote(a: Any, ndim: int) -> Any:
    """NumPy's atleast_Nd shapes: () -> (1,)*N, (n,) -> (1, n) or (1, n, 1),
    (m, n) -> (m, n, 1)."""
    shape = tuple(np.shape(a))
    if len(shape) >= ndim:
        return a
    if len(shape) == 0:
        new: tuple[int, ...] = (1,) * ndim
    elif len(shape) == 1:
        new = (1, shape[0]) if ndim == 2 else (1, shape[0], 1)
    else:
        new = (*shape, 1)
    return reshape(a, new) if isinstance(a, Tracer) else np.reshape(a, new)


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Any:
    """``np.linspace`` with traced ends, in NumPy's formula: ``i * step + start`` with
    ``step = (stop - start) / div`` (``(i / div) * delta`` where the step is 0), the
    last point set to ``stop`` exactly."""
    _no_out({"dtype": dtype})
    if axis != 0 or np.ndim(start) or np.ndim(stop):
        raise TraceError(
            f"{_where()}: np.linspace with array ends or axis= is not supported"
        )
    num = int(num)
    if num < 0:
        raise TraceError(f"{_where()}: np.linspace of {num} < 0 samples (NumPy raises)")
    div = num - 1 if endpoint else num
    delta = lift(stop) - start
    i = np.arange(num, dtype=np.float64)
    if div > 0:
        step: Any = delta / float(div)
        y = where(step == 0.0, (i / float(div)) * delta, i * step) + start
    else:
        step = math.nan
        y = i * delta + start
    if endpoint and num > 1:
        y = where(np.arange(num) == num - 1, lift(stop) + 0.0 * i, y)
    return (y, step) if retstep else y


def sinc(x: Any) -> Any:
    """``np.sinc``: a primitive (NumPy's value, and derivatives exact at and near 0,
    where ``sin(pi x) / (pi x)`` is 0/0: see ``primitives.singular``)."""
    return _bind("sinc", lift(x))


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


def around(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """``np.round``: ``rint`` of ``a * 10**d`` divided back (``a / 10**-d`` and
    multiplied back for negative ``d``), as NumPy computes it."""
    _no_out({"out": out})
    decimals = int(decimals)
    if decimals == 0:
        return _bind("rint", a)
    if decimals > 0:
        f = float(10.0**decimals)
        return _bind("rint", a * f) / f
    f = float(10.0 ** (-decimals))
    return _bind("rint", a / f) * f


def real(val: Any) -> Any:
    """The real part of a real array: a view of it (writes show through, as in
    NumPy)."""
    if not isinstance(val, Tracer):
        return np.real(val)
    return view_of(val, Tracer(val.builder, val.atom), lambda v: v)


def imag(val: Any) -> Any:
    """The imaginary part of a real array: zeros (a read-only constant in NumPy)."""
    return _like(0.0)(val)


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


def take(
    a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
) -> Any:
    """``np.take`` with constant indices (``mode='raise'``: negative ones count
    from the end, as in indexing)."""
    _no_out({"out": out})
    if mode != "raise":
        raise TraceError(f"{_where()}: np.take mode={mode!r} is not supported")
    index = np.asarray(indices)
    if index.dtype.kind not in "iu":
        raise TraceError(f"{_where()}: np.take needs constant integer indices")
    if axis is None:
        return ravel(lift(a))[index]
    return _take_along(lift(a), int(axis), index)


def _dtype_stand_in(value: Any) -> Any:
    """A traced array as NumPy's type promotion sees it: an array of its dtype
    (its values do not matter; NumPy 2 promotes arrays by dtype alone)."""
    return np.empty((0,), lift(value).dtype) if contains_tracer(value) else value


def result_type(*arrays_and_dtypes: Any) -> Any:
    """``np.result_type``: the dtype NumPy's promotion gives the tracers' dtypes
    (libraries' array-API shims ask it before converting their arguments)."""
    return np.result_type(*(_dtype_stand_in(a) for a in arrays_and_dtypes))


def reduce_list(reducer: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``reducer``, first making one traced array of a (nested) list that
    holds traced arrays, as ``np.asarray`` of their values would."""

    def reduce(a: Any, *args: Any, **kwargs: Any) -> Any:
        return reducer(lift(a) if contains_tracer(a) else a, *args, **kwargs)

    reduce.__name__ = getattr(reducer, "__name__", "reduce")
    reduce.__doc__ = getattr(reducer, "__doc__", None)
    return reduce


FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.sum: Method(sum_),
    np.mean: Method(mean),
    np.var: Method(var),
    np.std: Method(std),
    np.prod: Method(_reducer("reduce_prod")),
    np.max: Method(_reducer("reduce_max")),
    np.min: Method(_reducer("reduce_min")),
    np.amax: _reducer("reduce_max"),
    np.amin: _reducer("reduce_min"),
    np.cumsum: Method(_cumulative("cumsum")),
    np.cumprod: Method(_cumulative("cumprod")),
    np.reshape: reshape,
    np.ravel: ravel,
    np.transpose: transpose,
    np.swapaxes: Method(swapaxes),
    np.moveaxis: moveaxis,
    np.expand_dims: expand_dims,
    np.squeeze: Method(squeeze),
    np.broadcast_to: broadcast_to,
    np.atleast_2d: _atleast(2),
    np.concatenate: concatenate,
    np.stack: stack,
    np.hstack: hstack,
    np.vstack: vstack,
    np.flip: flip,
    np.roll: roll,
    np.repeat: Method(repeat),
    np.tile: tile,
    np.pad: pad,
    np.diagonal: Method(diagonal),
    np.diag: diag,
    np.trace: Method(trace_),
    np.triu: _triangle(np.triu),
    np.tril: _triangle(np.tril),
    np.vdot: vdot,
    np.outer: outer,
    np.inner: inner,
    np.matmul: matmul,
    np.where: where,
    np.clip: clip,
    np.zeros_like: _like(0.0),
    np.ones_like: _like(1.0),
    np.empty_like: _like(0.0),
    np.full_like: full_like,
    np.copy: copy,
    np.diff: diff,
    np.any: Method(any_),
    np.all: Method(all_),
    np.take: Method(take),
    np.ediff1d: ediff1d,
    np.average: average,
    np.column_stack: column_stack,
    np.append: append,
    np.gradient: gradient,
    np.kron: kron,
    np.select: select,
    np.flipud: flipud,
    np.fliplr: fliplr,
    np.rot90: rot90,
    np.rollaxis: rollaxis,
    np.atleast_1d: _atleast(1),
    np.atleast_3d: _atleast(3),
    np.linspace: linspace,
    np.sinc: sinc,
    np.nan_to_num: nan_to_num,
    np.round: Method(around),
    np.around: around,
    np.real: real,
    np.imag: imag,
    np.result_type: result_type,
    np.iscomplexobj: lambda x: False,  # difgen traces real float64 values
    np.isrealobj: lambda x: True,
    np.shape: lambda a: tuple(a.shape),
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: (
        int(np.prod(np.shape(a))) if axis is None else np.shape(a)[axis]
    ),
}


def handle_function(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_function__``: dispatch to the table, or say what is unsupported."""
    handler = FUNCTIONS.get(func)
    if handler is None:
        module = func.__module__.replace("numpy", "np", 1) if func.__module__ else "np"
        raise TraceError(
            f"{_where()}: {module}.{func.__name__} is not supported by difgen's tracer"
        )
    return handler(*args, **kwargs)


# -------------------------------------------------------------------- ufuncs
def _unary(name: str) -> Callable[[Any], Any]:
    return lambda x: _bind(name, x)


def _binary(name: str) -> Callable[[Any, Any], Any]:
    return lambda a, b: _bind(name, a, b)


def _nan_ignoring(name: str) -> Callable[[Any, Any], Any]:
    """``np.fmax``/``np.fmin``: the other argument where one is NaN (NaN only where
    both are), else ``np.maximum``/``np.minimum`` (whose ties and signed zeros
    ``fmax``/``fmin`` share: checked on every pair of 0, -0, +-1, +-inf, NaN)."""

    def fn(a: Any, b: Any) -> Any:
        a_nan, b_nan = _bind("ne", a, a), _bind("ne", b, b)  # NaN tests
        return np.where(b_nan, a, np.where(a_nan, b, _bind(name, a, b)))

    return fn


UFUNCS: dict[str, Callable[..., Any]] = {
    **{
        name: _unary(name)
        for name in [
            "sin",
            "cos",
            "tan",
            "arcsin",
            "arccos",
            "arctan",
            "sinh",
            "cosh",
            "tanh",
            "arcsinh",
            "arccosh",
            "arctanh",
            "exp",
            "expm1",
            "log",
            "log1p",
            "sqrt",
            "cbrt",
            "sign",
        ]
    },
    **{
        name: _binary(name)
        for name in ["arctan2", "maximum", "minimum", "logical_and", "logical_or"]
    },
    "negative": _unary("neg"),
    "positive": lambda x: x,
    "absolute": _unary("abs"),
    "fabs": _unary("abs"),
    "logical_not": _unary("logical_not"),
    "add": _binary("add"),
    "subtract": _binary("sub"),
    "multiply": _binary("mul"),
    "divide": _binary("div"),
    "true_divide": _binary("div"),
    "power": _binary("pow"),
    "float_power": _binary("pow"),
    "fmax": _nan_ignoring("maximum"),
    "fmin": _nan_ignoring("minimum"),
    "less": _binary("lt"),
    "less_equal": _binary("le"),
    "greater": _binary("gt"),
    "greater_equal": _binary("ge"),
    "equal": _binary("eq"),
    "not_equal": _binary("ne"),
    "matmul": matmul,
    "square": lambda x: x * x,
    "reciprocal": lambda x: 1.0 / x,
    "log2": _unary("log2"),
    "log10": _unary("log10"),
    "exp2": _unary("exp2"),
    "hypot": _binary("hypot"),
    "deg2rad": lambda x: x * (math.pi / 180.0),
    "radians": lambda x: x * (math.pi / 180.0),
    "degrees": lambda x: x * (180.0 / math.pi),
    "conjugate": Method(
        lambda x: x.copy() if isinstance(x, Tracer) else np.conjugate(x)
    ),
    "floor": _unary("floor"),
    "ceil": _unary("ceil"),
    "trunc": _unary("trunc"),
    "rint": _unary("rint"),
    "remainder": _binary("remainder"),
    "fmod": _binary("fmod"),
    "logaddexp": _binary("logaddexp"),
    "logaddexp2": _binary("logaddexp2"),
    "heaviside": _binary("heaviside"),
    "rad2deg": lambda x: x * (180.0 / math.pi),
}

_UFUNC_METHODS = {
    ("add", "reduce"): sum_,
    ("multiply", "reduce"): _reducer("reduce_prod"),
    ("maximum", "reduce"): _reducer("reduce_max"),
    ("minimum", "reduce"): _reducer("reduce_min"),
    ("add", "accumulate"): _cumulative("cumsum"),
    ("multiply", "accumulate"): _cumulative("cumprod"),
}


def handle_ufunc(ufunc: Any, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__``: dispatch to the table, or say what is unsupported."""
    _no_out(kwargs)
    inputs = [lift(x) for x in inputs]
    special = special_api.ufunc_handler(ufunc) if method == "__call__" else None
    if special is not None:
        return special(*inputs)
    numpys = getattr(np, ufunc.__name__, None) is ufunc  # not SciPy's exp2, cbrt...
    if method == "__call__" and numpys and ufunc.__name__ in UFUNCS:
        return UFUNCS[ufunc.__name__](*inputs)
    handler = _UFUNC_METHODS.get((ufunc.__name__, method)) if numpys else None
    if handler is not None:
        axis = kwargs.get("axis", 0)
        if method == "reduce":
            return handler(inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
        return handler(inputs[0], axis=axis)
    suffix = "" if method == "__call__" else f".{method}"
    raise TraceError(
        f"{_where()}: {ufunc_name(ufunc)}{suffix} is not supported by difgen's tracer"
    )


def ufunc_name(ufunc: Any) -> str:
    """A ufunc by the name the user calls it: ``np.sin``, ``scipy.special.gammaln``.

    A ufunc does not know its module: it is looked up in NumPy, then in the loaded
    modules that export it (the shortest public name wins)."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    owners = [
        module_name
        for module_name, module in list(sys.modules.items())
        if not any(part.startswith("_") for part in module_name.split("."))
        and getattr(module, "__dict__", {}).get(name) is ufunc  # no lazy imports
    ]
    if not owners:
        return f"the ufunc {name}"
    return f"{min(owners, key=lambda m: (m.count('.'), len(m)))}.{name}"


use_numpy_dispatch(handle_ufunc, handle_function)
