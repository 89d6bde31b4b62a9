"""Elementwise primitives with a singular point: ``sinc`` (its removable singularity
at 0, derivatives from a Maclaurin series near it) and ``heaviside`` (its jump)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from difgen.core.expr import call
from difgen.core.primitive import NO_HELPER, Deferred, register
from difgen.primitives.elementwise import _broadcast_to
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


SINC_D1 = (
    -3.289868133696453,
    3.2469697011334144,
    -1.1445109447325053,
    0.2091827825412384,
    -0.023460810354558236,
    0.001781145516372852,
    -9.766223126318933e-05,
    4.049947846619244e-06,
    -1.3148481279991994e-07,
    3.4330769499642866e-09,
    -7.365893777096947e-11,
    1.3217901389162318e-12,
)
"""sinc'(x) = x * sum_n a_n (x^2)^(n-1), a_n = (-1)^n pi^(2n) 2n / (2n+1)!, for n
from 1 to ``SINC_TERMS``: each a_n the float nearest its exact value, written out
(SymPy's import would cost every build; a test evaluates them to 40 digits)."""


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


sinc_p = register(
    unary(
        "sinc",
        np.sinc,
        call("np.sinc({0})"),
        deriv=_sinc_deriv,
        sympy=Deferred("difgen.primitives.heads.singular:NpSinc"),
        scalar=NO_HELPER,
    )
)


# ------------------------------------------------------------------- heaviside


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
        sympy=Deferred("difgen.primitives.heads.singular:NpHeaviside"),
    )
)
