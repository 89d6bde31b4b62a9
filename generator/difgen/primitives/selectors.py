"""Selector primitives: NumPy's float comparisons and ``where``.

The comparisons' SymPy heads (``NpLess``...) are in
:mod:`difgen.primitives.elementwise`, below every family whose derivatives use them."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from difgen.core import simplify as identities
from difgen.core.expr import call, infix
from difgen.core.primitive import SELECT_LOOP, Linear, register, unbroadcast
from difgen.primitives import patterns
from difgen.primitives.elementwise import (
    NpEqual,
    NpGreater,
    NpGreaterEqual,
    NpLess,
    NpLessEqual,
    NpNotEqual,
    _broadcast_to,
)
from difgen.primitives.family import elementwise, selector

SELECTORS = [
    selector("lt", np.less, infix("<"), sympy=NpLess),
    selector("le", np.less_equal, infix("<="), sympy=NpLessEqual),
    selector("gt", np.greater, infix(">"), sympy=NpGreater),
    selector("ge", np.greater_equal, infix(">="), sympy=NpGreaterEqual),
    selector("eq", np.equal, infix("=="), sympy=NpEqual, commutative=True),
    selector("ne", np.not_equal, infix("!="), sympy=NpNotEqual, commutative=True),
    selector(
        "logical_and",
        np.logical_and,
        call("np.logical_and({0}, {1})"),
        sympy=sp.And,
        commutative=True,
    ),
    selector(
        "logical_or",
        np.logical_or,
        call("np.logical_or({0}, {1})"),
        sympy=sp.Or,
        commutative=True,
    ),
    selector(
        "logical_not",
        np.logical_not,
        call("np.logical_not({0})"),
        sympy=sp.Not,
        arity=1,
    ),
]

for _prim in SELECTORS:
    register(_prim)


def _where_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """The condition is constant; the tangent is selected like the value."""
    (cond, _, _), (_, da, db) = primals, tangents
    if da is None and db is None:
        return None
    tangent = np.where(cond, 0.0 if da is None else da, 0.0 if db is None else db)
    return _broadcast_to(tangent, np.shape(out))


def _where_transpose(ct: Any, cond: Any, a: Any, b: Any) -> list[Any]:
    """Route the cotangent to the branch that was selected."""
    ca = (
        unbroadcast(np.where(cond, ct, 0.0), a.shape) if isinstance(a, Linear) else None
    )
    cb = (
        unbroadcast(np.where(cond, 0.0, ct), b.shape) if isinstance(b, Linear) else None
    )
    return [None, ca, cb]


def _sym_where(c: Any, x: Any, y: Any) -> Any:
    """The branch a constant condition picks, else an unevaluated Piecewise."""
    if c in (True, sp.true):
        return x
    if c in (False, sp.false):
        return y
    return sp.Piecewise((x, c), (y, True), evaluate=False)  # keep c as written


where_p = register(
    elementwise(
        "where",
        np.where,
        call("np.where({0}, {1}, {2})"),
        arity=3,
        jvp=_where_jvp,
        transpose=_where_transpose,
        sympy=_sym_where,
        simplify=identities.where_identities,
        sparsity=patterns.selected,
        c_loop=SELECT_LOOP,
    )
)
