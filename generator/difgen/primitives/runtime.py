"""Primitives on data known only at run time: integer and boolean values, gathers and
scatter-adds through run-time index arrays, and the sort family.

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.expr import Aval, Expr, argument, atom, base, infix
from difgen.core.indexing import to_index
from difgen.core.ir import Atom, Eqn, FrozenArray
from difgen.core.primitive import (
    NO_HELPER,
    NO_IDENTITIES,
    NOT_DIFFERENTIABLE,
    NOT_LINEAR,
    Absent,
    Linear,
    Primitive,
    dummy,
    no_loop_form,
    register,
    unbroadcast,
)
from difgen.core.tracer import Tracer, bind
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
) -> Primitive:
    """A primitive that touches run-time indices: never lowered to SymPy (so never
    scalarized), no algebraic identities (integer arithmetic must not meet the float
    identities: ``a + a`` would become ``2.0 * a``)."""
    return register(
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
            c_loop=no_loop_form("run-time indices or integer data (NumPy's own)"),
            scalar=NO_HELPER,
            cost="opaque",
        )
    )


# ----------------------------------------------------------------- the index
def is_dyn(item: Any) -> bool:
    """Whether a frozen index item is a run-time index operand marker."""
    return isinstance(item, tuple) and len(item) == 2 and item[0] == "dyn"


def substitute(index: tuple[Any, ...], dyn: Sequence[Any]) -> tuple[Any, ...]:
    """The NumPy index: static items rebuilt, markers replaced by their operands."""
    static = to_index(tuple(None if is_dyn(i) else i for i in index))
    return tuple(dyn[i[1]] if is_dyn(i) else s for i, s in zip(index, static))


def _placeholders(index: tuple[Any, ...], shapes: Sequence[Any]) -> tuple[Any, ...]:
    """The index with each marker replaced by a constant of its operand's shape, for
    the static helpers that only need shapes (region rank, advanced-first)."""
    return tuple(
        FrozenArray(np.zeros(shapes[i[1]], dtype=np.int64)) if is_dyn(i) else i
        for i in index
    )


def _index_text(index: tuple[Any, ...], dyn: Sequence[Expr]) -> str:
    """Source of the index, run-time operands by their expressions."""
    parts = [
        argument(dyn[item[1]]) if is_dyn(item) else index_source((item,))
        for item in index
    ]
    return ", ".join(parts) if len(parts) > 1 else parts[0]


def _dyn_shapes(avals: Sequence[Aval]) -> list[tuple[int, ...]]:
    return [tuple(s) for s, _ in avals]


def _region_shape(
    shape: tuple[int, ...], index: tuple[Any, ...], dyn: Sequence[Aval]
) -> tuple[int, ...]:
    probe = _placeholders(index, _dyn_shapes(dyn))
    return tuple(dummy(tuple(shape), "float64")[to_index(probe)].shape)


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
    return atom(f"{base(args[0])}[{_index_text(params['index'], args[1:])}]")


def _gather_jvp(out: Any, primals: list[Any], tangents: list[Any], index: Any) -> Any:
    """Linear in the array: the tangent is read at the same run-time positions."""
    if tangents[0] is None:
        return None
    return gather(tangents[0], primals[1:], index)


def _gather_transpose(ct: Any, x: Any, *dyn: Any, index: Any) -> list[Any]:
    """The cotangent is added back at the positions read (repeats accumulate)."""
    return [scatter_add_dyn(ct, dyn, index, x.shape), *(None for _ in dyn)]


def _gather_batch(args: Any, batched: Any, k: int, index: Any) -> Any:
    """The array carries the batch: index behind a leading full slice."""
    _unbatched_indices("gather", batched[1:])
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
)


def gather(x: Any, dyn: Sequence[Any], index: tuple[Any, ...]) -> Any:
    """``x[index]`` with run-time index operands ``dyn`` at the ``("dyn", k)`` slots."""
    return bind(gather_p, x, *dyn, index=tuple(index))


# --------------------------------------------------------------- scatter-add
def _scatter_impl(value: Any, *dyn: Any, index: Any, shape: Any) -> Any:
    out = np.zeros(tuple(shape), dtype=np.float64)
    np.add.at(out, substitute(index, dyn), np.asarray(value))
    return out


def _scatter_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> list[str]:
    """Zeros, then ``np.add.at``, which adds once per repeated position (a plain
    ``OUT[idx] += v`` would add a repeated position once)."""
    index = _index_text(params["index"], args[1:])
    # NumPy's stubs type np.add.at's index as one array: a tuple index is valid
    # NumPy that they reject
    ignore = "  # type: ignore[arg-type]" if len(params["index"]) > 1 else ""
    return [
        f"OUT = np.zeros({tuple(params['shape'])!r})",
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
    """Scatter behind a leading full slice into ``(k, *shape)``."""
    _unbatched_indices("scatter_add_dyn", batched[1:])
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


# ------------------------------------------------------------- conversions
def _unary_batch(name: str) -> Rule:
    def rule(args: Any, batched: Any, k: int, **params: Any) -> Any:
        """Elementwise: the batch axis rides along."""
        return bind_row(name, args[0], **params)

    return rule


def bind_row(name: str, *args: Any, **params: Any) -> Any:
    """Bind one of this module's rows by name."""
    return bind(_ROWS[name], *args, **params)


