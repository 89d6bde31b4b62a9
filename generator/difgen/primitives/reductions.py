"""Reductions over static axes, and cumulative sums and products.

``keepdims`` is not a parameter: the frontend reshapes. ``mean``, ``var``, ``std``,
``norm`` and ``logsumexp``-style code are built from these in the NumPy frontend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen import precision
from difgen.core import simplify as identities
from difgen.core.expr import Expr, NumpyForm, argument, atom, call
from difgen.core.primitive import (
    Deferred,
    reduction_loop,
    register,
    scan_loop,
)
from difgen.primitives import patterns
from difgen.primitives.family import reduction


def _keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _expand(value: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Broadcast a reduced value back over the reduced axes."""
    return np.broadcast_to(np.reshape(value, _keepdims_shape(shape, axes)), shape)


def _axes_src(axes: tuple[int, ...]) -> str:
    return str(axes[0]) if len(axes) == 1 else repr(tuple(axes))


# ------------------------------------------------------------------------- sum
def _sum_jvp(out: Any, primals: list[Any], tangents: list[Any], axes: Any) -> Any:
    """Linear."""
    return None if tangents[0] is None else np.sum(tangents[0], axis=axes)


def _sum_transpose(ct: Any, x: Any, axes: Any) -> list[Any]:
    """Broadcast the cotangent back over the summed axes."""
    return [_expand(ct, x.shape, axes)]


def _sum_impl(x: Any, axes: Any) -> Any:
    return np.asarray(np.sum(x, axis=axes))


def _reduce_form(ufunc: str) -> NumpyForm:
    """``np.add.reduce(x, axis=...)``: the ufunc method, without the Python wrapper of
    ``np.sum``, whose price per call on small arrays
    ``benchmarks.calibration.sum_wrapper_ns`` measures."""

    def form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
        """Over every axis: ``axis=None`` (nothing for 1-D, where it is the default)."""
        axes, ndim = params["axes"], len(avals[0][0])
        if len(axes) == ndim:
            axis = "" if ndim == 1 else ", axis=None"
        else:
            axis = f", axis={_axes_src(axes)}"
        text = f"np.{ufunc}.reduce({argument(args[0])}{axis})"
        if ufunc in ("add", "multiply"):  # accumulations (not max/min)
            text = precision.widened(text)
        return atom(text)

    return form


_sum_form = _reduce_form("add")


def pairwise(terms: list[Any]) -> Any:
    """The sum of ``terms`` associated as NumPy's float64 pairwise summation adds
    them (``pairwise_sum`` in NumPy's loops: a left fold below 8 terms, 8
    interleaved partial sums up to 128, halves rounded to a multiple of 8 above).

    On floats the association decides the rounding, and with cancellation much
    more: NumPy's ``[1e200, -1e200, 0.5]`` sums to 0.5, another order to 0.
    """
    n = len(terms)
    if n < 8:
        return _left_fold(terms)
    if n <= 128:
        partial = list(terms[:8])
        i = 8
        while i < n - n % 8:
            partial = [p + terms[i + j] for j, p in enumerate(partial)]
            i += 8
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + (
            (partial[4] + partial[5]) + (partial[6] + partial[7])
        )
        for term in terms[i:]:
            total = total + term
        return total
    half = n // 2 - (n // 2) % 8
    return pairwise(terms[:half]) + pairwise(terms[half:])


def sum_in_numpy_order(x: Any, axes: Any) -> Any:
    """``np.sum`` of an object array over ``axes``, each sum associated as NumPy
    associates it on float64: pairwise over trailing (contiguous) axes, a left fold
    over any other (NumPy adds whole rows there)."""
    x = np.asarray(x, dtype=object)
    axes = tuple(sorted(int(a) % x.ndim for a in axes))
    kept = [a for a in range(x.ndim) if a not in axes]
    trailing = axes == tuple(range(x.ndim - len(axes), x.ndim))
    moved = np.transpose(x, kept + list(axes))
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    rows = moved.reshape(moved.shape[: len(kept)] + (count,))
    fold = pairwise if trailing else _left_fold
    out = np.empty(rows.shape[:-1], dtype=object)
    for index in np.ndindex(*out.shape):
        out[index] = fold(list(rows[index]))
    return out


def _left_fold(terms: list[Any]) -> Any:
    total = terms[0] if terms else 0
    for term in terms[1:]:
        total = total + term
    return total


reduce_sum_p = register(
    reduction(
        "reduce_sum",
        _sum_impl,
        _sum_form,
        jvp=_sum_jvp,
        transpose=_sum_transpose,
        sympy=sum_in_numpy_order,
        simplify=identities.reduce_sum_identities,
        c_loop=reduction_loop("0.0", "{acc} + {v}"),
    )
)


