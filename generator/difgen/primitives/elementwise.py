"""Elementwise primitives: one row per function, NumPy broadcasting allowed.

Unary rows carry the derivative as NumPy code on the input ``x`` and the output ``y``;
binary rows carry their JVP. Compound NumPy functions (``log2``, ``square``,
``hypot``...) are written in terms of these in :mod:`difgen.frontend.numpy_api`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import sympy as sp
from sympy.codegen import cfunctions  # log1p, expm1: exact near 0, unlike log(1 + x)
from sympy.logic.boolalg import BooleanFunction

from difgen.core import simplify as identities
from difgen.core.expr import MUL, Expr, argument, atom, call, infix, negation
from difgen.core.primitive import (
    NO_HELPER,
    SELECT_LOOP,
    UFUNC_LOOP,
    Linear,
    LoopForm,
    register,
    unbroadcast,
)
from difgen.core.tracer import bind_name
from difgen.primitives import patterns
from difgen.primitives.family import (
    PIECEWISE_CONSTANT,
    binary,
    elementwise,
    selector,
    unary,
)


def _add_tangents(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _broadcast_to(t: Any, shape: tuple[int, ...]) -> Any:
    if t is None or np.shape(t) == shape:
        return t
    return np.broadcast_to(t, shape)


# ----------------------------------------------------------------------- unary
class NpCbrt(sp.Function):
    """``np.cbrt`` as an opaque SymPy head, printed as C's ``cbrt`` and Python's
    ``math.cbrt`` (its scalar helper family is ``safe``: it never raises). Written
    ``sign(x) * |x| ** (1/3)`` it was printed as a power, 61 ulps from NumPy at
    1e308. Named ``cbrt``, the name the printers' function tables know."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        return 1 / (3 * self * self)


NpCbrt.__name__ = "cbrt"


class PiecewiseConstantSign(sp.sign):
    """SymPy's ``sign`` with derivative 0, as the trace backend's
    (``PIECEWISE_CONSTANT``): SymPy's own is ``2 DiracDelta(x)``, printed 0.0, so
    the derivative of ``sign(x) * x`` was ``2 x * 0.0 + sign(x)``, NaN from
    x = 9e307 on (2 x overflows). Named ``sign``: the printers print it as SymPy's."""

    def _eval_derivative(self, x: Any) -> Any:
        return sp.S.Zero


PiecewiseConstantSign.__name__ = "sign"


class FloatHelperCall:
    """Mixin of a SymPy head that scalar code prints as a call of its
    :mod:`difgen.floats` helper ``float_helper`` (one name in the Python and the C
    runtime), through SymPy's print hook: the target fact sits beside the
    declaration, and the printer (the float printer or its C subclass) provides
    ``_call``, which records the helper it named."""

    float_helper: ClassVar[str] = ""
    args: tuple[Any, ...]

    def _pythoncode(self, printer: Any) -> str:
        operands = [printer._print(arg) for arg in self.args]
        return str(printer._call(self.float_helper, *operands))


def _sech_squared(x: Any, y: Any) -> Any:
    """tanh'(x) = sech(x)**2, right to a few ulps for every x: ``1 - y*y`` is 0
    from |x| = 19.1 on, where tanh rounds to 1 (tanh'(20) = 1.7e-17), and
    ``1 / cosh(x)**2`` overflows to 0 from |x| = 355. Below |x| = 1/2, ``1 - y*y``
    (y*y < 0.22: no cancellation); above, ``4 e / (1 + e)**2`` with e = exp(-2|x|)
    in (0, 0.37), where nothing overflows; NaN stays NaN, +-inf gives 0. Each
    branch's own derivative (second order) is as exact: ``-2 y y'`` near 0, and
    ``-8 sign(x) e (1 - e) / (1 + e)**3`` without cancellation (1 - e > 0.63)."""
    e = np.exp(-2.0 * np.abs(x))
    return np.where(np.abs(x) < 0.5, 1.0 - y * y, 4.0 * e / ((1.0 + e) * (1.0 + e)))


