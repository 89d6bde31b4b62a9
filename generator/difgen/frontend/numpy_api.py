"""NumPy's API on tracers: each supported function written with the core primitives.

Two tables: ``UFUNCS`` (by ufunc name, reached through ``__array_ufunc__``) and
``FUNCTIONS`` (by function object, reached through ``__array_function__``). Anything
not in them is an error that names the function and the user's line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from difgen.core.ir import FrozenArray
from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, constant, lift, use_numpy_dispatch, view_of
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.primitives.indexing import scatter_add


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


# --------------------------------------------------------------- reductions
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
    _no_out({"out": out, "dtype": dtype, **kwargs})
    return np.sqrt(var(a, axis=axis, ddof=ddof, keepdims=keepdims))


def _cumulative(prim: str) -> Callable[..., Any]:
    def accumulate(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        _no_out({"out": out, "dtype": dtype})
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
        return m * keep(np.ones(np.shape(m)[-2:]), k)

    return apply


def trace_(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw: Any) -> Any:
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


FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.sum: sum_,
    np.mean: mean,
    np.var: var,
    np.std: std,
    np.prod: _reducer("reduce_prod"),
    np.max: _reducer("reduce_max"),
    np.min: _reducer("reduce_min"),
    np.amax: _reducer("reduce_max"),
    np.amin: _reducer("reduce_min"),
    np.cumsum: _cumulative("cumsum"),
    np.cumprod: _cumulative("cumprod"),
    np.reshape: reshape,
    np.ravel: ravel,
    np.transpose: transpose,
    np.swapaxes: swapaxes,
    np.moveaxis: moveaxis,
    np.expand_dims: expand_dims,
    np.squeeze: squeeze,
    np.broadcast_to: broadcast_to,
    np.atleast_2d: atleast_2d,
    np.concatenate: concatenate,
    np.stack: stack,
    np.hstack: hstack,
    np.vstack: vstack,
    np.flip: flip,
    np.roll: roll,
    np.repeat: repeat,
    np.tile: tile,
    np.pad: pad,
    np.diagonal: diagonal,
    np.diag: diag,
    np.trace: trace_,
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
    "fmax": _binary("maximum"),
    "fmin": _binary("minimum"),
    "less": _binary("lt"),
    "less_equal": _binary("le"),
    "greater": _binary("gt"),
    "greater_equal": _binary("ge"),
    "equal": _binary("eq"),
    "not_equal": _binary("ne"),
    "matmul": matmul,
    "square": lambda x: x * x,
    "reciprocal": lambda x: 1.0 / x,
    "log2": lambda x: np.log(x) * (1.0 / math.log(2.0)),
    "log10": lambda x: np.log(x) * (1.0 / math.log(10.0)),
    "exp2": lambda x: 2.0**x,
    "hypot": lambda a, b: np.sqrt(a * a + b * b),
    "deg2rad": lambda x: x * (math.pi / 180.0),
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
    if method == "__call__" and ufunc.__name__ in UFUNCS:
        return UFUNCS[ufunc.__name__](*inputs)
    handler = _UFUNC_METHODS.get((ufunc.__name__, method))
    if handler is not None:
        axis = kwargs.get("axis", 0)
        if method == "reduce":
            return handler(inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
        return handler(inputs[0], axis=axis)
    suffix = "" if method == "__call__" else f".{method}"
    raise TraceError(
        f"{_where()}: np.{ufunc.__name__}{suffix} is not supported by difgen's tracer"
    )


use_numpy_dispatch(handle_ufunc, handle_function)
