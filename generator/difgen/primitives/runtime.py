"""Primitives on data known only at run time: what the families share, and gathers
and scatter-adds through run-time index arrays.

Traced values were float64 only; these rows add non-differentiable ``int64`` and
``bool`` values (contexts of those dtypes, ``astype(int)``, ``argsort``...). Their
shapes stay static; only their *values* are known at run time, so the generated code
indexes, sorts and selects at run time, and each derivative is the matching gather
or scatter through the same run-time indices.

An index with run-time parts is a frozen static index (see
:mod:`difgen.core.indexing`) whose run-time items are ``("dyn", k)`` markers: the
k-th index operand after the indexed array. NumPy's own indexing runs in the emitted
code, so negative indices wrap and out-of-bounds ones raise ``IndexError`` at run
time exactly as in the user's function.

Values the user asked for are computed by the NumPy call the user wrote
(``np.sort``, ``np.median``, ``np.quantile``, ``np.maximum.accumulate``), so they are
bit-for-bit NumPy's; only their derivatives go through a run-time permutation, the
one ``np.argsort(kind="stable")`` picks (ties: the earlier element first).

None of these lower to SymPy: scalar code cannot index at run time. The trace
backend's automatic emission falls back to vector code; ``emit = "scalar"`` and the
sympy backend refuse, pointing to ``backend = "trace"``.

This module holds what the run-time families share (:func:`runtime_row`, the
rows by name, :func:`bind_row`), the run-time index, ``gather``, ``scatter_add_dyn``
and ``set_index_dyn``, and the indices they read (:func:`index_reads`). The other
families: casts and integer arithmetic in :mod:`difgen.primitives.integers`, the sort
family in :mod:`difgen.primitives.sorting`, masked reductions in
:mod:`difgen.primitives.masks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.batching import batched_to, lift_batched
from difgen.core.expr import Aval, Expr, argument, atom, base
from difgen.core.indexing import to_index
from difgen.core.ir import Atom, Eqn, FrozenArray
from difgen.core.primitive import (
    GATHER_LOOP,
    NO_HELPER,
    NO_IDENTITIES,
    NOT_LINEAR,
    SCATTER_LOOP,
    Absent,
    Linear,
    LoopForm,
    Primitive,
    dummy,
    no_loop_form,
    register,
    unbroadcast,
)
from difgen.core.tracer import bind
from difgen.errors import DifgenError
from difgen.primitives import patterns
from difgen.primitives.family import size_work
from difgen.primitives.indexing import (
    _array_index_ndim,
    _batch_axis_to_region,
    advanced_first,
    index_source,
)

Rule = Callable[..., Any]

RUNTIME_INDEX = (
    "run-time integer or boolean data (an index, a mask, a sort permutation) cannot "
    'be lowered to scalar code; use backend = "trace" (its vector code indexes at '
    "run time)"
)


def _no_sympy(*args: Any, **params: Any) -> Any:
    """Scalar code cannot index or sort at run time (see the module docstring)."""
    raise NotImplementedError(RUNTIME_INDEX)


_ROWS: dict[str, Primitive] = {}
"""The rows :func:`runtime_row` declared, by name, in the order declared."""

RUNTIME_PRIMITIVES = _ROWS.keys()
"""The rows whose graphs cannot be scalarized (see :data:`RUNTIME_INDEX`): every
row of the run-time families (a view, filled as the families are imported)."""


def bind_row(name: str, *args: Any, **params: Any) -> Any:
    """Bind one of the run-time rows by name."""
    return bind(_ROWS[name], *args, **params)


_NO_LOOP = no_loop_form("run-time indices or integer data (NumPy's own)")


def runtime_row(
    name: str,
    impl: Rule,
    numpy: Rule,
    *,
    shape_rule: Rule,
    jvp: Rule | Absent,
    transpose: Rule | Absent = NOT_LINEAR,
    batch: Rule | Absent,
    sparsity: Rule,
    c_loop: LoopForm | Absent = _NO_LOOP,
) -> Primitive:
    """A primitive that touches run-time indices: never lowered to SymPy (so never
    scalarized), no algebraic identities (integer arithmetic must not meet the float
    identities: ``a + a`` would become ``2.0 * a``), no C loop form (``c_loop``
    says why) unless the row declares one (the gather and the scatter-add
    through an int64 index argument)."""
    row = register(
        Primitive(
            name=name,
            impl=impl,
            shape_rule=shape_rule,
            numpy=numpy,
            jvp=jvp,
            transpose=transpose,
            batch=batch,
            sympy=_no_sympy,
            simplify=NO_IDENTITIES,
            commutative=False,
            sparsity=sparsity,
            work=size_work,
            scalarizable=False,
            view=False,
            elementwise=False,
            c_loop=c_loop,
            scalar=NO_HELPER,
            cost="opaque",
        )
    )
    _ROWS[name] = row
    return row


# ----------------------------------------------------------------- the index
def is_dyn(item: Any) -> bool:
    """Whether a frozen index item is a run-time index operand marker."""
    return isinstance(item, tuple) and len(item) == 2 and item[0] == "dyn"


def is_points(item: Any) -> bool:
    """Whether a frozen index item is the points marker ``("points", k, rank)``: the
    positions ``0..k-1`` of the leading axis of points, shaped ``(k, 1, ..., 1)``
    (``rank`` ones) to broadcast against per-point run-time indices (the batch
    rules of :func:`gather` and :func:`scatter_add_dyn` put it in front when the
    indices themselves carry the points)."""
    return isinstance(item, tuple) and len(item) == 3 and item[0] == "points"


def _points_positions(item: Any) -> np.ndarray:
    _, k, rank = item
    return np.arange(k, dtype=np.int64).reshape((k,) + (1,) * rank)


def substitute(index: tuple[Any, ...], dyn: Sequence[Any]) -> tuple[Any, ...]:
    """The NumPy index: static items rebuilt, markers replaced by their operands."""
    static = to_index(tuple(None if is_dyn(i) or is_points(i) else i for i in index))
    return tuple(
        dyn[i[1]] if is_dyn(i) else _points_positions(i) if is_points(i) else s
        for i, s in zip(index, static)
    )


def _placeholders(index: tuple[Any, ...], shapes: Sequence[Any]) -> tuple[Any, ...]:
    """The index with each marker replaced by a constant of its operand's shape, for
    the static helpers that only need shapes (region rank, advanced-first)."""
    return tuple(
        (
            FrozenArray(np.zeros(shapes[i[1]], dtype=np.int64))
            if is_dyn(i)
            else FrozenArray(_points_positions(i)) if is_points(i) else i
        )
        for i in index
    )


def _index_text(index: tuple[Any, ...], dyn: Sequence[Expr], points: str = "") -> str:
    """Source of the index, run-time operands by their expressions; the points
    marker as ``np.arange`` of ``points`` (the text of the number of points,
    read from an array at run time, so that it prints for any number)."""
    parts = []
    for item in index:
        if is_dyn(item):
            parts.append(argument(dyn[item[1]]))
        elif is_points(item):
            shape = ", ".join(["-1", *("1" for _ in range(item[2]))])
            parts.append(f"np.arange({points}).reshape({shape})")
        else:
            parts.append(index_source((item,)))
    return ", ".join(parts) if len(parts) > 1 else parts[0]


def _dyn_shapes(avals: Sequence[Aval]) -> list[tuple[int, ...]]:
    return [tuple(s) for s, _ in avals]


def _region_shape(
    shape: tuple[int, ...], index: tuple[Any, ...], dyn: Sequence[Aval]
) -> tuple[int, ...]:
    probe = _placeholders(index, _dyn_shapes(dyn))
    return tuple(dummy(tuple(shape), "float64")[to_index(probe)].shape)


def _points_index(
    index: tuple[Any, ...], shapes: Sequence[tuple[int, ...]], k: int
) -> tuple[tuple[Any, ...], int, list[int] | None]:
    """The per-point ``index`` (its run-time operands ``shapes`` without the
    points) behind the points marker, for operands that carry the points: (the
    batched index, the rank the operands are lifted to behind the points, and
    the axes to transpose the batched region by to lay it out as the per-point
    region with the points in front, or None when it is laid out so already).

    NumPy puts the broadcast dims of the index arrays first when they are
    separated by a slice; the marker in front separates them from the index
    arrays of an ``x[:, idx]``, whose per-point region has them after the
    slices' dims."""
    probe = _placeholders(index, shapes)
    rank = _array_index_ndim(probe)
    where = [i for i, item in enumerate(probe) if isinstance(item, (FrozenArray, int))]
    if not where or where[0] == 0 or advanced_first(probe):
        return (("points", k, rank), *index), rank, None
    if any(item is Ellipsis for item in probe[: where[0]]):
        raise DifgenError(
            "a run-time index per point after an Ellipsis: write the axes "
            "as slices (x[:, :, idx])"
        )
    before = sum(1 for item in probe[: where[0]] if not isinstance(item, int))
    order = [0, *range(1 + rank, 1 + rank + before), *range(1, 1 + rank)]
    return (("points", k, rank), *index), rank, order


