"""Binary elementwise primitives: arithmetic, powers, ``maximum``/``minimum`` and the
``hypot``/``arctan2`` family, NumPy broadcasting allowed.

Binary rows carry their JVP (and, where linear, their transpose).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core import simplify as identities
from difgen.core.expr import MUL, Expr, argument, atom, call, infix
from difgen.core.primitive import Deferred, Linear, LoopForm, register, unbroadcast
from difgen.core.tracer import bind_name
from difgen.primitives.elementwise import _add_tangents, _broadcast_to
from difgen.primitives.family import binary


# ---------------------------------------------------------------------- binary
def _add_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Sum of the tangents, broadcast to the output."""
    return _broadcast_to(_add_tangents(*tangents), np.shape(out))


def _sub_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Difference of the tangents, broadcast to the output."""
    da, db = tangents
    return _broadcast_to(_add_tangents(da, None if db is None else -db), np.shape(out))


def _mul_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Product rule."""
    (a, b), (da, db) = primals, tangents
    terms = [None if da is None else da * b, None if db is None else a * db]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _div_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Quotient rule written as (da - y db) / b."""
    (_, b), (da, db) = primals, tangents
    num = _add_tangents(da, None if db is None else -(out * db))
    return None if num is None else _broadcast_to(num / b, np.shape(out))


def _pow_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d(a^b) = b a^(b-1) da + log(a) a^b db.

    Where a = 0 the second term is 0 (a^b is 0 for every b > 0), not
    0 * log(0) = NaN: log reads 1 there, as in JAX.
    """
    (a, b), (da, db) = primals, tangents
    terms = [
        None if da is None else (b * a ** (b - 1.0)) * da,
        None if db is None else (np.log(np.where(a == 0.0, 1.0, a)) * out) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _arctan2_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d atan2(a, b) = (b da - a db) / h**2 (h = hypot(a, b)), written on the two
    ``hypot_slope`` values b / h**2 and a / h**2: ``a*a + b*b`` overflowed from
    1e154 on (the derivative read 0 where it is 5e-201 at 1e200) and underflowed
    below 1e-162, and the second derivatives are the slopes' own (no h**4)."""
    (a, b), (da, db) = primals, tangents
    terms = [
        None if da is None else _hypot_slope(b, a) * da,
        None if db is None else -(_hypot_slope(a, b) * db),
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _hypot_terms(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """For hypot's unit vector and slope, on NumPy values or tracers: the scale
    m = max(|a|, |b|) (1 where both are 0), r = hypot(1, min(|a|, |b|) / m), so
    that h = m r without forming h, and a / h = (a / m) / r, whose quotient a / m
    is sign(a) exactly where |a| >= |b| (inf included) and |a / m| <= 1: nothing
    overflows or underflows, subnormal inputs included (m is an input, exact)."""
    big, small = np.maximum(np.abs(a), np.abs(b)), np.minimum(np.abs(a), np.abs(b))
    m = np.where(big == 0.0, 1.0, big)
    ratio = np.where(np.abs(a) >= np.abs(b), np.sign(a), a / m)
    return ratio, np.hypot(1.0, small / m), m


def _hypot_unit_value(a: Any, b: Any) -> Any:
    """a / hypot(a, b), hypot's d/da: 0 at a = b = 0 (the smallest subgradient),
    sign(a) where a is infinite and b finite (the limit), NaN at a NaN."""
    ratio, r, _ = _hypot_terms(a, b)
    return ratio / r


def _hypot_slope_value(a: Any, b: Any) -> Any:
    """a / hypot(a, b)**2 = (a / h) / h, the d/da of log(hypot(a, b)), computed as
    ((a / m) / r) / r / m (:func:`_hypot_terms`): overflows only where the
    value does, never through h**2 (inf from h = 1e154) or a subnormal h."""
    ratio, r, m = _hypot_terms(a, b)
    return ratio / r / r / m


_HALVED = 2.0**1000
"""Above this scale, the sums and differences of :func:`_hypot_gap_value` are
formed on halves (exact there), so that ``b + a`` does not overflow."""


_LARGEST = float(np.finfo(np.float64).max)


def _hypot_gap_value(a: Any, b: Any) -> Any:
    """(b**2 - a**2) / h**4, the d/da of a / h**2 (and atan2's mixed second
    derivative), as the product ((b - a) / h**2) ((b + a) / h**2), each factor a
    quotient by m, r, r, m (:func:`_hypot_terms`): b - a is exact where a and b
    are close, so there is no cancellation of slopes (a / h**2 - b / h**2 lost
    5e6 ulps at (1, 1.0000001)). 0 where the scale is infinite and the other
    argument finite (the limit)."""
    _, r, m = _hypot_terms(a, b)
    huge = m > _HALVED
    half_a, half_b, half_m = a * 0.5, b * 0.5, m * 0.5
    diff = np.where(huge, (half_b - half_a) / half_m, (b - a) / m)
    total = np.where(huge, (half_b + half_a) / half_m, (b + a) / m)
    small = np.minimum(np.abs(a), np.abs(b))
    gap = (diff / r / r / m) * (total / r / r / m)
    return np.where(m == np.inf, 0.0 * (small / m), gap)


def _hypot_unit(a: Any, b: Any) -> Any:
    return bind_name("hypot_unit", a, b)


def _hypot_gap(a: Any, b: Any) -> Any:
    return bind_name("hypot_gap", a, b)


def _hypot_slope(a: Any, b: Any) -> Any:
    return bind_name("hypot_slope", a, b)


def _hypot_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d hypot(a, b) = u da + v db with the unit vector (u, v) = (a, b) / h, each
    a ``hypot_unit`` (exact at every finite input, 0 at a = b = 0: the smallest
    subgradient, and no NaN where the function itself is finite)."""
    (a, b), (da, db) = primals, tangents
    terms = [
        None if da is None else _hypot_unit(a, b) * da,
        None if db is None else _hypot_unit(b, a) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _hypot_unit_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d(a / h) = (b / h**2) (v da - u db): hypot's second derivatives are
    v (v / h), -u (v / h) and u (u / h), products of a unit component and a
    slope, each exact. Written b**2 / h**3 they overflowed (h**3 from h = 6e102)
    or underflowed, and 1 / h - a**2 / h**3 cancelled (33 ulps)."""
    (a, b), (da, db) = primals, tangents
    slope = _hypot_slope(b, a)
    terms = [
        None if da is None else (slope * _hypot_unit(b, a)) * da,
        None if db is None else -(slope * out) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _hypot_slope_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d(a / h**2) = (b**2 - a**2) / h**4 da - 2 (a / h**2)(b / h**2) db: a
    ``hypot_gap`` and a product of two slopes (hypot's third derivatives,
    atan2's second)."""
    (a, b), (da, db) = primals, tangents
    terms = [
        None if da is None else _hypot_gap(a, b) * da,
        None if db is None else -(2.0 * (out * _hypot_slope(b, a))) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _hypot_gap_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d((b**2 - a**2) / h**4), on the slopes g_a, g_b and the gap q itself:
    -(4 g_a g_b**2 + 2 g_a q) da + (4 g_a**2 g_b - 2 g_b q) db (hypot's fourth,
    atan2's third derivatives: these sums may cancel near |a| = |b|)."""
    (a, b), (da, db) = primals, tangents
    ga, gb = _hypot_slope(a, b), _hypot_slope(b, a)
    terms = [
        None if da is None else -(4.0 * (ga * (gb * gb)) + 2.0 * (ga * out)) * da,
        None if db is None else (4.0 * ((ga * ga) * gb) - 2.0 * (gb * out)) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _hypot_form(kind: str) -> Any:
    """The vector emission's NumPy expression of :func:`_hypot_unit_value`,
    :func:`_hypot_slope_value` or :func:`_hypot_gap_value` (``kind`` "unit",
    "slope" or "gap"; the same operations, in the same order)."""

    def form(args: Any, params: Any, avals: Any) -> Expr:
        a, b = (argument(e) for e in args)
        big = f"np.maximum(np.abs({a}), np.abs({b}))"
        small = f"np.minimum(np.abs({a}), np.abs({b}))"
        m = f"np.where({big} == 0.0, 1.0, {big})"
        ratio = f"np.where(np.abs({a}) >= np.abs({b}), np.sign({a}), ({a}) / {m})"
        r = f"np.hypot(1.0, {small} / {m})"
        if kind == "unit":
            return Expr(f"{ratio} / {r}", MUL)
        if kind == "slope":
            return Expr(f"{ratio} / {r} / {r} / {m}", MUL)
        huge, half = f"{m} > {_HALVED!r}", f"({m} * 0.5)"
        diff, total = (
            f"np.where({huge}, (({b}) * 0.5 {op} ({a}) * 0.5) / {half},"
            f" (({b}) {op} ({a})) / {m})"
            for op in "-+"
        )
        gap = f"({diff} / {r} / {r} / {m}) * ({total} / {r} / {r} / {m})"
        return atom(f"np.where({m} == np.inf, 0.0 * ({small} / {m}), {gap})")

    return form


def _select_jvp(pick_first: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """The tangent of whichever argument was selected (the first on ties)."""
        (a, b), (da, db) = primals, tangents
        if da is None and db is None:
            return None
        return _broadcast_to(
            np.where(
                pick_first(a, b),
                0.0 if da is None else da,
                0.0 if db is None else db,
            ),
            np.shape(out),
        )

    return jvp


def _add_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Broadcasting transposes to a sum over the broadcast axes."""
    return [unbroadcast(ct, x.shape) if isinstance(x, Linear) else None for x in (a, b)]


def _sub_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """As add, with the second cotangent negated."""
    ca = unbroadcast(ct, a.shape) if isinstance(a, Linear) else None
    cb = unbroadcast(-ct, b.shape) if isinstance(b, Linear) else None
    return [ca, cb]


def _mul_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Linear in exactly one argument: multiply by the other."""
    if isinstance(a, Linear):
        return [unbroadcast(ct * b, a.shape), None]
    return [None, unbroadcast(a * ct, b.shape)]


def _div_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Linear in the numerator only."""
    assert isinstance(a, Linear) and not isinstance(b, Linear)
    return [unbroadcast(ct / b, a.shape), None]


POWER_LOOP = LoopForm("elementwise", at_literals=((1, 0.5, "sqrt({0})"),))
"""``c_loop`` of ``pow``: NumPy's ``x ** 0.5`` is its ``sqrt`` loop (NaN at -inf
and -0.0 at -0.0, where C's ``pow(x, 0.5)`` gives inf and 0.0), so the C loops
write ``sqrt`` there."""

HEADS = "difgen.primitives.heads.binary"

BINARY = [
    binary(
        "add",
        np.add,
        infix("+"),
        jvp=_add_jvp,
        transpose=_add_transpose,
        sympy=operator.add,
        simplify=identities.add_identities,
        commutative=True,
    ),
    binary(
        "sub",
        np.subtract,
        infix("-"),
        jvp=_sub_jvp,
        transpose=_sub_transpose,
        sympy=operator.sub,
        simplify=identities.sub_identities,
    ),
    binary(
        "mul",
        np.multiply,
        infix("*"),
        jvp=_mul_jvp,
        transpose=_mul_transpose,
        sympy=operator.mul,
        simplify=identities.mul_identities,
        commutative=True,
    ),
    binary(
        "div",
        np.divide,
        infix("/"),
        jvp=_div_jvp,
        transpose=_div_transpose,
        sympy=operator.truediv,
        simplify=identities.div_identities,
    ),
    binary(
        "pow",
        np.power,
        infix("**"),
        jvp=_pow_jvp,
        sympy=Deferred(f"{HEADS}:_sympy_pow"),
        simplify=identities.pow_identities,
        c_loop=POWER_LOOP,
    ),
    binary(
        "arctan2",
        np.arctan2,
        call("np.arctan2({0}, {1})"),
        jvp=_arctan2_jvp,
        sympy=Deferred(f"{HEADS}:Atan2"),
    ),
    binary(
        "hypot",
        np.hypot,
        call("np.hypot({0}, {1})"),
        jvp=_hypot_jvp,
        sympy=Deferred(f"{HEADS}:NpHypot"),
    ),
    binary(
        "hypot_unit",
        _hypot_unit_value,
        _hypot_form("unit"),
        jvp=_hypot_unit_jvp,
        sympy=Deferred(f"{HEADS}:HypotUnit"),
    ),
    binary(
        "hypot_slope",
        _hypot_slope_value,
        _hypot_form("slope"),
        jvp=_hypot_slope_jvp,
        sympy=Deferred(f"{HEADS}:HypotSlope"),
    ),
    binary(
        "hypot_gap",
        _hypot_gap_value,
        _hypot_form("gap"),
        jvp=_hypot_gap_jvp,
        sympy=Deferred(f"{HEADS}:HypotGap"),
    ),
    binary(
        "maximum",
        np.maximum,
        call("np.maximum({0}, {1})"),
        jvp=_select_jvp(lambda a, b: a >= b),
        sympy=Deferred(f"{HEADS}:NpMaximum"),
        commutative=False,  # the second of equal values: 0.0 and -0.0 differ
    ),
    binary(
        "minimum",
        np.minimum,
        call("np.minimum({0}, {1})"),
        jvp=_select_jvp(lambda a, b: a <= b),
        sympy=Deferred(f"{HEADS}:NpMinimum"),
        commutative=False,  # the second of equal values: 0.0 and -0.0 differ
    ),
]

for _prim in BINARY:
    register(_prim)