class SechSquared(FloatHelperCall, sp.Function):
    """sech(x)**2, the derivative of :class:`SechSquaredTanh`: an opaque head, so
    that the SymPy backend's expansion cannot rewrite its form into one that
    overflows (``4 / (exp(2|x|) + 2 + exp(-2|x|))``); printed as the
    ``4 e / (1 + e)**2`` of :func:`_sech_squared` (the same value to a few ulps
    at every x, e = exp(-2|x|) <= 1). Its derivative ``-2 tanh(x) sech(x)**2`` is
    exact at every x too (tanh is, and no term cancels)."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        return -2 * SechSquaredTanh(self.args[0]) * self

    def _pythoncode(self, printer: Any) -> str:
        e = sp.exp(-2 * sp.Abs(self.args[0]))
        return str(printer._print(4 * e / ((1 + e) * (1 + e))))


class SechSquaredTanh(sp.tanh):
    """SymPy's ``tanh`` whose derivative is :class:`SechSquared` (SymPy's own,
    ``1 - tanh(x)**2``, is 0 from |x| = 19.1 on). Named ``tanh`` so that every
    printer and the scalar helper families treat it as SymPy's."""

    def fdiff(self, argindex: int = 1) -> Any:
        return SechSquared(self.args[0])


SechSquaredTanh.__name__ = "tanh"

