"""The SymPy side of the special functions (:mod:`difgen.primitives.special`)."""

from __future__ import annotations

from typing import Any

import sympy as sp

from difgen.primitives.family import objectwise
from difgen.primitives.heads.elementwise import NpGreaterEqual
from difgen.primitives.special import (
    ERFCX_SERIES,
    SQRT_HALF,
    SQRT_TWO_OVER_PI,
    TWO_OVER_SQRT_PI,
    _erfcx_series,
)


class Special(sp.Function):
    """An opaque SymPy head of a special function: SymPy's own (``erfc``,
    ``loggamma``) rewrite themselves (``erfc(-x)`` becomes ``2 - erfc(x)``, which
    is 0 where the value is 1e-300; ``loggamma`` is complex for x < 0, where
    ``gammaln`` is log|Gamma|), so each is a head that stays as written and prints
    itself through SymPy's print hook (the float printer and its C subclass)."""

    @classmethod
    def eval(cls, *args: Any) -> Any:
        return None


class MathSpecial(Special):
    """Printed as ``math.<name>`` in Python and ``<name>`` in C (C99 has it)."""

    libm = ""

    def _pythoncode(self, printer: Any) -> str:
        operands = ", ".join(printer._print(arg) for arg in self.args)
        return f"{printer._module_format('math.' + self.libm)}({operands})"


class HelperSpecial(Special):
    """Printed as a call of its :mod:`difgen.floats` helper (Python and C)."""

    float_helper = ""

    def _pythoncode(self, printer: Any) -> str:
        operands = [printer._print(arg) for arg in self.args]
        return str(printer._call(self.float_helper, *operands))


class ScipySpecial(Special):
    """Printed as SciPy's ufunc on floats in Python; no C form (the C printer
    refuses it, and the operator is printed otherwise)."""

    scipy_name = ""

    def _pythoncode(self, printer: Any) -> str:
        operands = [printer._print(arg) for arg in self.args]
        return str(printer._scipy_special(self.scipy_name, *operands))


class SpErf(MathSpecial):
    nargs = 1
    libm = "erf"

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        return sp.Float(TWO_OVER_SQRT_PI) * sp.exp(-x * x)


class SpErfc(MathSpecial):
    nargs = 1
    libm = "erfc"

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        return sp.Float(-TWO_OVER_SQRT_PI) * sp.exp(-x * x)


def _erfcx_large(x: Any) -> Any:
    return NpGreaterEqual(x, sp.Float(ERFCX_SERIES))


class ErfcxSafe(sp.Function):
    """``where(x >= ERFCX_SERIES, x, ERFCX_SERIES)`` as an opaque head (as
    ``SincSafe``: SymPy would fold the series' powers into a Piecewise's branches
    and ``cse`` compute ``1 / x**2`` unconditionally). Derivative 1 where the
    series is taken, else 0."""

    nargs = 1

    @classmethod
    def eval(cls, x: Any) -> Any:
        return None

    def fdiff(self, argindex: int = 1) -> Any:
        large = _erfcx_large(self.args[0])
        return sp.Piecewise((sp.S.One, large), (sp.S.Zero, True), evaluate=False)

    def _pythoncode(self, printer: Any) -> str:
        x = self.args[0]
        safe = sp.Piecewise(
            (x, _erfcx_large(x)), (sp.Float(ERFCX_SERIES), True), evaluate=False
        )
        return str(printer._print(safe))


class SpErfcx(ScipySpecial):
    nargs = 1
    scipy_name = "erfcx"

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        closed = 2 * x * self - sp.Float(TWO_OVER_SQRT_PI)
        series = _erfcx_series(ErfcxSafe(x))
        return sp.Piecewise((series, _erfcx_large(x)), (closed, True), evaluate=False)


class SpPolygamma(ScipySpecial):
    """``polygamma(n, x)`` with a constant integer order ``n`` (``psi`` at 0)."""

    nargs = 2

    def fdiff(self, argindex: int = 2) -> Any:
        n, x = self.args
        if argindex == 1:
            raise ValueError("polygamma's order is a constant")
        return SpPolygamma(n + 1, x)

    def _pythoncode(self, printer: Any) -> str:
        n, x = self.args
        if n == 0:
            return str(printer._scipy_special("psi", printer._print(x)))
        return str(printer._scipy_special("polygamma", str(int(n)), printer._print(x)))


class SpGammaln(HelperSpecial):
    nargs = 1
    float_helper = "_gammaln"

    def fdiff(self, argindex: int = 1) -> Any:
        return SpPolygamma(sp.Integer(0), self.args[0])


class SpGamma(HelperSpecial):
    nargs = 1
    float_helper = "_gamma"

    def fdiff(self, argindex: int = 1) -> Any:
        return self * SpPolygamma(sp.Integer(0), self.args[0])


class SpLogNdtr(ScipySpecial):
    nargs = 1
    scipy_name = "log_ndtr"

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        return sp.Float(SQRT_TWO_OVER_PI) / SpErfcx(-sp.Float(SQRT_HALF) * x)


class SpExpit(HelperSpecial):
    nargs = 1
    float_helper = "_expit"

    def fdiff(self, argindex: int = 1) -> Any:
        x = self.args[0]
        return self * SpExpit(-x)


class SpXlogy(HelperSpecial):
    nargs = 2
    float_helper = "_xlogy"

    def fdiff(self, argindex: int = 1) -> Any:
        x, y = self.args
        return sp.log(y) if argindex == 1 else x / y


class SpXlog1py(HelperSpecial):
    nargs = 2
    float_helper = "_xlog1py"

    def fdiff(self, argindex: int = 1) -> Any:
        from sympy.codegen import cfunctions

        x, y = self.args
        return cfunctions.log1p(y) if argindex == 1 else x / (1 + y)


_polygamma_elements = objectwise(lambda x, n: SpPolygamma(sp.Integer(n), x), 2)


def polygamma(x: Any, n: int) -> Any:
    """``sympy`` of ``polygamma``: its order ``n`` is a param, a constant integer."""
    return _polygamma_elements(x, n)
