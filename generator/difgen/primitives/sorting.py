"""Run-time primitives of the sort family: ``argsort``, ``argmax``/``argmin``,
``sort``, ``median``, ``quantile`` and the running extrema (``np.maximum.accumulate``).

Their values are NumPy's own call; their derivatives go through the run-time
permutation ``np.argsort(kind="stable")`` picks (see
:mod:`difgen.primitives.runtime`, which declares the rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen.core.expr import Aval, Expr, argument, atom
from difgen.core.ir import FrozenArray
from difgen.core.primitive import (
    NOT_DIFFERENTIABLE,
    Primitive,
)
from difgen.primitives import patterns
from difgen.primitives.runtime import Rule, bind_row, gather, runtime_row


# ---------------------------------------------------------------- sort family
def _axis_call(fn: str, extra: str = "") -> Rule:
    def form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
        name = fn.format(**params)
        return atom(f"{name}({argument(args[0])}{extra.format(**params)})")

    return form


def _axis_shape(dtype: str | None, keep_axis: bool) -> Rule:
    def rule(x: Aval, **params: Any) -> Aval:
        shape = tuple(x[0])
        if not keep_axis:
            axis = params["axis"]
            if shape[axis] == 0:
                raise ValueError("an empty axis has no order statistic")
            shape = shape[:axis] + shape[axis + 1 :]
        return shape, dtype or x[1]

    return rule


def _axis_batch(name: str) -> Rule:
    def rule(args: Any, batched: Any, k: int, **params: Any) -> Any:
        """The batch axis is axis 0: the sorted axis moves up by one."""
        return bind_row(name, args[0], **{**params, "axis": int(params["axis"]) + 1})

    return rule


def take_along(x: Any, idx: Any, axis: int) -> Any:
    """``np.take_along_axis(x, idx, axis)`` for a run-time ``idx``: a gather whose
    other axes are static ``arange`` indices (broadcast against ``idx``)."""
    shape = tuple(np.shape(x))
    index: list[Any] = []
    for d in range(len(shape)):
        if d == axis:
            index.append(("dyn", 0))
        else:
            view = [1] * len(shape)
            view[d] = shape[d]
            index.append(FrozenArray(np.arange(shape[d]).reshape(view)))
    return gather(x, [idx], tuple(index))


def argsort(x: Any, axis: int, kind: str | None) -> Any:
    """``np.argsort(x, axis, kind)``: the run-time permutation (int64)."""
    return bind_row("argsort", x, axis=axis, kind=kind)


def _stable_order(x: Any, axis: int) -> Any:
    """The permutation derivatives follow: stable, so ties keep the input order."""
    return argsort(x, axis, "stable")


argsort_p = runtime_row(
    "argsort",
    lambda x, axis, kind: np.argsort(x, axis=axis, kind=kind),
    _axis_call("np.argsort", ", axis={axis}, kind={kind!r}"),
    shape_rule=_axis_shape("int64", True),
    jvp=NOT_DIFFERENTIABLE,
    batch=_axis_batch("argsort"),
    sparsity=patterns.no_dependence,
)


def _arg_extreme(name: str) -> Primitive:
    fn = getattr(np, name)
    return runtime_row(
        name,
        lambda x, axis: np.asarray(fn(x, axis=axis)),
        _axis_call(f"np.{name}", ", axis={axis}"),
        shape_rule=_axis_shape("int64", False),
        jvp=NOT_DIFFERENTIABLE,
        batch=_axis_batch(name),
        sparsity=patterns.no_dependence,
    )


argmax_p = _arg_extreme("argmax")
argmin_p = _arg_extreme("argmin")


def _sort_jvp(
    out: Any, primals: list[Any], tangents: list[Any], axis: int, kind: Any
) -> Any:
    """The tangent in the (stable) sorted order."""
    (x,), (dx,) = primals, tangents
    return None if dx is None else take_along(dx, _stable_order(x, axis), axis)


sort_p = runtime_row(
    "sort",
    lambda x, axis, kind: np.sort(x, axis=axis, kind=kind),
    _axis_call("np.sort", ", axis={axis}, kind={kind!r}"),
    shape_rule=_axis_shape(None, True),
    jvp=_sort_jvp,
    batch=_axis_batch("sort"),
    sparsity=patterns.all_inputs,
)


def _picked(x: Any, dx: Any, axis: int, weights: Sequence[tuple[int, float]]) -> Any:
    """``sum w * sorted(dx)[k]`` over the sorted positions ``k`` with weights ``w``,
    reading only those positions of the stable permutation."""
    order = _stable_order(x, axis)
    total: Any = None
    for k, w in weights:
        at = tuple([slice(None)] * axis + [slice(k, k + 1)])
        picked = np.squeeze(take_along(dx, order[at], axis), axis=axis)
        term = picked if w == 1.0 else picked * w
        total = term if total is None else total + term
    return total


def median_weights(n: int) -> list[tuple[int, float]]:
    """The sorted positions NumPy's median averages: the middle one or two."""
    if n % 2:
        return [(n // 2, 1.0)]
    return [(n // 2 - 1, 0.5), (n // 2, 0.5)]


def _median_jvp(out: Any, primals: list[Any], tangents: list[Any], axis: int) -> Any:
    """The tangent of the middle element(s) of the stable sort."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    return _picked(x, dx, axis, median_weights(np.shape(x)[axis]))


median_p = runtime_row(
    "median",
    lambda x, axis: np.asarray(np.median(x, axis=axis)),
    _axis_call("np.median", ", axis={axis}"),
    shape_rule=_axis_shape(None, False),
    jvp=_median_jvp,
    batch=_axis_batch("median"),
    sparsity=patterns.all_inputs,
)


def quantile_weights(n: int, q: float) -> list[tuple[int, float]]:
    """The sorted positions (and weights) of NumPy's linear-method quantile."""
    virtual = q * (n - 1)
    lo = min(int(np.floor(virtual)), n - 1)
    t = virtual - lo
    if lo + 1 >= n or t == 0.0:
        return [(lo, 1.0)]
    return [(lo, 1.0 - t), (lo + 1, t)]


def _quantile_jvp(
    out: Any, primals: list[Any], tangents: list[Any], axis: int, q: float, fn: str
) -> Any:
    """Linear interpolation between two sorted elements: the same weights on their
    tangents."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    fraction = q / 100.0 if fn == "percentile" else q
    return _picked(x, dx, axis, quantile_weights(np.shape(x)[axis], fraction))


quantile_p = runtime_row(
    "quantile",
    lambda x, axis, q, fn: np.asarray(getattr(np, fn)(x, q, axis=axis)),
    _axis_call("np.{fn}", ", {q!r}, axis={axis}"),
    shape_rule=_axis_shape(None, False),
    jvp=_quantile_jvp,
    batch=_axis_batch("quantile"),
    sparsity=patterns.all_inputs,
)


def _cum_extreme_jvp(
    out: Any, primals: list[Any], tangents: list[Any], axis: int, op: str
) -> Any:
    """The tangent of the element each running extremum comes from."""
    (x,), (dx,) = primals, tangents
    if dx is None:
        return None
    return take_along(dx, running_source(x, out, axis, op), axis)


def running_source(x: Any, running: Any, axis: int, op: str) -> Any:
    """The position of the element each running extremum comes from: the earliest
    attaining it (a NaN, once met, is carried, as ``np.maximum`` carries it).

    A position starts a new run where its element beats the previous running value
    (or is the first NaN); the source of each running value is the latest such
    position, itself a running maximum.
    """
    shape = tuple(np.shape(x))
    head = list(shape)
    head[axis] = 1
    fill = -np.inf if op == "maximum" else np.inf
    before = tuple(
        slice(None) if d != axis else slice(None, -1) for d in range(len(shape))
    )
    prev = np.concatenate([np.full(tuple(head), fill), running[before]], axis=axis)
    beats = x > prev if op == "maximum" else x < prev
    x_nan, prev_number = x != x, prev == prev  # noqa: PLR0124 (NaN tests)
    new = beats | (x_nan & prev_number)  # x is the first NaN
    view = [1] * len(shape)
    view[axis] = shape[axis]
    positions = np.where(new, np.arange(float(shape[axis])).reshape(view), 0.0)
    latest = bind_row("cum_extreme", positions, axis=axis, op="maximum")
    return bind_row("to_int64", latest)


cum_extreme_p = runtime_row(
    "cum_extreme",
    lambda x, axis, op: getattr(np, op).accumulate(x, axis=axis),
    _axis_call("np.{op}.accumulate", ", axis={axis}"),
    shape_rule=_axis_shape(None, True),
    jvp=_cum_extreme_jvp,
    batch=_axis_batch("cum_extreme"),
    sparsity=patterns.all_inputs,
)