# --------------------------------------------------------------- max, min, prod
def _extremum_jvp(out: Any, primals: list[Any], tangents: list[Any], axes: Any) -> Any:
    """Average of the tangents at the positions that attain the extremum."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    hit = np.where(x == _expand(out, np.shape(x), axes), 1.0, 0.0)
    return np.sum(dx * hit, axis=axes) / np.sum(hit, axis=axes)


def _prod_jvp(out: Any, primals: list[Any], tangents: list[Any], axes: Any) -> Any:
    """d prod(x) = prod(x) * sum(dx / x) (undefined where an element is zero)."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    return out * np.sum(dx / x, axis=axes)


def _object_reduce(fn: Any) -> Any:
    ufunc = np.frompyfunc(fn, 2, 1)

    def reduce(x: Any, axes: Any) -> Any:
        for axis in sorted(axes, reverse=True):
            x = ufunc.reduce(x, axis=axis)
        return np.asarray(x, dtype=object)

    return reduce


def _object_extremum(fn: Any) -> Any:
    """The SymPy lowering of a max/min reduction: one n-ary ``fn`` per output
    element (:class:`~difgen.primitives.heads.reductions.NaryMax`), in time
    linear in the elements."""

    def reduce(x: Any, axes: Any) -> Any:
        x = np.asarray(x, dtype=object)
        axes = tuple(sorted(a % x.ndim for a in axes)) if x.ndim else ()
        kept = [a for a in range(x.ndim) if a not in axes]
        shape = tuple(x.shape[a] for a in kept)
        rows = np.transpose(x, kept + list(axes)).reshape(shape + (-1,))
        out = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            items = list(rows[index])
            out[index] = items[0] if len(items) == 1 else fn(*items)
        return out

    return reduce


def _reduction_impl(fn: Any) -> Any:
    return lambda x, axes: np.asarray(fn(x, axis=axes))


for _prim in (
    reduction(
        "reduce_max",
        _reduction_impl(np.max),
        _reduce_form("maximum"),
        jvp=_extremum_jvp,
        sympy=Deferred("difgen.primitives.heads.reductions:maximum"),
        c_loop=reduction_loop("-INFINITY", "_maximum({acc}, {v})", ("_maximum",)),
    ),
    reduction(
        "reduce_min",
        _reduction_impl(np.min),
        _reduce_form("minimum"),
        jvp=_extremum_jvp,
        sympy=Deferred("difgen.primitives.heads.reductions:minimum"),
        c_loop=reduction_loop("INFINITY", "_minimum({acc}, {v})", ("_minimum",)),
    ),
    reduction(
        "reduce_prod",
        _reduction_impl(np.prod),
        _reduce_form("multiply"),
        jvp=_prod_jvp,
        sympy=_object_reduce(lambda a, b: a * b),
        c_loop=reduction_loop("1.0", "{acc} * {v}"),
    ),
):
    register(_prim)


# ------------------------------------------------------------------ cumulative


def _cumsum_jvp(out: Any, primals: list[Any], tangents: list[Any], axis: int) -> Any:
    """Linear."""
    return None if tangents[0] is None else np.cumsum(tangents[0], axis=axis)


def _cumsum_transpose(ct: Any, x: Any, axis: int) -> list[Any]:
    """A reversed cumulative sum."""
    return [np.flip(np.cumsum(np.flip(ct, axis), axis=axis), axis)]


def _cumprod_jvp(out: Any, primals: list[Any], tangents: list[Any], axis: int) -> Any:
    """d cumprod(x) = cumprod(x) * cumsum(dx / x) (undefined at zeros)."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    return out * np.cumsum(dx / x, axis=axis)


def _object_accumulate(fn: Any) -> Any:
    ufunc = np.frompyfunc(fn, 2, 1)
    return lambda x, axis: np.asarray(ufunc.accumulate(x, axis=axis), dtype=object)


def _cumsum_form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """``np.cumsum(x, axis=...)``, accumulated in float64 where the module asks."""
    text = f"np.cumsum({argument(args[0])}, axis={params['axis']})"
    return atom(precision.widened(text))


def _same_shape(x: Any, axis: int) -> Any:
    """A cumulative operation keeps the shape."""
    return x


register(
    reduction(
        "cumsum",
        lambda x, axis: np.cumsum(x, axis=axis),
        _cumsum_form,
        jvp=_cumsum_jvp,
        transpose=_cumsum_transpose,
        sympy=_object_accumulate(lambda a, b: a + b),
        shape_rule=_same_shape,
        sparsity=patterns.accumulated,
        c_loop=scan_loop("{acc} + {v}"),
        cost="accumulating",
    )
)
register(
    reduction(
        "cumprod",
        lambda x, axis: np.cumprod(x, axis=axis),
        call("np.cumprod({0}, axis={axis})"),
        jvp=_cumprod_jvp,
        sympy=_object_accumulate(lambda a, b: a * b),
        shape_rule=_same_shape,
        sparsity=patterns.accumulated,
        c_loop=scan_loop("{acc} * {v}"),
        cost="accumulating",
    )
)