def _lifted_indices(
    args: Sequence[Any], batched: Sequence[bool], k: int, rank: int
) -> list[Any]:
    """Run-time index operands with the points in front, lifted to ``rank``
    behind them, so that they broadcast as the per-point index arrays do."""
    return [lift_batched(batched_to(a, b, k), rank) for a, b in zip(args, batched)]


def _unbatched_indices(name: str, batched: Sequence[bool]) -> None:
    if any(batched):
        raise DifgenError(
            f"{name}: a run-time index that varies across a batch of seeds (indices "
            "are computed from the primal values, never from tangents)"
        )


# -------------------------------------------------------------------- gather
def _gather_impl(x: Any, *dyn: Any, index: Any) -> Any:
    return np.asarray(np.asarray(x)[substitute(index, dyn)])


def _gather_shape(x: Aval, *dyn: Aval, index: Any) -> Aval:
    for _, dtype in dyn:
        if dtype != "int64":
            raise TypeError(f"run-time index of dtype {dtype}")
    return _region_shape(x[0], index, dyn), x[1]


def _gather_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr:
    points = f"{base(args[0])}.shape[0]"
    return atom(f"{base(args[0])}[{_index_text(params['index'], args[1:], points)}]")


def _gather_jvp(out: Any, primals: list[Any], tangents: list[Any], index: Any) -> Any:
    """Linear in the array: the tangent is read at the same run-time positions."""
    if tangents[0] is None:
        return None
    return gather(tangents[0], primals[1:], index)


