"""Run-time primitives on integer data: the casts between float64 and int64
(``astype``) and integer arithmetic (an index computed from a context, ``idx + 1``,
``2 * idx - 1``, ``idx % n``).

Their rows are declared by :func:`difgen.primitives.runtime.runtime_row` (see that
module for what the run-time families share); none is differentiable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.expr import Aval, Expr, argument, atom, base, infix
from difgen.core.ir import FrozenArray
from difgen.core.primitive import (
    CAST_AT_BOUNDARY,
    NOT_DIFFERENTIABLE,
)
from difgen.core.tracer import Tracer, bind
from difgen.errors import DifgenError
from difgen.primitives import patterns
from difgen.primitives.runtime import Rule, bind_row, runtime_row


# ------------------------------------------------------------- conversions
def _unary_batch(name: str) -> Rule:
    def rule(args: Any, batched: Any, k: int, **params: Any) -> Any:
        """Elementwise: the batch axis rides along."""
        return bind_row(name, args[0], **params)

    return rule


def _cast_form(dtype: str) -> Rule:
    def form(args: Sequence[Expr], params: Mapping[str, Any], avals: Any) -> Expr:
        """``x.astype(np.<dtype>)``, as the user wrote it (NumPy's own cast: NaN
        and out-of-range floats become what NumPy makes of them, with its warning);
        a 0-d value may be a Python number, which has no ``astype``. The IR's
        float64 is the module's float type (:mod:`difgen.precision`)."""
        to = precision.module_float() if dtype == "float64" else dtype
        if avals[0][0] == ():
            return atom(f"np.asarray({argument(args[0])}).astype(np.{to})[()]")
        return atom(f"{base(args[0])}.astype(np.{to})")

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
    c_loop=CAST_AT_BOUNDARY,
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
