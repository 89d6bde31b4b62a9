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
from difgen.primitives.core import Linear, Primitive, register, unbroadcast


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
    """Whether ``x[index]`` reads each position of ``x`` at most once."""
    flat = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    taken = np.asarray(flat[to_index(frozen)]).ravel()
    return len(np.unique(taken)) == taken.size


def _getitem_jvp(out: Any, primals: list[Any], tangents: list[Any], index: Any) -> Any:
    """Linear."""
    return None if tangents[0] is None else tangents[0][to_index(index)]


def _getitem_transpose(ct: Any, x: Any, index: Any) -> list[Any]:
    """Scatter the cotangent back to the positions that were read."""
    return [scatter_add(ct, index, x.shape)]


getitem_p = register(
    Primitive(
        name="getitem",
        impl=lambda x, index: np.asarray(x[to_index(index)]),
        emit=lambda args, params: f"{args[0]}[{index_source(params['index'])}]",
        jvp=_getitem_jvp,
        transpose=_getitem_transpose,
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
        store = f"np.add.at(OUT, ({idx}), {args[0]})"
    return [f"OUT = np.zeros({params['shape']!r})", store]


def _scatter_jvp(
    out: Any, primals: list[Any], tangents: list[Any], **params: Any
) -> Any:
    """Linear."""
    return None if tangents[0] is None else scatter_add(tangents[0], **params)


def _scatter_transpose(ct: Any, value: Any, index: Any, shape: Any) -> list[Any]:
    """Read back the scattered positions."""
    return [unbroadcast(ct[to_index(index)], value.shape)]


scatter_add_p = register(
    Primitive(
        name="scatter_add",
        impl=_scatter_impl,
        emit=_scatter_emit,
        jvp=_scatter_jvp,
        transpose=_scatter_transpose,
        shape_rule=lambda value, index, shape: (tuple(shape), value[1]),
        linear=True,
    )
)


def scatter_add(value: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """``out = zeros(shape); out[index] += value``, traced or eager."""
    from difgen.frontend.tracer import bind

    return bind(scatter_add_p, value, index=index, shape=tuple(shape))


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
    dx = np.zeros(np.shape(out)) if dx is None else dx
    dv = np.zeros(np.shape(primals[1])) if dv is None else dv
    return set_index(dx, dv, index)


def _set_index_transpose(ct: Any, x: Any, value: Any, index: Any) -> list[Any]:
    """The overwritten positions get no cotangent; the stored value gets theirs."""
    cx = set_index(ct, np.zeros(()), index) if isinstance(x, Linear) else None
    cv = (
        unbroadcast(ct[to_index(index)], value.shape)
        if isinstance(value, Linear)
        else None
    )
    return [cx, cv]


set_index_p = register(
    Primitive(
        name="set_index",
        impl=_set_index_impl,
        emit=_set_index_emit,
        jvp=_set_index_jvp,
        transpose=_set_index_transpose,
        shape_rule=lambda x, value, index: x,
        linear=True,
    )
)


def set_index(x: Any, value: Any, index: Any) -> Any:
    """``out = x.copy(); out[index] = value``, traced or eager."""
    from difgen.frontend.tracer import bind

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


register(
    Primitive(
        name="reshape",
        impl=lambda x, shape: np.reshape(x, shape),
        emit=lambda args, params: f"np.reshape({args[0]}, {tuple(params['shape'])!r})",
        jvp=_reshape_jvp,
        transpose=lambda ct, x, shape: [np.reshape(ct, x.shape)],
        shape_rule=lambda x, shape: (tuple(shape), x[1]),
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


register(
    Primitive(
        name="concatenate",
        impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
        emit=lambda args, params: f"np.concatenate(({', '.join(args)},), axis={params['axis']})",
        jvp=_concat_jvp,
        transpose=_concat_transpose,
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
    positions = np.arange(len(elements)).reshape(shape)
    return [
        (
            ct[tuple(int(i) for i in np.argwhere(positions == k)[0])]
            if isinstance(e, Linear)
            else None
        )
        for k, e in enumerate(elements)
    ]


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
        linear=True,
    )
)


def pack(elements: list[Any], shape: tuple[int, ...]) -> Any:
    """``np.array`` of scalars (traced or not) laid out in ``shape``."""
    from difgen.frontend.tracer import bind

    return bind(pack_p, *elements, shape=tuple(shape))