def _gather_transpose(ct: Any, x: Any, *dyn: Any, index: Any) -> list[Any]:
    """The cotangent is added back at the positions read (repeats accumulate)."""
    return [scatter_add_dyn(ct, dyn, index, x.shape), *(None for _ in dyn)]


def _axes(order: list[int], ndim: int) -> list[int]:
    """``order`` completed with the remaining axes, in place, up to ``ndim``."""
    return [*order, *range(len(order), ndim)]


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for i, axis in enumerate(order):
        inverse[axis] = i
    return inverse


def _gather_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """The array carries the batch: index behind a leading full slice. Indices
    that carry it (labels per point) index behind the points marker instead,
    each point's own row of the array at its own indices."""
    if any(batched[1:]):
        shapes = [
            np.shape(d)[1:] if b else np.shape(d) for d, b in zip(args[1:], batched[1:])
        ]
        full_index, rank, order = _points_index(index, shapes, k)
        dyn = _lifted_indices(args[1:], batched[1:], k, rank)
        out = gather(batched_to(args[0], batched[0], k), dyn, full_index)
        return out if order is None else np.transpose(out, _axes(order, np.ndim(out)))
    full = ("slice", None, None, None)
    out = gather(args[0], list(args[1:]), (full, *index))
    probe = _placeholders(index, [np.shape(d) for d in args[1:]])
    if not advanced_first(probe):
        return out
    pos = _array_index_ndim(probe)
    order = [pos] + [i for i in range(np.ndim(out)) if i != pos]
    return np.transpose(out, order)


gather_p = runtime_row(
    "gather",
    _gather_impl,
    _gather_form,
    shape_rule=_gather_shape,
    jvp=_gather_jvp,
    transpose=_gather_transpose,
    batch=_gather_batch,
    sparsity=patterns.all_inputs,
    c_loop=GATHER_LOOP,
)


def gather(x: Any, dyn: Sequence[Any], index: tuple[Any, ...]) -> Any:
    """``x[index]`` with run-time index operands ``dyn`` at the ``("dyn", k)`` slots."""
    return bind(gather_p, x, *dyn, index=tuple(index))


# --------------------------------------------------------------- scatter-add
def _scatter_impl(value: Any, *dyn: Any, index: Any, shape: Any) -> Any:
    out = np.zeros(tuple(shape), dtype=np.float64)
    np.add.at(out, substitute(index, dyn), np.asarray(value))
    return out


_SCATTER_POINTS = "OUT.shape[0]"
"""The number of points in a scatter's form: the leading axis of its result."""


