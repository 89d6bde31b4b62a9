"""Elementwise primitives: logaddexp, rounding and modulo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.expr import call
from difgen.core.primitive import NO_HELPER, Deferred, register
from difgen.primitives import patterns
from difgen.primitives.elementwise import _add_tangents, _broadcast_to
from difgen.primitives.family import PIECEWISE_CONSTANT, binary, unary


# ------------------------------------------- logaddexp, rounding and modulo
def _modulo_jvp(quotient: Callable[[Any], Any]) -> Callable[..., Any]:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """d(a mod b) = da - q(a / b) db, with q floor (remainder) or trunc (fmod):
        the quotient is piecewise constant, so only its factor on b moves."""
        (a, b), (da, db) = primals, tangents
        terms = [da, None if db is None else -(quotient(a / b) * db)]
        return _broadcast_to(_add_tangents(*terms), np.shape(out))

    return jvp


def _logaddexp_weights(a: Any, b: Any, power: Callable[[Any], Any]) -> Any:
    """The weights (e_a / s, e_b / s) of logaddexp's derivative, the softmax of
    a and b, on NumPy values or tracers (``power`` is base**x; the SymPy heads
    have their own, :func:`difgen.primitives.heads.rounding._logaddexp_weights`):
    e_a, e_b are base**(a - max) and base**(b - max), one of them exactly 1, and
    s = e_a + e_b is in [1, 2]. Not base**(a - y): y = logaddexp(a, b) rounds,
    and at |y| = 1000 its last bit is 500 ulps of the weight (1/2 exactly at
    a == b now). Their derivatives are cancellation-free: the weight of the
    larger argument is 1 / s with e = 1 constant, so d(p) = p q (da - db) is
    formed as a product (it was p - p**2, 0 where it is 4e-18 at (40, 0))."""
    first = a >= b
    ea = power(np.where(first, 0.0, a - b))
    eb = power(np.where(first, b - a, 0.0))
    total = ea + eb
    return ea / total, eb / total


def _logaddexp_jvp(base: float) -> Callable[..., Any]:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """dy = w_a da + w_b db with the weights of :func:`_logaddexp_weights`
        (the softmax of a and b): 1/2 each where a == b, never an overflow."""
        (a, b), (da, db) = primals, tangents
        weights = _logaddexp_weights(a, b, lambda x: _power_of(base, x))
        terms = [
            None if d is None else w * d for w, d in zip(weights, (da, db), strict=True)
        ]
        return _broadcast_to(_add_tangents(*terms), np.shape(out))

    return jvp


def _power_of(base: float, x: Any) -> Any:
    return np.exp(x) if base == np.e else base**x


HEADS = "difgen.primitives.heads.rounding"

ROUNDING = [
    binary(
        "logaddexp",
        np.logaddexp,
        call("np.logaddexp({0}, {1})"),
        jvp=_logaddexp_jvp(np.e),
        sympy=Deferred(f"{HEADS}:NpLogaddexp"),
        commutative=True,
    ),
    binary(
        "logaddexp2",
        np.logaddexp2,
        call("np.logaddexp2({0}, {1})"),
        jvp=_logaddexp_jvp(2.0),
        sympy=Deferred(f"{HEADS}:NpLogaddexp2"),
        commutative=True,
    ),
    unary(
        "floor",
        np.floor,
        call("np.floor({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=Deferred(f"{HEADS}:NpFloor"),
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "ceil",
        np.ceil,
        call("np.ceil({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=Deferred(f"{HEADS}:NpCeil"),
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "trunc",
        np.trunc,
        call("np.trunc({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=Deferred(f"{HEADS}:NpTrunc"),
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "rint",
        np.rint,
        call("np.rint({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=Deferred(f"{HEADS}:NpRint"),
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    binary(
        "remainder",
        np.remainder,
        call("np.remainder({0}, {1})"),
        jvp=_modulo_jvp(np.floor),
        sympy=Deferred(f"{HEADS}:NpRemainder"),
    ),
    binary(
        "fmod",
        np.fmod,
        call("np.fmod({0}, {1})"),
        jvp=_modulo_jvp(np.trunc),
        sympy=Deferred(f"{HEADS}:NpFmod"),
    ),
]

for _prim in ROUNDING:
    register(_prim)
