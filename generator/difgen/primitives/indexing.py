"""Indexing primitives: read (``getitem``), place into zeros (``scatter_add``,
``scatter_sum``) and overwrite (``set_index``) through static indices.

All are linear. An index is a tuple whose items are ints, ``("slice", start, stop,
step)``, ``None`` (new axis), ``Ellipsis`` or a constant integer array
(:class:`~difgen.core.ir.FrozenArray`), so ``x[index]`` is decided at build time,
including whether a scatter may assign (unique positions) or must accumulate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen import precision
from difgen.core import simplify as identities
from difgen.core.batching import batched_to, lift_batched
from difgen.core.expr import Aval, Expr, argument, atom, base
from difgen.core.indexing import to_index
from difgen.core.ir import FrozenArray
from difgen.core.primitive import Linear, dummy, register, unbroadcast
from difgen.core.tracer import bind
from difgen.primitives import patterns
from difgen.primitives.family import structural


# ----------------------------------------------------------------------- index
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
        return parts[0] or ":"
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
    indexed = [
        (item, n)
        for item, n in zip(frozen, dims)
        if isinstance(item, (FrozenArray, int)) and n is not None
    ]
    arrays = [
        (np.asarray(item.value) % n) if isinstance(item, FrozenArray) else item % n
        for item, n in indexed
    ]
    flat = np.ravel_multi_index(
        tuple(np.ravel(a) for a in np.broadcast_arrays(*arrays)),
        tuple(n for _, n in indexed),
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
    return tuple(dummy(*x)[to_index(index)].shape), x[1]


def roll_of_arange(flat: np.ndarray) -> int | None:
    """The shift s if ``flat`` is ``np.roll(np.arange(len(flat)), s)``."""
    n = len(flat)
    if n < 2 or flat.dtype.kind not in "iu" or sorted(flat.tolist()) != list(range(n)):
        return None
    shift = (n - int(flat[0])) % n
    return shift if np.array_equal(flat, np.roll(np.arange(n), shift)) else None


def _rolled_axis(
    index: tuple[Any, ...], shape: tuple[int, ...]
) -> tuple[int, int] | None:
    """(axis, shift) if ``index`` is ``roll(arange(n), shift)`` on one whole axis."""
    full = ("slice", None, None, None)
    arrays = [i for i, item in enumerate(index) if isinstance(item, FrozenArray)]
    if len(arrays) != 1 or any(
        item != full for i, item in enumerate(index) if i != arrays[0]
    ):
        return None
    axis = arrays[0]
    values = index[axis].value
    if values.ndim != 1 or axis >= len(shape) or len(values) != shape[axis]:
        return None
    shift = roll_of_arange(values)
    if shift is None:
        return None
    return axis, shift - len(values) if shift > len(values) // 2 else shift


def _roll(x: Expr, shift: int, axis: int, ndim: int) -> Expr:
    where = "" if ndim == 1 else f", axis={axis}"
    return atom(f"np.roll({argument(x)}, {shift}{where})")


def _getitem_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr:
    """``x[index]``; over one whole axis, ``x[..., roll(arange(n), s), ...]`` is
    ``np.roll(x, s)``, which reads better and needs no index array."""
    shape = avals[0][0]
    rolled = _rolled_axis(params["index"], shape)
    if rolled is not None:
        return _roll(args[0], rolled[1], rolled[0], len(shape))
    return atom(f"{base(args[0])}[{index_source(params['index'])}]")


getitem_p = register(
    structural(
        name="getitem",
        impl=lambda x, index: np.asarray(x[to_index(index)]),
        numpy=_getitem_form,
        jvp=_getitem_jvp,
        transpose=_getitem_transpose,
        shape_rule=_getitem_shape,
        batch=_getitem_batch,
        sparsity=patterns.getitem,
        simplify=identities.getitem_identities,
        view=True,
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


def _scatter_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr | list[str]:
    """Zeros, then one assignment (or ``np.add.at`` where positions repeat); the
    transpose of a rolled read is ``np.roll(v, -s)``."""
    shape = tuple(params["shape"])
    rolled = _rolled_axis(params["index"], shape) if avals[0][0] == shape else None
    if rolled is not None:
        return _roll(args[0], -rolled[1], rolled[0], len(shape))
    idx, value = index_source(params["index"]), argument(args[0])
    if positions_unique(params["shape"], params["index"]):
        store = f"OUT[{idx}] = {value}"
    else:
        store = f"np.add.at(OUT, np.s_[{idx}], {value})"
    return [f"OUT = np.zeros({params['shape']!r}{precision.float_dtype_arg()})", store]


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
    region = dummy(tuple(shape), "float64")[to_index(index)].ndim
    value = _batch_axis_to_region(args[0], index, region)
    return scatter_add(value, _batched_index(index), (k, *shape))


scatter_add_p = register(
    structural(
        name="scatter_add",
        impl=_scatter_impl,
        numpy=_scatter_form,
        jvp=_scatter_jvp,
        transpose=_scatter_transpose,
        shape_rule=lambda value, index, shape: (tuple(shape), value[1]),
        batch=_scatter_batch,
        sparsity=patterns.scatter_add,
    )
)


identities.places_into_zeros(
    scatter_add_p, lambda eqn: ([eqn.inputs[0]], [eqn.params.as_dict()["index"]])
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


def _scatter_sum_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Any
) -> list[str]:
    """One zero buffer: the first writes of each position assign, later ones add."""
    shape = tuple(params["shape"])
    lines = [f"OUT = np.zeros({shape!r}{precision.float_dtype_arg()})"]
    size = int(np.prod(shape, dtype=np.int64))
    covered = np.zeros(shape, dtype=bool) if size <= _COVER_LIMIT else None
    for arg, index in zip(map(argument, args), params["indices"]):
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
        region = dummy(tuple(shape), "float64")[to_index(index)].ndim
        values.append(_batch_axis_to_region(batched_to(value, b, k), index, region))
    return scatter_sum(values, [_batched_index(i) for i in indices], (k, *shape))


scatter_sum_p = register(
    structural(
        name="scatter_sum",
        impl=_scatter_sum_impl,
        numpy=_scatter_sum_form,
        jvp=_scatter_sum_jvp,
        transpose=_scatter_sum_transpose,
        shape_rule=lambda *values, indices, shape: (tuple(shape), "float64"),
        batch=_scatter_sum_batch,
        sparsity=patterns.scatter_sum,
        cost="reducing",
    )
)


identities.places_into_zeros(
    scatter_sum_p,
    lambda eqn: (list(eqn.inputs), list(eqn.params.as_dict()["indices"])),
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


def _set_index_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Any
) -> list[str]:
    return [
        f"OUT = {base(args[0])}.copy()",
        f"OUT[{index_source(params['index'])}] = {argument(args[1])}",
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
    """The overwritten positions get no cotangent; the stored value gets theirs.

    Where the index repeats a position, the last write wins (as in NumPy), so only
    that element of the value receives the position's cotangent.
    """
    cx = set_index(ct, 0.0, index) if isinstance(x, Linear) else None
    if not isinstance(value, Linear):
        return [cx, None]
    shape = tuple(np.shape(ct))
    read = ct[to_index(index)]
    if not positions_unique(shape, index):
        read = read * last_writes(shape, index).astype(np.float64)
    return [cx, unbroadcast(read, value.shape)]


def last_writes(shape: tuple[int, ...], index: Any) -> np.ndarray:
    """A mask over the region ``x[index]``: True where an assignment through this
    index writes last to its position (NumPy's ``x[[0, 0]] = v``: ``v[1]`` wins)."""
    targets = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    flat = np.asarray(targets[to_index(index)]).ravel()
    last = np.zeros(flat.size, dtype=bool)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    last[flat.size - 1 - first_from_end] = True
    return last.reshape(np.shape(targets[to_index(index)]))


def _set_index_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """Assign behind a leading full slice into the batched array."""
    x = batched_to(args[0], batched[0], k)
    value = args[1]
    if batched[1]:
        region = dummy(tuple(np.shape(x))[1:], "float64")[to_index(index)].ndim
        value = _batch_axis_to_region(value, index, region)
    return set_index(x, value, _batched_index(index))


set_index_p = register(
    structural(
        name="set_index",
        impl=_set_index_impl,
        numpy=_set_index_form,
        jvp=_set_index_jvp,
        transpose=_set_index_transpose,
        shape_rule=lambda x, value, index: x,
        batch=_set_index_batch,
        sparsity=patterns.set_index,
    )
)


def set_index(x: Any, value: Any, index: Any) -> Any:
    """``out = x.copy(); out[index] = value``, traced or eager."""
    return bind(set_index_p, x, value, index=index)