def _scatter_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> list[str]:
    """Zeros, then ``np.add.at``, which adds once per repeated position (a plain
    ``OUT[idx] += v`` would add a repeated position once)."""
    index = _index_text(params["index"], args[1:], _SCATTER_POINTS)
    # NumPy's stubs type np.add.at's index as one array: a tuple index is valid
    # NumPy that they reject
    items = params["index"]
    rejected = len(items) > 1
    if any(is_points(i) for i in items):  # arrays only: the stubs take those
        rejected = not all(is_points(i) or is_dyn(i) for i in items)
    ignore = "  # type: ignore[arg-type]" if rejected else ""
    return [
        f"OUT = np.zeros({tuple(params['shape'])!r}{precision.float_dtype_arg()})",
        f"np.add.at(OUT, np.s_[{index}], {argument(args[0])}){ignore}",
    ]


def _scatter_shape(value: Aval, *dyn: Aval, index: Any, shape: Any) -> Aval:
    return tuple(shape), "float64"


def _scatter_jvp(
    out: Any, primals: list[Any], tangents: list[Any], index: Any, shape: Any
) -> Any:
    """Linear in the scattered values."""
    if tangents[0] is None:
        return None
    return scatter_add_dyn(tangents[0], primals[1:], index, shape)


def _scatter_transpose(ct: Any, value: Any, *dyn: Any, index: Any, shape: Any) -> Any:
    """Read the cotangent back at the scattered positions."""
    read = gather(ct, dyn, index)
    return [unbroadcast(read, value.shape), *(None for _ in dyn)]


def _scatter_batch(args: Any, batched: Any, k: int, index: Any, shape: Any) -> Any:
    """Scatter behind a leading full slice into ``(k, *shape)``; indices that
    carry the batch scatter behind the points marker, each point into its own
    row at its own indices."""
    if any(batched[1:]):
        shapes = [
            np.shape(d)[1:] if b else np.shape(d) for d, b in zip(args[1:], batched[1:])
        ]
        full_index, rank, order = _points_index(index, shapes, k)
        dyn = _lifted_indices(args[1:], batched[1:], k, rank)
        probe = _placeholders(full_index, [np.shape(d) for d in dyn])
        region = dummy((k, *shape), "float64")[to_index(probe)].ndim
        value = lift_batched(batched_to(args[0], batched[0], k), region - 1)
        if order is not None:
            value = np.transpose(value, _inverse(_axes(order, region)))
        return scatter_add_dyn(value, dyn, full_index, (k, *shape))
    probe = _placeholders(index, [np.shape(d) for d in args[1:]])
    region = dummy(tuple(shape), "float64")[to_index(probe)].ndim
    value = _batch_axis_to_region(args[0], probe, region)
    full = ("slice", None, None, None)
    return scatter_add_dyn(value, list(args[1:]), (full, *index), (k, *shape))


scatter_add_dyn_p = runtime_row(
    "scatter_add_dyn",
    _scatter_impl,
    _scatter_form,
    shape_rule=_scatter_shape,
    jvp=_scatter_jvp,
    transpose=_scatter_transpose,
    batch=_scatter_batch,
    sparsity=patterns.all_inputs,
    c_loop=SCATTER_LOOP,
)


def scatter_add_dyn(
    value: Any, dyn: Sequence[Any], index: tuple[Any, ...], shape: tuple[int, ...]
) -> Any:
    """``out = zeros(shape); np.add.at(out, index, value)`` with run-time indices."""
    return bind(scatter_add_dyn_p, value, *dyn, index=tuple(index), shape=tuple(shape))


# ----------------------------------------------------------------- set_index
def _set_impl(x: Any, value: Any, *dyn: Any, index: Any) -> Any:
    out = np.array(x, dtype=np.float64, copy=True)
    out[substitute(index, dyn)] = value
    return out


def _set_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> list[str]:
    return [
        f"OUT = {base(args[0])}.copy()",
        f"OUT[{_index_text(params['index'], args[2:])}] = {argument(args[1])}",
    ]


def _set_jvp(out: Any, primals: list[Any], tangents: list[Any], index: Any) -> Any:
    """Linear in the array and the stored value jointly."""
    dx, dv = tangents[:2]
    if dx is None and dv is None:
        return None
    dx = np.zeros(np.shape(out)) if dx is None else dx
    return set_index_dyn(dx, 0.0 if dv is None else dv, primals[2:], index)


