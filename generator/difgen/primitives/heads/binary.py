"""The SymPy side of the binary primitives (:mod:`difgen.primitives.binary`): powers
with a symbolic exponent, ``atan2``, ``maximum``/``minimum`` and ``hypot`` with its
derivatives, as heads whose derivatives and printing match the trace backend's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import sympy as sp

from difgen.primitives.binary import _HALVED, _LARGEST
from difgen.primitives.heads.elementwise import (
    FloatHelperCall,
    NpEqual,
    NpGreater,
    NpGreaterEqual,
)


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
