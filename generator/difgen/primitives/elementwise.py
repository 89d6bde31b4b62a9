"""Elementwise primitives: the shared helpers, the unary table and negation.

Unary rows carry the derivative as NumPy code on the input ``x`` and the output ``y``.
The other elementwise families build on the helpers here: the binary table with the
``hypot``/``arctan2`` family (:mod:`difgen.primitives.binary`), the comparisons and
``where`` (:mod:`difgen.primitives.selectors`), logaddexp, rounding and modulo
(:mod:`difgen.primitives.rounding`), ``sinc`` and ``heaviside``
(:mod:`difgen.primitives.singular`). Compound NumPy functions (``log2``, ``square``...)
are written in terms of these in :mod:`difgen.frontend.numpy_api`.
"""

from __future__ import annotations

import math
import operator
from typing import Any, ClassVar

import numpy as np
import sympy as sp
from sympy.codegen import cfunctions  # log1p, expm1: exact near 0, unlike log(1 + x)
from sympy.logic.boolalg import BooleanFunction

from difgen.core import simplify as identities
from difgen.core.expr import call, negation
from difgen.core.primitive import NO_HELPER, UFUNC_LOOP, register
from difgen.primitives import patterns
from difgen.primitives.family import PIECEWISE_CONSTANT, elementwise, unary


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


# ---------------------------------------- NumPy's comparisons, as SymPy heads
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
