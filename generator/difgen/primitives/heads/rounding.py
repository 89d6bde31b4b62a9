"""The SymPy side of rounding, modulo and logaddexp
(:mod:`difgen.primitives.rounding`): opaque heads printed as the float helpers,
with the trace backend's derivatives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy as sp

from difgen.primitives.heads.elementwise import FloatHelperCall, NpGreaterEqual


def _logaddexp_weights(a: Any, b: Any, power: Callable[[Any], Any]) -> Any:
    """:func:`difgen.primitives.rounding._logaddexp_weights` on SymPy values: the
    same softmax weights, the comparison a NumPy one (:class:`NpGreaterEqual`)."""
    first = NpGreaterEqual(a, b)
    ea = power(sp.Piecewise((sp.S.Zero, first), (a - b, True)))
    eb = power(sp.Piecewise((b - a, first), (sp.S.Zero, True)))
    total = ea + eb
    return ea / total, eb / total


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
