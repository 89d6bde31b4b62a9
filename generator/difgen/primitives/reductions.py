"""Reductions over static axes, and cumulative sums and products.

``keepdims`` is not a parameter: the frontend reshapes. ``mean``, ``var``, ``std``,
``norm`` and ``logsumexp``-style code are built from these in the NumPy frontend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from difgen.core.primitive import Primitive, register


def _keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _expand(value: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Broadcast a reduced value back over the reduced axes."""
    return np.broadcast_to(np.reshape(value, _keepdims_shape(shape, axes)), shape)


def _reduced_shape(x: Any, axes: Any) -> Any:
    """Shape rule of a reduction: the reduced axes disappear."""
    return tuple(n for i, n in enumerate(x[0]) if i not in axes), x[1]


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


def _reduce_emit(ufunc: str) -> Any:
    """``np.add.reduce(x, axis=...)``: the ufunc method, without the Python wrapper of
    ``np.sum`` (about 1 us per call on small arrays)."""

    def emit(args: list[str], params: dict[str, Any]) -> str:
        return f"np.{ufunc}.reduce({args[0]}, axis={_axes_src(params['axes'])})"

    return emit


_sum_emit = _reduce_emit("add")


reduce_sum_p = register(
    Primitive(
        name="reduce_sum",
        impl=_sum_impl,
        emit=_sum_emit,
        jvp=_sum_jvp,
        transpose=_sum_transpose,
        shape_rule=_reduced_shape,
        linear=True,
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


REDUCTIONS = [
    # name, NumPy, emitted ufunc, JVP, SymPy binary operation
    ("reduce_max", np.max, "maximum", _extremum_jvp, sp.Max),
    ("reduce_min", np.min, "minimum", _extremum_jvp, sp.Min),
    ("reduce_prod", np.prod, "multiply", _prod_jvp, lambda a, b: a * b),
]


def _reduction_impl(fn: Any) -> Any:
    return lambda x, axes: np.asarray(fn(x, axis=axes))


for _name, _np_fn, _ufunc, _jvp, _sym in REDUCTIONS:
    register(
        Primitive(
            name=_name,
            impl=_reduction_impl(_np_fn),
            emit=_reduce_emit(_ufunc),
            jvp=_jvp,
            sympy=_object_reduce(_sym),
            shape_rule=_reduced_shape,
        )
    )


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


register(
    Primitive(
        name="cumsum",
        impl=lambda x, axis: np.cumsum(x, axis=axis),
        emit=lambda args, params: f"np.cumsum({args[0]}, axis={params['axis']})",
        jvp=_cumsum_jvp,
        transpose=_cumsum_transpose,
        sympy=_object_accumulate(lambda a, b: a + b),
        shape_rule=lambda x, axis: x,
        linear=True,
    )
)
register(
    Primitive(
        name="cumprod",
        impl=lambda x, axis: np.cumprod(x, axis=axis),
        emit=lambda args, params: f"np.cumprod({args[0]}, axis={params['axis']})",
        jvp=_cumprod_jvp,
        sympy=_object_accumulate(lambda a, b: a * b),
        shape_rule=lambda x, axis: x,
    )
)