def _cast_form(dtype: str) -> Rule:
    def form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
        """``x.astype(np.<dtype>)``, as the user wrote it (NumPy's own cast: NaN
        and out-of-range floats become what NumPy makes of them, with its warning);
        a 0-d value may be a Python number, which has no ``astype``."""
        if avals[0][0] == ():
            return atom(f"np.asarray({argument(args[0])}).astype(np.{dtype})[()]")
        return atom(f"{base(args[0])}.astype(np.{dtype})")

    return form


to_int64_p = runtime_row(
    "to_int64",
    lambda x: np.asarray(x).astype(np.int64),
    _cast_form("int64"),
    shape_rule=lambda x: (x[0], "int64"),
    jvp=NOT_DIFFERENTIABLE,
    batch=_unary_batch("to_int64"),
    sparsity=patterns.no_dependence,
)
to_float64_p = runtime_row(
    "to_float64",
    lambda x: np.asarray(x).astype(np.float64),
    _cast_form("float64"),
    shape_rule=lambda x: (x[0], "float64"),
    jvp=NOT_DIFFERENTIABLE,
    batch=_unary_batch("to_float64"),
    sparsity=patterns.no_dependence,
)


# -------------------------------------------------------- integer arithmetic
INT_OPS: dict[str, tuple[Callable[..., Any], str]] = {
    "add": (np.add, "+"),
    "sub": (np.subtract, "-"),
    "mul": (np.multiply, "*"),
    "floordiv": (np.floor_divide, "//"),
    "mod": (np.remainder, "%"),
    "maximum": (np.maximum, "np.maximum"),
    "minimum": (np.minimum, "np.minimum"),
}


def _const_value(const: Any) -> Any:
    return const.value if isinstance(const, FrozenArray) else const


def _int_operands(args: Sequence[Any], const: Any, swap: bool) -> list[Any]:
    if len(args) == 2:
        return list(args)
    value = np.asarray(_const_value(const), dtype=np.int64)
    return [value, args[0]] if swap else [args[0], value]


def _int_arith_impl(*args: Any, op: str, const: Any, swap: bool) -> Any:
    a, b = _int_operands([np.asarray(a, dtype=np.int64) for a in args], const, swap)
    return np.asarray(INT_OPS[op][0](a, b))


def _int_arith_shape(*avals: Aval, op: str, const: Any, swap: bool) -> Aval:
    shapes = [tuple(s) for s, _ in avals]
    if len(avals) == 1:
        shapes.append(tuple(np.shape(_const_value(const))))
    return tuple(np.broadcast_shapes(*shapes)), "int64"


def _int_arith_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr:
    exprs = list(args)
    if len(exprs) == 1:
        const = params["const"]
        text = repr(const) if isinstance(const, FrozenArray) else str(int(const))
        literal = atom(text if not text.startswith("-") else f"({text})")
        exprs = [literal, exprs[0]] if params["swap"] else [exprs[0], literal]
    symbol = INT_OPS[params["op"]][1]
    if symbol.startswith("np."):
        return atom(f"{symbol}({argument(exprs[0])}, {argument(exprs[1])})")
    if symbol in ("//", "%"):
        return Expr(f"{_operand(exprs[0], 'l')} {symbol} {_operand(exprs[1], 'r')}", 3)
    return infix(symbol)(exprs, params, avals)


def _operand(e: Expr, side: str) -> str:
    """An operand of ``//`` or ``%`` (multiplicative precedence)."""
    wrap = e.prec < 3 or (side == "r" and e.prec == 3)
    return f"({e.text})" if wrap else e.text


def _int_arith_batch(args: Any, batched: Any, k: int, **params: Any) -> Any:
    raise DifgenError("integer arithmetic on a batch of seeds (seeds are float64)")


int_arith_p = runtime_row(
    "int_arith",
    _int_arith_impl,
    _int_arith_form,
    shape_rule=_int_arith_shape,
    jvp=NOT_DIFFERENTIABLE,
    batch=_int_arith_batch,
    sparsity=patterns.no_dependence,
)


