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
from typing import Any

import numpy as np

from difgen.core import simplify as identities
from difgen.core.expr import call, negation
from difgen.core.primitive import NO_HELPER, UFUNC_LOOP, Deferred, register
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


HEADS = "difgen.primitives.heads.elementwise"

UNARY = [
    unary(
        "sin",
        np.sin,
        call("np.sin({0})"),
        deriv=lambda x, y: np.cos(x),
        sympy=Deferred("sympy:sin"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "cos",
        np.cos,
        call("np.cos({0})"),
        deriv=lambda x, y: -np.sin(x),
        sympy=Deferred("sympy:cos"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "tan",
        np.tan,
        call("np.tan({0})"),
        deriv=lambda x, y: 1.0 + y * y,
        sympy=Deferred("sympy:tan"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arcsin",
        np.arcsin,
        call("np.arcsin({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(1.0 - x * x),
        sympy=Deferred("sympy:asin"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arccos",
        np.arccos,
        call("np.arccos({0})"),
        deriv=lambda x, y: -1.0 / np.sqrt(1.0 - x * x),
        sympy=Deferred("sympy:acos"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arctan",
        np.arctan,
        call("np.arctan({0})"),
        deriv=lambda x, y: 1.0 / (1.0 + x * x),
        sympy=Deferred("sympy:atan"),
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "sinh",
        np.sinh,
        call("np.sinh({0})"),
        deriv=lambda x, y: np.cosh(x),
        sympy=Deferred("sympy:sinh"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "cosh",
        np.cosh,
        call("np.cosh({0})"),
        deriv=lambda x, y: np.sinh(x),
        sympy=Deferred("sympy:cosh"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "tanh",
        np.tanh,
        call("np.tanh({0})"),
        deriv=_sech_squared,
        sympy=Deferred(f"{HEADS}:SechSquaredTanh", "tanh"),
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "arcsinh",
        np.arcsinh,
        call("np.arcsinh({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(x * x + 1.0),
        sympy=Deferred("sympy:asinh"),
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "arccosh",
        np.arccosh,
        call("np.arccosh({0})"),
        deriv=lambda x, y: 1.0 / np.sqrt(x * x - 1.0),
        sympy=Deferred("sympy:acosh"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "arctanh",
        np.arctanh,
        call("np.arctanh({0})"),
        deriv=lambda x, y: 1.0 / (1.0 - x * x),
        sympy=Deferred("sympy:atanh"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "exp",
        np.exp,
        call("np.exp({0})"),
        deriv=lambda x, y: y,
        sympy=Deferred("sympy:exp"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "expm1",
        np.expm1,
        call("np.expm1({0})"),
        deriv=lambda x, y: y + 1.0,
        sympy=Deferred("sympy.codegen.cfunctions:expm1"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "log",
        np.log,
        call("np.log({0})"),
        deriv=lambda x, y: 1.0 / x,
        sympy=Deferred("sympy:log"),
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
        sympy=Deferred("sympy.codegen.cfunctions:log2"),
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "log10",
        np.log10,
        call("np.log10({0})"),
        deriv=lambda x, y: (1.0 / math.log(10.0)) / x,
        sympy=Deferred("sympy.codegen.cfunctions:log10"),
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "exp2",
        np.exp2,
        call("np.exp2({0})"),
        deriv=lambda x, y: y * math.log(2.0),
        sympy=Deferred("sympy.codegen.cfunctions:exp2"),
        c_loop=UFUNC_LOOP,
        scalar="numpy",
    ),
    unary(
        "log1p",
        np.log1p,
        call("np.log1p({0})"),
        deriv=lambda x, y: 1.0 / (1.0 + x),
        sympy=Deferred("sympy.codegen.cfunctions:log1p"),
        c_loop=UFUNC_LOOP,
        scalar="fast",
    ),
    unary(
        "sqrt",
        np.sqrt,
        call("np.sqrt({0})"),
        deriv=lambda x, y: 0.5 / y,
        sympy=Deferred("sympy:sqrt"),
        scalar="fast",
    ),
    unary(
        "cbrt",
        np.cbrt,
        call("np.cbrt({0})"),
        deriv=lambda x, y: 1.0 / (3.0 * y * y),
        sympy=Deferred(f"{HEADS}:NpCbrt", "cbrt"),
        c_loop=UFUNC_LOOP,
        scalar="safe",
    ),
    unary(
        "abs",
        np.abs,
        call("np.absolute({0})"),
        deriv=lambda x, y: np.sign(x),
        sympy=Deferred("sympy:Abs"),
        scalar=NO_HELPER,
    ),
    unary(
        "sign",
        np.sign,
        call("np.sign({0})"),
        deriv=PIECEWISE_CONSTANT,
        sympy=Deferred(f"{HEADS}:PiecewiseConstantSign", "sign"),
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
