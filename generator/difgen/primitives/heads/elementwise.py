"""The SymPy side of the elementwise primitives (:mod:`difgen.primitives.elementwise`):
the heads its ``sympy`` facts name, and NumPy's comparisons as SymPy heads (the
other families' heads build on these). Imported only when a build lowers to SymPy.
"""

from __future__ import annotations

from typing import Any, ClassVar

import sympy as sp
from sympy.logic.boolalg import BooleanFunction


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