def int_arith(op: str, a: Any, b: Any) -> Any:
    """``a op b`` on integers, at least one a run-time int64 array, the other an
    int64 tracer or an integer constant (kept in the params so it prints as an
    int: a float literal would turn the result into floats)."""
    if isinstance(a, Tracer) and isinstance(b, Tracer):
        return bind(int_arith_p, a, b, op=op, const=None, swap=False)
    traced, const, swap = (a, b, False) if isinstance(a, Tracer) else (b, a, True)
    value = np.asarray(const)
    frozen: Any = int(value) if value.ndim == 0 else value.astype(np.int64)
    return bind(int_arith_p, traced, op=op, const=frozen, swap=swap)


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


# ----------------------------------------------------------------- masks
def _masked_impl(x: Any, mask: Any, op: str) -> Any:
    return np.asarray(getattr(np, op)(np.asarray(x)[np.asarray(mask)]))


def _masked_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr:
    """The user's own expression, so the summation order is NumPy's."""
    return atom(f"np.{params['op']}({base(args[0])}[{argument(args[1])}])")


def _mask_over(mask: Any, shape: tuple[int, ...]) -> Any:
    """A mask over the leading axes, broadcast over the trailing ones."""
    extra = len(shape) - np.ndim(mask)
    return np.reshape(mask, np.shape(mask) + (1,) * extra)


def _masked_jvp(out: Any, primals: list[Any], tangents: list[Any], op: str) -> Any:
    """Linear in the values."""
    return None if tangents[0] is None else masked_reduce(tangents[0], primals[1], op)


def _masked_transpose(ct: Any, x: Any, mask: Any, op: str) -> list[Any]:
    """The cotangent (over the count, for a mean) at the selected positions."""
    if op == "mean":
        count = bind_row("count_nonzero", mask)
        extra = int(np.prod(x.shape[np.ndim(mask) :], dtype=np.int64))
        ct = ct / (bind_row("to_float64", count) * float(extra))
    picked = np.where(_mask_over(mask, x.shape), ct, 0.0)
    return [np.broadcast_to(picked, x.shape), None]


def _masked_batch(args: Any, batched: Any, k: int, op: str) -> Any:
    """A batch of tangents (the mask is primal, never batched): the masked sum of
    each, as ``sum(where(mask, t, 0))`` over the non-batch axes (a derivative, so
    NumPy's summation order of the selection need not be kept)."""
    _unbatched_indices("masked_reduce", batched[1:])
    t, mask = args
    picked = np.where(_mask_over(mask, tuple(np.shape(t))[1:]), t, 0.0)
    total = np.sum(picked, axis=tuple(range(1, np.ndim(t))))
    if op == "sum":
        return total
    count = bind_row("to_float64", bind_row("count_nonzero", mask))
    extra = int(np.prod(np.shape(t)[1 + np.ndim(mask) :], dtype=np.int64))
    return total / (count * float(extra))


def _masked_shape(x: Aval, mask: Aval, op: str) -> Aval:
    if mask[1] != "bool" or tuple(x[0][: len(mask[0])]) != tuple(mask[0]):
        raise ValueError(f"mask {mask} does not select from {x}")
    return (), "float64"


masked_reduce_p = runtime_row(
    "masked_reduce",
    _masked_impl,
    _masked_form,
    shape_rule=_masked_shape,
    jvp=_masked_jvp,
    transpose=_masked_transpose,
    batch=_masked_batch,
    sparsity=patterns.all_inputs,
)


def masked_reduce(x: Any, mask: Any, op: str) -> Any:
    """``np.sum(x[mask])`` or ``np.mean(x[mask])`` with a run-time mask."""
    return bind(masked_reduce_p, x, mask, op=op)


def _count_batch(args: Any, batched: Any, k: int) -> Any:
    raise DifgenError("counting a run-time mask over a batch of seeds")


count_nonzero_p = runtime_row(
    "count_nonzero",
    lambda mask: np.asarray(np.count_nonzero(mask), dtype=np.int64),
    lambda args, params, avals: atom(
        f"np.int64(np.count_nonzero({argument(args[0])}))"
    ),
    shape_rule=lambda mask: ((), "int64"),
    jvp=NOT_DIFFERENTIABLE,
    batch=_count_batch,
    sparsity=patterns.no_dependence,
)

_ROWS = {
    p.name: p
    for p in (
        gather_p,
        scatter_add_dyn_p,
        set_index_dyn_p,
        to_int64_p,
        to_float64_p,
        int_arith_p,
        argsort_p,
        argmax_p,
        argmin_p,
        sort_p,
        median_p,
        quantile_p,
        cum_extreme_p,
        masked_reduce_p,
        count_nonzero_p,
    )
}
RUNTIME_PRIMITIVES = frozenset(_ROWS)
"""The rows whose graphs cannot be scalarized (see :data:`RUNTIME_INDEX`)."""


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
