"""Selector primitives: NumPy's float comparisons and ``where``.

The comparisons' SymPy heads (``NpLess``...) are in
:mod:`difgen.primitives.heads.elementwise`, below every family whose derivatives
use them."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core import simplify as identities
from difgen.core.expr import call, infix
from difgen.core.primitive import (
    SELECT_LOOP,
    Deferred,
    Linear,
    register,
    unbroadcast,
)
from difgen.primitives import patterns
from difgen.primitives.elementwise import _broadcast_to
from difgen.primitives.family import elementwise, selector

HEADS = "difgen.primitives.heads.elementwise"

SELECTORS = [
    selector("lt", np.less, infix("<"), sympy=Deferred(f"{HEADS}:NpLess")),
    selector("le", np.less_equal, infix("<="), sympy=Deferred(f"{HEADS}:NpLessEqual")),
    selector("gt", np.greater, infix(">"), sympy=Deferred(f"{HEADS}:NpGreater")),
    selector(
        "ge", np.greater_equal, infix(">="), sympy=Deferred(f"{HEADS}:NpGreaterEqual")
    ),
    selector(
        "eq",
        np.equal,
        infix("=="),
        sympy=Deferred(f"{HEADS}:NpEqual"),
        commutative=True,
    ),
    selector(
        "ne",
        np.not_equal,
        infix("!="),
        sympy=Deferred(f"{HEADS}:NpNotEqual"),
        commutative=True,
    ),
    selector(
        "logical_and",
        np.logical_and,
        call("np.logical_and({0}, {1})"),
        sympy=Deferred("sympy:And"),
        commutative=True,
    ),
    selector(
        "logical_or",
        np.logical_or,
        call("np.logical_or({0}, {1})"),
        sympy=Deferred("sympy:Or"),
        commutative=True,
    ),
    selector(
        "logical_not",
        np.logical_not,
        call("np.logical_not({0})"),
        sympy=Deferred("sympy:Not"),
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


where_p = register(
    elementwise(
        "where",
        np.where,
        call("np.where({0}, {1}, {2})"),
        arity=3,
        jvp=_where_jvp,
        transpose=_where_transpose,
        sympy=Deferred("difgen.primitives.heads.selectors:_sym_where"),
        simplify=identities.where_identities,
        sparsity=patterns.selected,
        c_loop=SELECT_LOOP,
    )
)
