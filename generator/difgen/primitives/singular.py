"""Elementwise primitives with a singular point: ``sinc`` (its removable singularity
at 0, derivatives from a Maclaurin series near it) and ``heaviside`` (its jump)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp

from difgen.core.expr import call
from difgen.core.primitive import NO_HELPER, register
from difgen.primitives.elementwise import NpEqual, NpGreater, NpLess, _broadcast_to
from difgen.primitives.family import binary, unary

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