def _set_transpose(ct: Any, x: Any, value: Any, *dyn: Any, index: Any) -> list[Any]:
    """Overwritten positions get no cotangent; of repeated positions, the element
    of the value written last (NumPy's order) gets it, found at run time."""
    cx = set_index_dyn(ct, 0.0, dyn, index) if isinstance(x, Linear) else None
    if not isinstance(value, Linear):
        return [cx, None, *(None for _ in dyn)]
    read = gather(ct, dyn, index)
    read = np.where(last_writes(tuple(np.shape(ct)), dyn, index), read, 0.0)
    return [cx, unbroadcast(read, value.shape), *(None for _ in dyn)]


def last_writes(shape: tuple[int, ...], dyn: Sequence[Any], index: Any) -> Any:
    """True where an assignment through ``index`` writes last to its position
    (NumPy's ``x[[0, 0]] = v``: ``v[1]`` wins), found at run time the way NumPy
    decides it: assign each element's number, read the positions back."""
    region = _region_shape(shape, index, [(np.shape(d), "int64") for d in dyn])
    ids = np.arange(int(np.prod(region, dtype=np.int64)), dtype=np.float64)
    ids = ids.reshape(region)
    written = set_index_dyn(np.zeros(shape), ids, dyn, index)
    return gather(written, dyn, index) == ids


def _set_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """Assign behind a leading full slice into the batched array."""
    _unbatched_indices("set_index_dyn", batched[2:])
    x = args[0] if batched[0] else np.broadcast_to(args[0], (k, *np.shape(args[0])))
    value = args[1]
    probe = _placeholders(index, [np.shape(d) for d in args[2:]])
    if batched[1]:
        region = dummy(tuple(np.shape(x))[1:], "float64")[to_index(probe)].ndim
        value = _batch_axis_to_region(value, probe, region)
    full = ("slice", None, None, None)
    return set_index_dyn(x, value, list(args[2:]), (full, *index))


set_index_dyn_p = runtime_row(
    "set_index_dyn",
    _set_impl,
    _set_form,
    shape_rule=lambda x, value, *dyn, index: (x[0], "float64"),
    jvp=_set_jvp,
    transpose=_set_transpose,
    batch=_set_batch,
    sparsity=patterns.all_inputs,
)


def set_index_dyn(
    x: Any, value: Any, dyn: Sequence[Any], index: tuple[Any, ...]
) -> Any:
    """``out = x.copy(); out[index] = value`` with run-time index operands."""
    return bind(set_index_dyn_p, x, value, *dyn, index=tuple(index))


# ------------------------------------------------------ the indices they read
@dataclass(frozen=True)
class IndexRead:
    """A run-time index operand of one equation: NumPy reads it as positions along
    ``axis`` of an array whose length there is ``size``, and raises ``IndexError``
    unless every element ``i`` has ``-size <= i < size``."""

    operand: Atom
    axis: int
    size: int


def _indexed(eqn: Eqn) -> tuple[tuple[int, ...], int] | None:
    """(shape of the array indexed, position of the first index operand) of a
    row that indexes through run-time operands; None for any other equation."""
    name = eqn.primitive.name
    if name == "gather":
        return tuple(eqn.inputs[0].shape), 1
    if name == "scatter_add_dyn":
        return tuple(eqn.params.as_dict()["shape"]), 1
    if name == "set_index_dyn":
        return tuple(eqn.inputs[0].shape), 2
    return None


def _consumes_axis(item: Any) -> bool:
    """Whether a frozen index item takes an axis of the indexed array (``None``
    adds one, ``...`` stands for those no other item takes)."""
    return item is not None and item is not Ellipsis


def index_reads(eqn: Eqn) -> list[IndexRead]:
    """The run-time index operands ``eqn`` reads, each with the axis it indexes
    and that axis's length (empty for an equation that reads none)."""
    indexed = _indexed(eqn)
    if indexed is None:
        return []
    shape, first = indexed
    index = tuple(eqn.params.as_dict()["index"])
    reads = []
    for position, item in enumerate(index):
        if not is_dyn(item):
            continue
        before = index[:position]
        if Ellipsis in before:  # counted from the end: the items after take those
            axis = len(shape) - sum(map(_consumes_axis, index[position:]))
        else:
            axis = sum(map(_consumes_axis, before))
        reads.append(IndexRead(eqn.inputs[first + item[1]], axis, shape[axis]))
    return reads
