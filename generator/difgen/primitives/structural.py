"""Structural primitives: they move, copy or join elements without arithmetic.

All are linear: reshape, transpose, broadcast_to, concatenate, pad, pack (``np.array``
of scalars), and the ``basis`` seed. Indexing (getitem, scatters, set_index) is in
:mod:`difgen.primitives.indexing`; its names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen import precision
from difgen.core import simplify as identities
from difgen.core.batching import batched_to, lift_batched
from difgen.core.expr import Expr, argument, atom, base
from difgen.core.indexing import to_index
from difgen.core.primitive import (
    NO_HELPER,
    NO_IDENTITIES,
    NO_INPUTS,
    NOT_DIFFERENTIABLE,
    NOT_LINEAR,
    Linear,
    Primitive,
    no_loop_form,
    register,
    unbroadcast,
)
from difgen.core.tracer import bind
from difgen.primitives import patterns
from difgen.primitives.family import size_work, structural
from difgen.primitives.indexing import (  # noqa: F401  (re-exported)
    advanced_first,
    getitem_p,
    index_source,
    positions_unique,
    scatter_add,
    scatter_add_p,
    scatter_sum,
    scatter_sum_p,
    set_index,
    set_index_p,
)


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


def _reshape_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    return atom(f"np.reshape({argument(args[0])}, {tuple(params['shape'])!r})")


def _transpose_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """A full reversal is ``.T`` (of an atom)."""
    axes = tuple(params["axes"])
    if axes == tuple(reversed(range(len(axes)))):
        return atom(f"{base(args[0])}.T")
    return atom(f"np.transpose({argument(args[0])}, {axes!r})")


def _broadcast_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    return atom(f"np.broadcast_to({argument(args[0])}, {tuple(params['shape'])!r})")


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
    structural(
        name="reshape",
        impl=lambda x, shape: np.reshape(x, shape),
        numpy=_reshape_src,
        jvp=_reshape_jvp,
        transpose=lambda ct, x, shape: [np.reshape(ct, x.shape)],
        shape_rule=lambda x, shape: (tuple(shape), x[1]),
        batch=_reshape_batch,
        sparsity=patterns.reshape,
        simplify=identities.reshape_identities,
        view=True,
    )
)
register(
    structural(
        name="transpose",
        impl=lambda x, axes: np.transpose(x, axes),
        numpy=_transpose_src,
        jvp=_transpose_jvp,
        transpose=lambda ct, x, axes: [np.transpose(ct, tuple(np.argsort(axes)))],
        shape_rule=_transpose_shape,
        batch=_transpose_batch,
        sparsity=patterns.transpose,
        simplify=identities.transpose_identities,
        view=True,
    )
)
register(
    structural(
        name="broadcast_to",
        impl=lambda x, shape: np.broadcast_to(x, shape),
        numpy=_broadcast_src,
        jvp=_broadcast_jvp,
        transpose=lambda ct, x, shape: [unbroadcast(ct, x.shape)],
        shape_rule=lambda x, shape: (tuple(shape), x[1]),
        batch=_broadcast_batch,
        sparsity=patterns.broadcast_to,
        simplify=identities.broadcast_to_identities,
        view=True,
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


def _concat_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """The pieces as a tuple (a one-piece tuple keeps its comma)."""
    items = ", ".join(map(argument, args)) + ("," if len(args) == 1 else "")
    return atom(f"np.concatenate(({items}), axis={params['axis']})")


def _concat_batch(args: Any, batched: Any, k: int, axis: int) -> Any:
    """Unbatched pieces are broadcast; the axis moves up by one."""
    parts = [batched_to(a, b, k) for a, b in zip(args, batched)]
    return np.concatenate(parts, axis=axis + 1)


def _concat_shape(*xs: Any, axis: int) -> Any:
    shape = list(xs[0][0])
    shape[axis] = sum(x[0][axis] for x in xs)
    return tuple(shape), xs[0][1]


register(
    structural(
        name="concatenate",
        impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
        numpy=_concat_src,
        jvp=_concat_jvp,
        transpose=_concat_transpose,
        shape_rule=_concat_shape,
        batch=_concat_batch,
        sparsity=patterns.concatenate,
        simplify=identities.concatenate_identities,
    )
)


def _pad_transpose(ct: Any, x: Any, widths: Any) -> list[Any]:
    """Cut the padding off again."""
    index = tuple(("slice", lo, lo + n, None) for (lo, _), n in zip(widths, x.shape))
    return [ct[to_index(index)]]


def _pad_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    return atom(f"np.pad({argument(args[0])}, {tuple(params['widths'])!r})")


register(
    structural(
        name="pad",
        impl=lambda x, widths: np.pad(x, widths),
        numpy=_pad_src,
        jvp=lambda out, primals, tangents, widths: (
            None if tangents[0] is None else np.pad(tangents[0], widths)
        ),
        transpose=_pad_transpose,
        shape_rule=lambda x, widths: (
            tuple(n + lo + hi for n, (lo, hi) in zip(x[0], widths)),
            x[1],
        ),
        batch=lambda args, batched, k, widths: np.pad(args[0], ((0, 0), *widths)),
        sparsity=patterns.pad,
    )
)


# ------------------------------------------------------------------------ pack
def _pack_src(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    """``np.array`` of a nested list literal of the scalars, laid out in ``shape``."""
    return atom(f"np.array({_nested_list(list(map(argument, args)), params['shape'])})")


def _nested_list(items: list[str], shape: Sequence[int]) -> str:
    """``items`` (row-major) as a nested list literal of ``shape``."""
    if not shape:
        return items[0]
    if shape[0] == 0:
        return "[]"
    step = len(items) // shape[0]
    rows = [items[i * step : (i + 1) * step] for i in range(shape[0])]
    return "[" + ", ".join(_nested_list(row, shape[1:]) for row in rows) + "]"


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
    structural(
        name="pack",
        impl=lambda *xs, shape: np.array(xs, dtype=np.float64).reshape(shape),
        numpy=_pack_src,
        jvp=_pack_jvp,
        transpose=_pack_transpose,
        sympy=_pack_objects,
        shape_rule=lambda *xs, shape: (tuple(shape), "float64"),
        batch=_pack_batch,
        sparsity=patterns.pack,
    )
)


def pack(elements: list[Any], shape: tuple[int, ...]) -> Any:
    """``np.array`` of scalars (traced or not) laid out in ``shape``."""
    return bind(pack_p, *elements, shape=tuple(shape))


# ----------------------------------------------------------------------- basis
def _basis_impl(shape: Any) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    return np.eye(n).reshape((n, *shape))


def _basis_form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
    shape = tuple(params["shape"])
    n = int(np.prod(shape, dtype=np.int64))
    dtype = precision.float_dtype_arg()
    if len(shape) == 1:
        return atom(f"np.eye({n}{dtype})")
    return atom(f"np.eye({n}{dtype}).reshape({(n, *shape)!r})")


def _basis_sympy(shape: Any) -> np.ndarray:
    import sympy as sp

    value = _basis_impl(shape)
    out = np.empty(value.shape, dtype=object)
    out.ravel()[:] = [sp.Integer(int(v)) for v in value.ravel()]
    return out


basis_p = Primitive(
    name="basis",
    impl=_basis_impl,
    shape_rule=lambda shape: ((int(np.prod(shape, dtype=np.int64)), *shape), "float64"),
    numpy=_basis_form,
    jvp=NOT_DIFFERENTIABLE,  # a constant: it has no inputs to carry tangents from
    transpose=NOT_LINEAR,
    batch=NO_INPUTS,
    sympy=_basis_sympy,
    simplify=NO_IDENTITIES,
    commutative=False,
    sparsity=patterns.no_dependence,  # a constant
    work=size_work,
    scalarizable=True,
    view=False,
    elementwise=False,
    c_loop=no_loop_form("a constant without inputs, folded before the loops"),
    scalar=NO_HELPER,
    cost="moving",
)
identities.makes_the_identity(basis_p)
"""The standard basis of an array of ``shape``, stacked: ``(size, *shape)``.

The seed of a jacobian or hessian over the input basis. It has no inputs and is not
registered with the tracer: the AD layer records it as a runtime constant (``np.eye``
in the emitted code), so an ``n x n`` identity is never folded into a literal.
"""