UNARY = [
    unary(
        "sin",
        np.sin,
        call("np.sin({0})"),
        deriv=lambda x, y: np.cos(x),
        sympy=sp.sin,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "cos",
        np.cos,
        call("np.cos({0})"),
        deriv=lambda x, y: -np.sin(x),
        sympy=sp.cos,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "tan",
        np.tan,
        call("np.tan({0})"),
        deriv=lambda x, y: 1.0 + y * y,
        sympy=sp.tan,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arcsin",
        np.arcsin,
        call("np.arcsin({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(1.0 - x * x),
        sympy=sp.asin,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arccos",
        np.arccos,
        call("np.arccos({0})"),
        deriv=lambda x, y: -1.0 / np.sqrt(1.0 - x * x),
        sympy=sp.acos,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arctan",
        np.arctan,
        call("np.arctan({0})"),
        deriv=lambda x, y: 1.0 / (1.0 + x * x),
        sympy=sp.atan,
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "sinh",
        np.sinh,
        call("np.sinh({0})"),
        deriv=lambda x, y: np.cosh(x),
        sympy=sp.sinh,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "cosh",
        np.cosh,
        call("np.cosh({0})"),
        deriv=lambda x, y: np.sinh(x),
        sympy=sp.cosh,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "tanh",
        np.tanh,
        call("np.tanh({0})"),
        deriv=_sech_squared,
        sympy=SechSquaredTanh,
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "arcsinh",
        np.arcsinh,
        call("np.arcsinh({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(x * x + 1.0),
        sympy=sp.asinh,
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "arccosh",
        np.arccosh,
        call("np.arccosh({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(x * x - 1.0),
        sympy=sp.acosh,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arctanh",
        np.arctanh,
        call("np.arctanh({0})"),
        deriv=lambda x, y: 1.0 / (1.0 - x * x),
        sympy=sp.atanh,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "exp",
        np.exp,
        call("np.exp({0})"),
        deriv=lambda x, y: y,
        sympy=sp.exp,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "expm1",
        np.expm1,
        call("np.expm1({0})"),
        deriv=lambda x, y: y + 1.0,
        sympy=cfunctions.expm1,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "log",
        np.log,
        call("np.log({0})"),
        deriv=lambda x, y: 1.0 / x,
        sympy=sp.log,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    # log2, log10, exp2 are NumPy's own: log(x) * (1 / log 2) or 2.0 ** x differ in
    # the last bit.
    unary(
        "log2",
        np.log2,
        call("np.log2({0})"),
        deriv=lambda x, y: (1.0 / math.log(2.0)) / x,
        sympy=cfunctions.log2,
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "log10",
        np.log10,
        call("np.log10({0})"),
        deriv=lambda x, y: (1.0 / math.log(10.0)) / x,
        sympy=cfunctions.log10,
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "exp2",
        np.exp2,
        call("np.exp2({0})"),
        deriv=lambda x, y: y * math.log(2.0),
        sympy=cfunctions.exp2,
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "log1p",
        np.log1p,
        call("np.log1p({0})"),
        deriv=lambda x, y: 1.0 / (1.0 + x),
        sympy=cfunctions.log1p,
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "sqrt",
        np.sqrt,
        call("np.sqrt({0})"),
        deriv=lambda x, y: 0.5 / y,
        sympy=sp.sqrt,
        scalar="fast",
    ),
    unary(
        "cbrt",
        np.cbrt,
        call("np.cbrt({0})"),
        deriv=lambda x, y: 1.0 / (3.0 * y * y),
        sympy=NpCbrt,
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "abs",
        np.abs,
        call("np.absolute({0})"),
        deriv=lambda x, y: np.sign(x),
        sympy=sp.Abs,
        scalar=NO_HELPER,
    ),
    unary(
        "sign",
        np.sign,
        call("np.sign({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=PiecewiseConstantSign,
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
]

for _prim in UNARY:
    register(_prim)


def _neg_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Linear: the tangent is negated."""
    return None if tangents[0] is None else -tangents[0]


def _neg_transpose(ct: Any, x: Any) -> list[Any]:
    """Self-adjoint up to sign."""
    return [-ct]


neg_p = register(
    elementwise(
        "neg",
        np.negative,
        negation,
        arity=1,
        jvp=_neg_jvp,
        transpose=_neg_transpose,
        sympy=operator.neg,
        simplify=identities.neg_identities,
    )
)


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


class SymbolicPower(sp.Function):
    """``a ** b`` with a symbolic exponent, whose derivative in ``b`` is
    ``a ** b * log(a)`` except at a = 0, where it is 0 (as :func:`_pow_jvp`):
    SymPy's own ``0 ** y * log(0)`` is NaN where the function is 0 and smooth.

    The derivative in ``a``, ``b * a ** (b - 1)``, is a SymbolicPower again: as a
    SymPy ``Pow`` its own derivatives would be SymPy's, ``a ** (b - 1) * (b - 1) / a``
    and ``a ** (b - 1) * log(a)``, each 0 * inf = NaN at a = 0, where (for b > 2,
    b > 1) the second derivatives are 0 (as the trace backend gives)."""

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None  # stays a SymbolicPower: the derivative needs the head

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        if argindex == 1:
            return b * SymbolicPower(a, b - 1)
        return self * sp.log(sp.Piecewise((sp.S.One, sp.Eq(a, 0)), (a, True)))


def _sympy_pow(a: Any, b: Any) -> Any:
    """``a ** b`` on SymPy values; a symbolic exponent keeps a SymbolicPower."""
    b = sp.sympify(b)
    return sp.Pow(a, b) if b.is_number else SymbolicPower(a, b)


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


class Atan2(sp.atan2):
    """SymPy's ``atan2`` whose derivatives are :class:`HypotSlope` values (as
    :func:`_arctan2_jvp`); SymPy's own, ``b / (a**2 + b**2)``, overflows. Named
    ``atan2``, the name the printers' function tables know."""

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        return HypotSlope(b, a) if argindex == 1 else -HypotSlope(a, b)


Atan2.__name__ = "atan2"


class NpMaximum(FloatHelperCall, sp.Function):
    """``np.maximum(a, b)`` in the argument order of the user's code.

    SymPy's ``Max`` keeps its arguments as a set and sorts them, and NumPy's
    maximum is not symmetric: on equal values it returns the second argument, so
    ``maximum(0.0, -0.0)`` is ``-0.0`` and ``maximum(-0.0, 0.0)`` is ``0.0``. This
    head keeps the order; printed as the ``_maximum`` helper of ``floats``. Its
    derivative is SymPy's ``Max``'s (a step, 1/2 on ties).
    """

    nargs = 2
    float_helper = "_maximum"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args if argindex == 1 else self.args[::-1]
        return sp.Heaviside(a - b)


class NpMinimum(FloatHelperCall, sp.Function):
    """``np.minimum(a, b)`` in the user's argument order (see :class:`NpMaximum`)."""

    nargs = 2
    float_helper = "_minimum"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args if argindex == 1 else self.args[::-1]
        return sp.Heaviside(b - a)


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


class _HypotHead(sp.Function):
    """A SymPy head of hypot's derivatives, opaque (so that no rewriting forms
    h**2 or h**3), printed in Python and C as the operations of its NumPy value
    (:func:`_hypot_unit_value`...), composed as text so that the order of the
    divisions is the one written."""

    nargs = 2
    kind: ClassVar[str] = "unit"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def _pythoncode(self, printer: Any) -> str:
        a, b = self.args
        big, small = NpMaximum(sp.Abs(a), sp.Abs(b)), NpMinimum(sp.Abs(a), sp.Abs(b))
        m = printer._print(sp.Piecewise((sp.S.One, NpEqual(big, 0)), (big, True)))
        # the quotients are placed as text: SymPy writes x / Piecewise(...) as
        # x * Piecewise(1 / ...), and 1 / m overflows at a subnormal m
        hole = sp.Symbol("_DIFGEN_QUOTIENT_")

        def fill(expr: Any, text: str) -> str:
            return str(printer._print(expr)).replace(hole.name, text)

        pa, pb = printer._print(a), printer._print(b)
        ratio = fill(
            sp.Piecewise(
                (sp.sign(a), NpGreaterEqual(sp.Abs(a), sp.Abs(b))), (hole, True)
            ),
            f"({pa}) / ({m})",
        )
        r = fill(NpHypot(1, hole), f"({printer._print(small)}) / ({m})")
        if self.kind == "unit":
            return f"(({ratio}) / ({r}))"
        if self.kind == "slope":
            return f"(({ratio}) / ({r}) / ({r}) / ({m}))"
        scale = sp.Symbol("_DIFGEN_SCALE_")
        factors = []
        for op in "-+":
            halved = f"(({pb}) * 0.5 {op} ({pa}) * 0.5) / (({m}) * 0.5)"
            whole = f"(({pb}) {op} ({pa})) / ({m})"
            choice = sp.Piecewise(
                (sp.Symbol("_DIFGEN_HALVED_"), NpGreater(scale, sp.Float(_HALVED))),
                (hole, True),
            )
            text = fill(choice, whole).replace("_DIFGEN_HALVED_", halved)
            text = text.replace(scale.name, f"({m})")
            factors.append(f"(({text}) / ({r}) / ({r}) / ({m}))")
        gap = f"({factors[0]} * {factors[1]})"
        limit = fill(
            sp.Piecewise(
                # m > the largest double: m is inf (sp.oo has no C spelling here)
                (sp.Symbol("_DIFGEN_LIMIT_"), NpGreater(scale, sp.Float(_LARGEST))),
                (hole, True),
            ),
            gap,
        ).replace("_DIFGEN_LIMIT_", f"0.0 * (({printer._print(small)}) / ({m}))")
        return limit.replace(scale.name, f"({m})")


class HypotUnit(_HypotHead):
    """``a / hypot(a, b)``, hypot's d/da (see :func:`_hypot_unit_value`); its
    derivatives are products of a unit component and a :class:`HypotSlope`."""

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        if argindex == 1:
            return HypotSlope(b, a) * HypotUnit(b, a)
        return -HypotSlope(b, a) * self


class HypotSlope(_HypotHead):
    """``a / hypot(a, b)**2`` (see :func:`_hypot_slope_value`), the derivative of
    :class:`HypotUnit`'s; its own derivatives are a :class:`HypotGap` and a
    product of the two slopes."""

    kind = "slope"

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        if argindex == 1:
            return HypotGap(a, b)
        return -2 * self * HypotSlope(b, a)


class HypotGap(_HypotHead):
    """``(b**2 - a**2) / hypot(a, b)**4`` (see :func:`_hypot_gap_value`), the
    d/da of :class:`HypotSlope`; its derivatives as :func:`_hypot_gap_jvp`."""

    kind = "gap"

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        ga, gb = HypotSlope(a, b), HypotSlope(b, a)
        if argindex == 1:
            return -(4 * ga * gb * gb + 2 * ga * self)
        return 4 * ga * ga * gb - 2 * gb * self


class NpHypot(FloatHelperCall, sp.Function):
    """``np.hypot(a, b)``, NumPy's own (``sqrt(a*a + b*b)`` overflows at 1e200):
    printed as the ``_hypot`` helper of ``floats``. d/da = a / h, a
    :class:`HypotUnit` (0 where h = 0, as :func:`_hypot_jvp`)."""

    nargs = 2
    float_helper = "_hypot"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        return HypotUnit(a, b) if argindex == 1 else HypotUnit(b, a)


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
        sympy=_sympy_pow,
        simplify=identities.pow_identities,
        c_loop=POWER_LOOP,
    ),
    binary(
        "arctan2",
        np.arctan2,
        call("np.arctan2({0}, {1})"),
        jvp=_arctan2_jvp,
        sympy=Atan2,
    ),
    binary(
        "hypot",
        np.hypot,
        call("np.hypot({0}, {1})"),
        jvp=_hypot_jvp,
        sympy=NpHypot,
    ),
    binary(
        "hypot_unit",
        _hypot_unit_value,
        _hypot_form("unit"),
        jvp=_hypot_unit_jvp,
        sympy=HypotUnit,
    ),
    binary(
        "hypot_slope",
        _hypot_slope_value,
        _hypot_form("slope"),
        jvp=_hypot_slope_jvp,
        sympy=HypotSlope,
    ),
    binary(
        "hypot_gap",
        _hypot_gap_value,
        _hypot_form("gap"),
        jvp=_hypot_gap_jvp,
        sympy=HypotGap,
    ),
    binary(
        "maximum",
        np.maximum,
        call("np.maximum({0}, {1})"),
        jvp=_select_jvp(lambda a, b: a >= b),
        sympy=NpMaximum,
        commutative=False,  # the second of equal values: 0.0 and -0.0 differ
    ),
    binary(
        "minimum",
        np.minimum,
        call("np.minimum({0}, {1})"),
        jvp=_select_jvp(lambda a, b: a <= b),
        sympy=NpMinimum,
        commutative=False,  # the second of equal values: 0.0 and -0.0 differ
    ),
]

for _prim in BINARY:
    register(_prim)


# ------------------------------------------------------------------- selectors
class NpComparison(BooleanFunction):
    """A float comparison as NumPy makes it, as an opaque SymPy head.

    SymPy's relations assume real (never NaN) symbols: ``Ne(x, x)`` folds to
    False, ``Not(x > 0)`` becomes ``x <= 0`` and ``x/5 == m`` becomes ``x == 5 m``,
    each of which differs from NumPy where x is NaN (or, for the last, in the
    rounding). This head is never rewritten; the printers write it as the
    comparison itself (its print hook). Logic on its results (And, Or,
    Not) stays exact: the results are true booleans.
    """

    nargs = 2
    symbol = ""

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None  # stays as written, even on equal arguments

    def _eval_as_set(self) -> Any:
        """No set of reals: SymPy must not solve a NaN-aware comparison."""
        raise NotImplementedError("a NumPy comparison is not a set of reals")

    def _pythoncode(self, printer: Any) -> str:
        """SymPy's print hook: the comparison as written (the same in Python and C)."""
        a, b = (printer._print(arg) for arg in self.args)
        return f"({a} {self.symbol} {b})"


class NpLess(NpComparison):
    symbol = "<"


class NpLessEqual(NpComparison):
    symbol = "<="


class NpGreater(NpComparison):
    symbol = ">"


class NpGreaterEqual(NpComparison):
    symbol = ">="


class NpEqual(NpComparison):
    symbol = "=="


class NpNotEqual(NpComparison):
    symbol = "!="


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


# ------------------------------------------- logaddexp, rounding and modulo
class _Rounding(FloatHelperCall, sp.Function):
    """A NumPy rounding function (``np.floor``...) as an opaque SymPy head.

    SymPy's own ``floor`` evaluates on its exact numbers and prints as
    ``math.floor``, which returns an int (losing ``-0.0``) and raises on inf and NaN;
    this head stays as written, has derivative zero (the function is piecewise
    constant) and prints as the :mod:`difgen.floats` helper of the same name, which
    returns NumPy's float."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        return sp.S.Zero


class NpFloor(_Rounding):
    """``np.floor``."""

    float_helper = "_floor"


class NpCeil(_Rounding):
    """``np.ceil``."""

    float_helper = "_ceil"


class NpTrunc(_Rounding):
    """``np.trunc``."""

    float_helper = "_trunc"


class NpRint(_Rounding):
    """``np.rint``: round half to even, as Python's ``round``."""

    float_helper = "_rint"


class NpRemainder(FloatHelperCall, sp.Function):
    """``np.remainder(a, b)`` (Python's ``%``): ``a - floor(a / b) b`` in value, with
    NumPy's sign convention (the sign of ``b``); d/da = 1, d/db = -floor(a / b)."""

    nargs = 2
    float_helper = "_remainder"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        return sp.S.One if argindex == 1 else -NpFloor(a / b)


class NpFmod(FloatHelperCall, sp.Function):
    """``np.fmod(a, b)`` (C's fmod): the sign of ``a``; d/da = 1, d/db = -trunc(a/b)."""

    nargs = 2
    float_helper = "_fmod"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        return sp.S.One if argindex == 1 else -NpTrunc(a / b)


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
    a and b, on NumPy values, tracers or SymPy values (``power`` is base**x):
    e_a, e_b are base**(a - max) and base**(b - max), one of them exactly 1, and
    s = e_a + e_b is in [1, 2]. Not base**(a - y): y = logaddexp(a, b) rounds,
    and at |y| = 1000 its last bit is 500 ulps of the weight (1/2 exactly at
    a == b now). Their derivatives are cancellation-free: the weight of the
    larger argument is 1 / s with e = 1 constant, so d(p) = p q (da - db) is
    formed as a product (it was p - p**2, 0 where it is 4e-18 at (40, 0))."""
    first = a >= b
    if isinstance(first, sp.Basic) or isinstance(a, sp.Basic):
        first = NpGreaterEqual(a, b)
        ea = power(sp.Piecewise((sp.S.Zero, first), (a - b, True)))
        eb = power(sp.Piecewise((b - a, first), (sp.S.Zero, True)))
    else:
        ea = power(np.where(first, 0.0, a - b))
        eb = power(np.where(first, b - a, 0.0))
    total = ea + eb
    return ea / total, eb / total


class NpLogaddexp(FloatHelperCall, sp.Function):
    """``np.logaddexp(a, b)`` = log(e^a + e^b), as NumPy computes it (a helper of
    :mod:`difgen.floats` in scalar code); d/da = e^a / (e^a + e^b), as
    :func:`_logaddexp_weights`."""

    nargs = 2
    float_helper = "_logaddexp"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        return _logaddexp_weights(a, b, sp.exp)[argindex - 1]


class NpLogaddexp2(FloatHelperCall, sp.Function):
    """``np.logaddexp2(a, b)`` = log2(2^a + 2^b); d/da = 2^a / (2^a + 2^b)."""

    nargs = 2
    float_helper = "_logaddexp2"

    @classmethod
    def eval(cls, a: Any, b: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        a, b = self.args
        weights = _logaddexp_weights(a, b, lambda x: sp.Pow(2, x))
        return weights[argindex - 1]


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


ROUNDING = [
    binary(
        "logaddexp",
        np.logaddexp,
        call("np.logaddexp({0}, {1})"),
        jvp=_logaddexp_jvp(np.e),
        sympy=NpLogaddexp,
        commutative=True,
    ),
    binary(
        "logaddexp2",
        np.logaddexp2,
        call("np.logaddexp2({0}, {1})"),
        jvp=_logaddexp_jvp(2.0),
        sympy=NpLogaddexp2,
        commutative=True,
    ),
    unary(
        "floor",
        np.floor,
        call("np.floor({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=NpFloor,
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "ceil",
        np.ceil,
        call("np.ceil({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=NpCeil,
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "trunc",
        np.trunc,
        call("np.trunc({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=NpTrunc,
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    unary(
        "rint",
        np.rint,
        call("np.rint({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=NpRint,
        sparsity=patterns.no_dependence,
        scalar=NO_HELPER,
    ),
    binary(
        "remainder",
        np.remainder,
        call("np.remainder({0}, {1})"),
        jvp=_modulo_jvp(np.floor),
        sympy=NpRemainder,
    ),
    binary(
        "fmod",
        np.fmod,
        call("np.fmod({0}, {1})"),
        jvp=_modulo_jvp(np.trunc),
        sympy=NpFmod,
    ),
]

for _prim in ROUNDING:
    register(_prim)


# ------------------------------------------------------------------------ sinc
SINC_SERIES = 0.25
"""Below this |x| the derivatives of ``sinc`` come from its Maclaurin series; above,
from the closed form, whose cancellation there costs at most ~100 ulp at third
order (``sin(u)/u``'s third derivative is ~u/5 near 0, its closed form a difference
of terms of size ~6/u^4)."""

SINC_TERMS = 12
"""Terms of the series of sinc' kept: at |pi x| = pi/4 the first left out is below
1e-19 of the third derivative (and smaller at lower orders)."""


def _sinc_coefficients(terms: int) -> tuple[float, ...]:
    """sinc'(x) = x * sum_n a_n (x^2)^(n-1), a_n = (-1)^n pi^(2n) 2n / (2n+1)!,
    each a_n the float nearest its exact value (SymPy evaluates it to 40 digits)."""
    return tuple(
        float(sp.N((-1) ** n * sp.pi ** (2 * n) * 2 * n / sp.factorial(2 * n + 1), 40))
        for n in range(1, terms + 1)
    )


SINC_D1 = _sinc_coefficients(SINC_TERMS)


def _sinc_series(x: Any) -> Any:
    """sinc'(x) as its Maclaurin polynomial (Horner in x^2): on tracer values or SymPy
    expressions alike. Each derivative of it is the series of the next derivative,
    so every order is exact near 0 (where the closed form is 0/0)."""
    z = x * x
    acc: Any = SINC_D1[-1]
    for c in reversed(SINC_D1[:-1]):
        acc = acc * z + c
    return x * acc


def _sinc_closed(s: Any, sin: Any, cos: Any) -> Any:
    """d sinc/dx in closed form, ``(cos(u) - sin(u) / u) / s`` with u = pi s."""
    u = s * math.pi
    return (cos(u) - sin(u) / u) / s


def _sinc_deriv(x: Any, y: Any) -> Any:
    """d sinc/dx: the series where |x| < SINC_SERIES, else the closed form,
    evaluated at s = 1 where the series is taken so that neither branch divides by
    zero (the mask is a run-time ``where``, whose derivatives and transpose are
    exact when both branches are finite)."""
    small = np.abs(x) < SINC_SERIES
    s = np.where(small, 1.0, x)
    return np.where(small, _sinc_series(x), _sinc_closed(s, np.sin, np.cos))


class NpSinc(sp.Function):
    """``np.sinc(x)`` = sin(pi x) / (pi x), 1 at 0, as an opaque SymPy head.

    Its derivative is :func:`_sinc_deriv`'s (series near 0, closed form at a safe
    argument elsewhere), so SymPy's ``diff`` is exact at every order at and near 0.
    It prints itself as NumPy's own formula, ``y = pi * where(x == 0, 1e-20, x);
    sin(y) / y``, in the dialect of the printer (Python floats or C), so both
    scalar emissions compute NumPy's value to the bit with their own ``sin`` and
    division."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        closed = _sinc_closed(SincSafe(x), sp.sin, sp.cos)
        return sp.Piecewise(
            (_sinc_series(x), _sinc_small(x)), (closed, True), evaluate=False
        )

    def numpy_formula(self) -> Any:
        """NumPy's ``sin(y) / y`` with ``y = pi * where(x == 0, 1e-20, x)``,
        unevaluated."""
        x = self.args[0]
        nonzero = sp.Piecewise(
            (sp.Float(1.0e-20), NpEqual(x, 0)), (x, True), evaluate=False
        )
        y = sp.Mul(sp.Float(math.pi), nonzero, evaluate=False)
        return sp.Mul(sp.sin(y), sp.Pow(y, -1, evaluate=False), evaluate=False)

    def _pythoncode(self, printer: Any) -> str:
        """SymPy's print hook (the float printer and its C subclass): the formula as
        inert operations, printed in the printer's own spelling."""
        from difgen.derive.lowering import inert  # the lowering imports us

        return str(printer._print(inert(self.numpy_formula())))


def _sinc_small(x: Any) -> Any:
    """Where sinc's derivatives come from the series, as a SymPy condition."""
    return NpLess(sp.Abs(x), sp.Float(SINC_SERIES))


class SincSafe(sp.Function):
    """The closed form's safe argument ``where(|x| < SINC_SERIES, 1, x)``, as an
    opaque head: as a Piecewise, SymPy folds the closed form's powers of it into its
    branches (``1 / s**2`` becomes ``Piecewise((1, small), (x**-2, True))``) and
    ``cse`` then computes ``x**-2`` unconditionally, dividing by zero at x = 0
    (a warning, or a FloatingPointError under ``np.errstate(all="raise")``).
    Printed as the Piecewise it stands for; its derivative is 0 where the series
    is taken, else 1."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        small = _sinc_small(self.args[0])
        return sp.Piecewise((sp.S.Zero, small), (sp.S.One, True), evaluate=False)

    def _pythoncode(self, printer: Any) -> str:
        x = self.args[0]
        safe = sp.Piecewise((sp.S.One, _sinc_small(x)), (x, True), evaluate=False)
        return str(printer._print(safe))


sinc_p = register(
    unary(
        "sinc",
        np.sinc,
        call("np.sinc({0})"),
        deriv=_sinc_deriv,
        sympy=NpSinc,
        scalar=NO_HELPER,
    )
)


# ------------------------------------------------------------------- heaviside
class NpHeaviside(sp.Function):
    """``np.heaviside(x, h)``: 0 where x < 0, ``h`` where x == 0 (either zero), 1
    where x > 0, NaN where x is NaN; d/dx = 0 (piecewise constant), d/dh = 1 where
    x == 0, else 0.

    It prints itself, through SymPy's print hook, as NumPy's own definition in the
    printer's dialect (conditionals on float comparisons, Python or C), so both
    scalar emissions return NumPy's value with no helper of their own."""

    nargs = 2

    @classmethod
    def eval(cls, x: Any, h: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        if argindex == 1:
            return sp.S.Zero
        at_zero = NpEqual(self.args[0], sp.S.Zero)
        return sp.Piecewise((sp.S.One, at_zero), (sp.S.Zero, True), evaluate=False)

    def numpy_formula(self) -> Any:
        """h at x == 0, 1 above, 0 below, and x itself (NaN) otherwise."""
        x, h = self.args
        return sp.Piecewise(
            (h, NpEqual(x, sp.S.Zero)),
            (sp.Float(1.0), NpGreater(x, sp.S.Zero)),
            (sp.Float(0.0), NpLess(x, sp.S.Zero)),
            (x, True),
            evaluate=False,
        )

    def _pythoncode(self, printer: Any) -> str:
        """SymPy's print hook (the float printer and its C subclass)."""
        from difgen.derive.lowering import inert  # the lowering imports us

        return str(printer._print(inert(self.numpy_formula())))


def _heaviside_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """dy = [x == 0] dh: the step is flat in x wherever it has a derivative."""
    (x, _), (_, dh) = primals, tangents
    if dh is None:
        return None
    return _broadcast_to(np.where(x == 0.0, dh, 0.0), np.shape(out))


heaviside_p = register(
    binary(
        "heaviside",
        np.heaviside,
        call("np.heaviside({0}, {1})"),
        jvp=_heaviside_jvp,
        sympy=NpHeaviside,
    )
)
