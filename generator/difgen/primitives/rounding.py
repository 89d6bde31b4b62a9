"""Elementwise primitives: logaddexp, rounding and modulo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from difgen.core.expr import call
from difgen.core.primitive import NO_HELPER, register
from difgen.primitives import patterns
from difgen.primitives.elementwise import (
    FloatHelperCall,
    NpGreaterEqual,
    _add_tangents,
    _broadcast_to,
)
from difgen.primitives.family import PIECEWISE_CONSTANT, binary, unary


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
