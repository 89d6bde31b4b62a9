"""Structural primitives: they move, copy or place elements without arithmetic.

All are linear. Indices are static: an index is a tuple whose items are ints,
``("slice", start, stop, step)``, ``None`` (new axis), ``Ellipsis`` or a constant
integer array (:class:`~difgen.ir.FrozenArray`), so ``x[index]`` is decided at build
time, including whether a scatter may assign (unique positions) or must accumulate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from difgen.ir import FrozenArray
from difgen.primitives.core import (
    Linear,
    Primitive,
    _dummy,
    batched_to,
    bind,
    lift_batched,
    register,
    unbroadcast,
)


# ----------------------------------------------------------------------- index
def to_index(frozen: tuple[Any, ...]) -> tuple[Any, ...]:
    """Rebuild a NumPy index from its frozen form."""
    items: list[Any] = []
    for item in frozen:
        if isinstance(item, tuple) and len(item) == 4 and item[0] == "slice":
            items.append(slice(*item[1:]))
        elif isinstance(item, FrozenArray):
            items.append(item.value)
        else:
            items.append(item)
    return tuple(items)


def index_source(frozen: tuple[Any, ...]) -> str:
    """Source text of a frozen index (arrays print as their constant's name)."""
    parts: list[str] = []
    for item in frozen:
        if isinstance(item, tuple) and len(item) == 4 and item[0] == "slice":
            start, stop, step = ("" if v is None else str(v) for v in item[1:])
            parts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        elif item is None:
            parts.append("None")
        elif item is Ellipsis:
            parts.append("...")
        else:
            parts.append(repr(item))
    if len(parts) == 1:
        return parts[0] if parts[0] else ":"
    return ", ".join(p or ":" for p in parts)


def positions_unique(shape: tuple[int, ...], frozen: tuple[Any, ...]) -> bool:
    """Whether ``x[index]`` reads each position of ``x`` at most once.

    Basic indices (ints, slices, new axes) never repeat a position; with integer
    arrays, the positions repeat exactly when two broadcast index tuples coincide, so
    only the (small) index arrays are looked at, never an array of ``shape``.
    """
    if not any(isinstance(item, FrozenArray) for item in frozen):
        return True
    dims = _dims_of(shape, frozen)
    arrays = [
        (np.asarray(item.value) % n) if isinstance(item, FrozenArray) else item % n
        for item, n in zip(frozen, dims)
        if isinstance(item, (FrozenArray, int)) and n is not None
    ]
    flat = np.ravel_multi_index(
        [np.ravel(a) for a in np.broadcast_arrays(*arrays)],
        [n for item, n in zip(frozen, dims) if isinstance(item, (FrozenArray, int))],
    )
    return len(np.unique(flat)) == flat.size


def _dims_of(shape: tuple[int, ...], frozen: tuple[Any, ...]) -> list[int | None]:
    """The dimension of ``shape`` each index item applies to (None for new axes)."""
    consumed = sum(1 for item in frozen if item is not None and item is not Ellipsis)
    dims: list[int | None] = []
    axis = 0
    for item in frozen:
        if item is None:
            dims.append(None)
        elif item is Ellipsis:
            dims.append(None)
            axis += len(shape) - consumed
        else:
            dims.append(shape[axis])
            axis += 1
    return dims


def advanced_first(frozen: tuple[Any, ...]) -> bool:
    """Whether NumPy puts the broadcast dims of the array indices first.

    That happens when integer-array indices (and ints, which then count as arrays)
    are separated by a slice, an Ellipsis or a new axis.
    """
    if not any(isinstance(item, FrozenArray) for item in frozen):
        return False
    where = [i for i, item in enumerate(frozen) if isinstance(item, (FrozenArray, int))]
    return where != list(range(where[0], where[-1] + 1))


def _array_index_ndim(frozen: tuple[Any, ...]) -> int:
    arrays = [np.asarray(i.value) for i in frozen if isinstance(i, FrozenArray)]
    return len(np.broadcast_shapes(*(a.shape for a in arrays))) if arrays else 0


_FULL = ("slice", None, None, None)


def _batched_index(frozen: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_FULL, *frozen)


def _batch_axis_front(value: Any, frozen: tuple[Any, ...]) -> Any:
    """After indexing with a leading full slice, move the batch axis back in front."""
    if not advanced_first(frozen):
        return value
    pos = _array_index_ndim(frozen)
    ndim = np.ndim(value)
    order = [pos] + [i for i in range(ndim) if i != pos]
    return np.transpose(value, order)


def _batch_axis_to_region(value: Any, frozen: tuple[Any, ...], ndim: int) -> Any:
    """A value ``(k, *v)`` laid out like ``out[(:, *index)] = value`` expects it."""
    value = lift_batched(value, ndim)
    if not advanced_first(frozen):
        return value
    pos = _array_index_ndim(frozen)
    order = list(range(1, np.ndim(value)))
    order.insert(pos, 0)
    return np.transpose(value, order)


def _getitem_jvp(out: Any, primals: list[Any], tangents: list[Any], index: Any) -> Any:
    """Linear."""
    return None if tangents[0] is None else tangents[0][to_index(index)]


def _getitem_transpose(ct: Any, x: Any, index: Any) -> list[Any]:
    """Scatter the cotangent back to the positions that were read."""
    return [scatter_add(ct, index, x.shape)]


def _getitem_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """Index behind a leading full slice."""
    out = bind(getitem_p, args[0], index=_batched_index(index))
    return _batch_axis_front(out, index)


def _getitem_shape(x: Any, index: Any) -> Any:
    return tuple(_dummy(*x)[to_index(index)].shape), x[1]


getitem_p = register(
    Primitive(
        name="getitem",
        impl=lambda x, index: np.asarray(x[to_index(index)]),
        emit=lambda args, params: f"{args[0]}[{index_source(params['index'])}]",
        jvp=_getitem_jvp,
        transpose=_getitem_transpose,
        shape_rule=_getitem_shape,
        batch=_getitem_batch,
        linear=True,
    )
)


def _elements(value: Any) -> Any:
    """A 0-d array as its element: object arrays would store the array itself."""
    value = np.asarray(value)
    return value[()] if value.ndim == 0 else value


def _scatter_impl(value: Any, index: Any, shape: tuple[int, ...]) -> Any:
    value = _elements(value)
    out = np.zeros(shape, dtype=np.asarray(value).dtype)
    if positions_unique(shape, index):
        out[to_index(index)] = value
    else:
        np.add.at(out, to_index(index), value)
    return out


def _scatter_emit(args: list[str], params: dict[str, Any]) -> list[str]:
    idx = index_source(params["index"])
    if positions_unique(params["shape"], params["index"]):
        store = f"OUT[{idx}] = {args[0]}"
    else:
        store = f"np.add.at(OUT, np.s_[{idx}], {args[0]})"
    return [f"OUT = np.zeros({params['shape']!r})", store]


def _scatter_jvp(
    out: Any, primals: list[Any], tangents: list[Any], **params: Any
) -> Any:
    """Linear."""
    return None if tangents[0] is None else scatter_add(tangents[0], **params)


def _scatter_transpose(ct: Any, value: Any, index: Any, shape: Any) -> list[Any]:
    """Read back the scattered positions."""
    return [unbroadcast(ct[to_index(index)], value.shape)]


def _scatter_batch(args: Any, batched: Any, k: int, index: Any, shape: Any) -> Any:
    """Scatter behind a leading full slice into ``(k, *shape)``."""
    region = _dummy(tuple(shape), "float64")[to_index(index)].ndim
    value = _batch_axis_to_region(args[0], index, region)
    return scatter_add(value, _batched_index(index), (k, *shape))


scatter_add_p = register(
    Primitive(
        name="scatter_add",
        impl=_scatter_impl,
        emit=_scatter_emit,
        jvp=_scatter_jvp,
        transpose=_scatter_transpose,
        shape_rule=lambda value, index, shape: (tuple(shape), value[1]),
        batch=_scatter_batch,
        linear=True,
    )
)


def scatter_add(value: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """``out = zeros(shape); out[index] += value``, traced or eager."""
    return bind(scatter_add_p, value, index=index, shape=tuple(shape))


# ---------------------------------------------------------------- scatter_sum
def _scatter_sum_impl(*values: Any, indices: Any, shape: Any) -> Any:
    dtype = object if any(np.asarray(v).dtype == object for v in values) else float
    out = np.zeros(shape, dtype=dtype)
    for value, index in zip(values, indices):
        if positions_unique(tuple(shape), index):
            out[to_index(index)] += _elements(value)
        else:
            np.add.at(out, to_index(index), _elements(value))
    return out


_COVER_LIMIT = 1 << 22  # track which positions are written up to this many elements


def _scatter_sum_emit(args: list[str], params: dict[str, Any]) -> list[str]:
    """One zero buffer: the first writes of each position assign, later ones add."""
    shape = tuple(params["shape"])
    lines = [f"OUT = np.zeros({shape!r})"]
    size = int(np.prod(shape, dtype=np.int64))
    covered = np.zeros(shape, dtype=bool) if size <= _COVER_LIMIT else None
    for arg, index in zip(args, params["indices"]):
        src = index_source(index)
        if not positions_unique(shape, index):
            lines.append(f"np.add.at(OUT, np.s_[{src}], {arg})")
            covered = None
            continue
        fresh = covered is not None and not covered[to_index(index)].any()
        lines.append(f"OUT[{src}] {'=' if fresh else '+='} {arg}")
        if covered is not None:
            covered[to_index(index)] = True
    return lines


def _scatter_sum_jvp(
    out: Any, primals: list[Any], tangents: list[Any], indices: Any, shape: Any
) -> Any:
    """Linear: the scatter of the tangents that are not zero."""
    kept = [(t, i) for t, i in zip(tangents, indices) if t is not None]
    if not kept:
        return None
    return scatter_sum([t for t, _ in kept], [i for _, i in kept], shape)


def _scatter_sum_transpose(
    ct: Any, *values: Any, indices: Any, shape: Any
) -> list[Any]:
    """Each value reads back its positions."""
    return [
        unbroadcast(ct[to_index(i)], v.shape) if isinstance(v, Linear) else None
        for v, i in zip(values, indices)
    ]


def _scatter_sum_batch(
    args: Any, batched: Any, k: int, indices: Any, shape: Any
) -> Any:
    """Every index behind a leading full slice, into ``(k, *shape)``."""
    values = []
    for value, b, index in zip(args, batched, indices):
        region = _dummy(tuple(shape), "float64")[to_index(index)].ndim
        values.append(_batch_axis_to_region(batched_to(value, b, k), index, region))
    return scatter_sum(values, [_batched_index(i) for i in indices], (k, *shape))


scatter_sum_p = register(
    Primitive(
        name="scatter_sum",
        impl=_scatter_sum_impl,
        emit=_scatter_sum_emit,
        jvp=_scatter_sum_jvp,
        transpose=_scatter_sum_transpose,
        shape_rule=lambda *values, indices, shape: (tuple(shape), "float64"),
        batch=_scatter_sum_batch,
        linear=True,
    )
)


def scatter_sum(values: list[Any], indices: list[Any], shape: tuple[int, ...]) -> Any:
    """``out = zeros(shape); out[index_i] += value_i`` for each i, traced or eager.

    The fusion of added scatters (reverse mode accumulates a cotangent from every
    slice that read it): one buffer instead of one per slice.
    """
    if len(values) == 1:
        return scatter_add(values[0], indices[0], shape)
    return bind(scatter_sum_p, *values, indices=tuple(indices), shape=tuple(shape))


def _set_index_impl(x: Any, value: Any, index: Any) -> Any:
    out = np.array(x, copy=True)
    if out.dtype != object and np.asarray(value).dtype == object:
        out = out.astype(object)
    out[to_index(index)] = _elements(value)
    return out


def _set_index_emit(args: list[str], params: dict[str, Any]) -> list[str]:
    return [
        f"OUT = {args[0]}.copy()",
        f"OUT[{index_source(params['index'])}] = {args[1]}",
    ]


def _set_index_jvp(
    out: Any, primals: list[Any], tangents: list[Any], index: Any
) -> Any:
    """Linear in the array and the stored value jointly."""
    dx, dv = tangents
    if dx is None and dv is None:
        return None
    shape = tuple(np.shape(out))
    if dx is None and positions_unique(shape, index):
        return scatter_add(dv, index, shape)  # zeros, then one assignment
    dx = np.zeros(shape) if dx is None else dx
    return set_index(dx, 0.0 if dv is None else dv, index)


def _set_index_transpose(ct: Any, x: Any, value: Any, index: Any) -> list[Any]:
    """The overwritten positions get no cotangent; the stored value gets theirs."""
    if isinstance(value, Linear) and not positions_unique(tuple(np.shape(ct)), index):
        raise NotImplementedError("reverse mode through an assignment that repeats "
                                  "a position (the last write wins)")  # fmt: skip
    cx = set_index(ct, 0.0, index) if isinstance(x, Linear) else None
    cv = (
        unbroadcast(ct[to_index(index)], value.shape)
        if isinstance(value, Linear)
        else None
    )
    return [cx, cv]


def _set_index_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """Assign behind a leading full slice into the batched array."""
    x = batched_to(args[0], batched[0], k)
    value = args[1]
    if batched[1]:
        region = _dummy(tuple(np.shape(x))[1:], "float64")[to_index(index)].ndim
        value = _batch_axis_to_region(value, index, region)
    return set_index(x, value, _batched_index(index))


set_index_p = register(
    Primitive(
        name="set_index",
        impl=_set_index_impl,
        emit=_set_index_emit,
        jvp=_set_index_jvp,
        transpose=_set_index_transpose,
        shape_rule=lambda x, value, index: x,
        batch=_set_index_batch,
        linear=True,
    )
)


def set_index(x: Any, value: Any, index: Any) -> Any:
    """``out = x.copy(); out[index] = value``, traced or eager."""
    return bind(set_index_p, x, value, index=index)


# ------------------------------------------------------------- shape and order
def _reshape_jvp(out: Any, primals: list[Any], tangents: list[Any], shape: Any) -> Any:
    """Linear."""
    return None if tangents[0] is None else np.reshape(tangents[0], shape)


def _transpose_jvp(out: Any, primals: list[Any], tangents: list[Any], axes: Any) -> Any:
    """Linear."""
    return None if tangents[0] is None else np.transpose(tangents[0], axes)


def _broadcast_jvp(
    out: Any, primals: list[Any], tangents: list[Any], shape: Any
) -> Any:
    """Linear."""
    return None if tangents[0] is None else np.broadcast_to(tangents[0], shape)


def _transpose_src(args: list[str], params: dict[str, Any]) -> str:
    axes = tuple(params["axes"])
    if axes == tuple(reversed(range(len(axes)))):
        return f"{args[0]}.T"
    return f"np.transpose({args[0]}, {axes!r})"


def _reshape_batch(args: Any, batched: Any, k: int, shape: Any) -> Any:
    """Keep the batch axis, reshape the rest."""
    return np.reshape(args[0], (k, *shape))


def _transpose_batch(args: Any, batched: Any, k: int, axes: Any) -> Any:
    """The batch axis stays first."""
    return np.transpose(args[0], (0, *(int(a) + 1 for a in axes)))


def _broadcast_batch(args: Any, batched: Any, k: int, shape: Any) -> Any:
    """Lift the batch axis in front, then broadcast the rest."""
    return np.broadcast_to(lift_batched(args[0], len(shape)), (k, *shape))


def _transpose_shape(x: Any, axes: Any) -> Any:
    return tuple(x[0][int(a)] for a in axes), x[1]


register(
    Primitive(
        name="reshape",
        impl=lambda x, shape: np.reshape(x, shape),
        emit=lambda args, params: f"np.reshape({args[0]}, {tuple(params['shape'])!r})",
        jvp=_reshape_jvp,
        transpose=lambda ct, x, shape: [np.reshape(ct, x.shape)],
        shape_rule=lambda x, shape: (tuple(shape), x[1]),
        batch=_reshape_batch,
        linear=True,
    )
)
register(
    Primitive(
        name="transpose",
        impl=lambda x, axes: np.transpose(x, axes),
        emit=_transpose_src,
        jvp=_transpose_jvp,
        transpose=lambda ct, x, axes: [np.transpose(ct, tuple(np.argsort(axes)))],
        shape_rule=_transpose_shape,
        batch=_transpose_batch,
        linear=True,
    )
)
register(
    Primitive(
        name="broadcast_to",
        impl=lambda x, shape: np.broadcast_to(x, shape),
        emit=lambda args, params: f"np.broadcast_to({args[0]}, {tuple(params['shape'])!r})",
        jvp=_broadcast_jvp,
        transpose=lambda ct, x, shape: [unbroadcast(ct, x.shape)],
        shape_rule=lambda x, shape: (tuple(shape), x[1]),
        batch=_broadcast_batch,
        linear=True,
    )
)


# --------------------------------------------------------- joining and padding
def _concat_jvp(out: Any, primals: list[Any], tangents: list[Any], axis: int) -> Any:
    """Linear: concatenate the tangents, zeros where an input has none."""
    if all(t is None for t in tangents):
        return None
    parts = [
        np.zeros(np.shape(p)) if t is None else t for p, t in zip(primals, tangents)
    ]
    return np.concatenate(parts, axis=axis)


def _concat_transpose(ct: Any, *inputs: Any, axis: int) -> list[Any]:
    """Slice the cotangent back into the pieces."""
    cts: list[Any] = []
    start = 0
    for x in inputs:
        stop = start + x.shape[axis]
        if isinstance(x, Linear):
            index = (("slice", None, None, None),) * axis + (
                ("slice", start, stop, None),
            )
            cts.append(ct[to_index(index)])
        else:
            cts.append(None)
        start = stop
    return cts


def _concat_src(args: list[str], params: dict[str, Any]) -> str:
    items = ", ".join(args) + ("," if len(args) == 1 else "")
    return f"np.concatenate(({items}), axis={params['axis']})"


def _concat_batch(args: Any, batched: Any, k: int, axis: int) -> Any:
    """Unbatched pieces are broadcast; the axis moves up by one."""
    parts = [batched_to(a, b, k) for a, b in zip(args, batched)]
    return np.concatenate(parts, axis=axis + 1)


def _concat_shape(*xs: Any, axis: int) -> Any:
    shape = list(xs[0][0])
    shape[axis] = sum(x[0][axis] for x in xs)
    return tuple(shape), xs[0][1]


register(
    Primitive(
        name="concatenate",
        impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
        emit=_concat_src,
        jvp=_concat_jvp,
        transpose=_concat_transpose,
        shape_rule=_concat_shape,
        batch=_concat_batch,
        linear=True,
    )
)


def _pad_transpose(ct: Any, x: Any, widths: Any) -> list[Any]:
    """Cut the padding off again."""
    index = tuple(("slice", lo, lo + n, None) for (lo, _), n in zip(widths, x.shape))
    return [ct[to_index(index)]]


register(
    Primitive(
        name="pad",
        impl=lambda x, widths: np.pad(x, widths),
        emit=lambda args, params: f"np.pad({args[0]}, {tuple(params['widths'])!r})",
        jvp=lambda out, primals, tangents, widths: (
            None if tangents[0] is None else np.pad(tangents[0], widths)
        ),
        transpose=_pad_transpose,
        shape_rule=lambda x, widths: (
            tuple(n + lo + hi for n, (lo, hi) in zip(x[0], widths)),
            x[1],
        ),
        batch=lambda args, batched, k, widths: np.pad(args[0], ((0, 0), *widths)),
        linear=True,
    )
)


# ------------------------------------------------------------------------ pack
def _pack_src(args: list[str], params: dict[str, Any]) -> str:
    nested = np.array(args, dtype=object).reshape(params["shape"])
    return "np.array(" + repr(nested.tolist()).replace("'", "") + ")"


def _pack_jvp(out: Any, primals: list[Any], tangents: list[Any], shape: Any) -> Any:
    """Linear: pack the tangents, zero where an element has none."""
    if all(t is None for t in tangents):
        return None
    return pack([0.0 if t is None else t for t in tangents], shape)


def _pack_transpose(ct: Any, *elements: Any, shape: Any) -> list[Any]:
    """Each packed scalar gets its element of the cotangent."""
    return [
        (
            ct[tuple(int(i) for i in np.unravel_index(k, shape))]
            if isinstance(e, Linear)
            else None
        )
        for k, e in enumerate(elements)
    ]


def _pack_batch(args: Any, batched: Any, k: int, shape: Any) -> Any:
    """Batched scalars side by side: one concatenate of ``(k, 1)`` columns."""
    columns = [np.reshape(batched_to(a, b, k), (k, 1)) for a, b in zip(args, batched)]
    return np.reshape(np.concatenate(columns, axis=1), (k, *shape))


def _pack_objects(*xs: Any, shape: Any) -> Any:
    out = np.empty(len(xs), dtype=object)
    out[:] = [np.asarray(x, dtype=object)[()] for x in xs]
    return out.reshape(shape)


pack_p = register(
    Primitive(
        name="pack",
        impl=lambda *xs, shape: np.array(xs, dtype=np.float64).reshape(shape),
        emit=_pack_src,
        jvp=_pack_jvp,
        transpose=_pack_transpose,
        sympy=_pack_objects,
        shape_rule=lambda *xs, shape: (tuple(shape), "float64"),
        batch=_pack_batch,
        linear=True,
    )
)


def pack(elements: list[Any], shape: tuple[int, ...]) -> Any:
    """``np.array`` of scalars (traced or not) laid out in ``shape``."""
    return bind(pack_p, *elements, shape=tuple(shape))


# ----------------------------------------------------------------------- basis
def _basis_impl(shape: Any) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return np.eye(n).reshape((n, *shape))


def _basis_emit(args: list[str], params: dict[str, Any]) -> str:
    shape = tuple(params["shape"])
    n = int(np.prod(shape, dtype=np.int64))
    return (
        f"np.eye({n})" if len(shape) == 1 else f"np.eye({n}).reshape({(n, *shape)!r})"
    )


def _basis_sympy(shape: Any) -> np.ndarray:
    import sympy as sp

    value = _basis_impl(shape)
    out = np.empty(value.shape, dtype=object)
    out.ravel()[:] = [sp.Integer(int(v)) for v in value.ravel()]
    return out


basis_p = Primitive(
    name="basis",
    impl=_basis_impl,
    emit=_basis_emit,
    sympy=_basis_sympy,
    shape_rule=lambda shape: ((int(np.prod(shape, dtype=np.int64)), *shape), "float64"),
)
"""The standard basis of an array of ``shape``, stacked: ``(size, *shape)``.

The seed of a jacobian or hessian over the input basis. It has no inputs and is not
registered with the tracer: the AD layer records it as a runtime constant (``np.eye``
in the emitted code), so an ``n x n`` identity is never folded into a literal.
"""
