"""The SymPy side of ``sinc`` and ``heaviside`` (:mod:`difgen.primitives.singular`):
heads whose derivatives are the trace backend's (the series near sinc's removable
singularity) and which print themselves as NumPy's own formulas."""

from __future__ import annotations

import math
from typing import Any

import sympy as sp

from difgen.primitives.heads.elementwise import NpEqual, NpGreater, NpLess
from difgen.primitives.singular import SINC_SERIES, _sinc_closed, _sinc_series


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
