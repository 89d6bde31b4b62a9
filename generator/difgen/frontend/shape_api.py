"""NumPy's shape and creation functions on tracers: reshapes, transposes, joins,
flips, rolls, padding, diagonals and triangles, ``linspace`` and the ``*_like``
functions."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from difgen.core.ir import FrozenArray
from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, constant, lift, view_of
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend.arguments import _axes, _no_out
from difgen.frontend.selection_api import where
from difgen.primitives.indexing import scatter_add


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


def _like(fill: float) -> Callable[..., Any]:
    def create(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        return constant(np.full(np.shape(a), fill))

    return create


def full_like(a: Any, fill_value: Any, *args: Any, **kwargs: Any) -> Any:
    return np.broadcast_to(fill_value, np.shape(a)) * 1.0 + _like(0.0)(a)


def copy(a: Any, *args: Any, **kwargs: Any) -> Any:
    return a.copy() if isinstance(a, Tracer) else np.copy(a)


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
