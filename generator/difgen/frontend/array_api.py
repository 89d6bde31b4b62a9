"""NumPy's other array functions on tracers: products, differences and gradients,
``kron``, ``sinc``, rounding, real and imaginary parts, ``take``, ``result_type``."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, contains_tracer, lift, view_of
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend.arguments import _no_out
from difgen.frontend.reduction_api import _flat, _operand, sum_
from difgen.frontend.shape_api import (
    _like,
    _take_along,
    broadcast_to,
    concatenate,
    expand_dims,
    ravel,
    reshape,
)


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


def sinc(x: Any) -> Any:
    """``np.sinc``: a primitive (NumPy's value, and derivatives exact at and near 0,
    where ``sin(pi x) / (pi x)`` is 0/0: see ``primitives.singular``)."""
    return _bind("sinc", lift(x))


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
