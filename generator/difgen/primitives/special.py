"""SciPy's special functions (``scipy.special``) as elementwise primitives.

Each row's value is SciPy's own ufunc (its ``impl``, and the vector emission calls
``scipy.special.<name>``, so a module that uses one imports ``scipy.special`` and
says so in its header); its derivative is written on primitives of this module
and of :mod:`difgen.primitives.elementwise`, so every order exists:

- ``gammaln' = polygamma(0, .)`` (digamma), ``polygamma(n)' = polygamma(n + 1)``,
  ``gamma' = gamma polygamma(0, .)``;
- ``erf' = 2/sqrt(pi) exp(-x^2)``, ``erfc' = -erf'``,
  ``erfcx' = 2 x erfcx(x) - 2/sqrt(pi)``, from x = 10 on its asymptotic series
  (the closed form cancels to ~x^2 ulp);
- ``log_ndtr' = sqrt(2/pi) / erfcx(-x/sqrt(2))``: ``phi(x) / Phi(x)`` without the
  cancellation of ``exp(-x^2/2 - log_ndtr(x))`` (at x = -40 both terms are 800);
- ``expit' = expit(x) expit(-x)``: no ``1 - y`` that is 0 where y rounds to 1;
- ``xlogy``/``xlog1py``: JAX's ``d/dx = log(y)`` (``log1p(y)``) also at x = 0,
  ``d/dy = x / y`` (``x / (1 + y)``), while the value is SciPy's 0 at x = 0.

Scalar code: ``erf``, ``erfc`` are ``math``'s (C99's in C), ``gammaln`` is
``math.lgamma`` (C99 ``lgamma``) with SciPy's values at the poles and at -inf,
``gamma`` is ``math.gamma`` (C99 ``tgamma``) with SciPy's values where it raises,
``expit``, ``xlogy``, ``xlog1py`` are helpers of :mod:`difgen.floats` written the
same in Python and C; ``polygamma``, ``erfcx`` and ``log_ndtr`` call SciPy's ufunc
on one float in Python, and have no C form (SciPy has no C API): their C loop form
is absent, so an operator using them stays in Python (vector code), as any
operator with a primitive without a loop form does.

SciPy is imported only when a row is evaluated (difgen itself does not need it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.expr import call
from difgen.core.primitive import (
    ELEMENTWISE_LOOP,
    MISSING,
    NO_HELPER,
    Deferred,
    Primitive,
    no_loop_form,
    register,
)
from difgen.core.tracer import bind_name
from difgen.primitives.elementwise import _add_tangents, _broadcast_to
from difgen.primitives.family import binary, elementwise, unary

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
SQRT_TWO_OVER_PI = math.sqrt(2.0 / math.pi)
SQRT_HALF = math.sqrt(0.5)

NO_C = no_loop_form("a SciPy special function, which SciPy offers no C API for")
"""The C loop form of the rows that only SciPy computes: kept in vector code."""

SCIPY = ("scipy.special",)
"""What the NumPy forms of these primitives name besides NumPy (the module
imports it)."""


def scipy_ufunc(name: str) -> Any:
    """``scipy.special.<name>``, imported when first called (difgen does not need
    SciPy unless the user's code calls it)."""

    def impl(*args: Any, **params: Any) -> Any:
        import scipy.special

        return getattr(scipy.special, name)(*args, **params)

    impl.__name__ = name
    impl.__qualname__ = f"scipy.special.{name}"
    return impl


ERFCX_SERIES = 10.0
"""From this x on, erfcx' comes from its asymptotic series: the closed form
``2 x erfcx(x) - 2/sqrt(pi)`` cancels to about x^2 ulp (100 at the switch)."""

ERFCX_TERMS = 16
"""Terms of the series kept: at x = 10 the first left out is ~1e-18 of the sum."""

ERFCX_D1 = tuple(
    -TWO_OVER_SQRT_PI * (-1) ** (n + 1) * math.prod(range(1, 2 * n, 2))
    for n in range(1, ERFCX_TERMS + 1)
)
"""erfcx'(x) = sum_n a_n z^n, z = 1 / (2 x^2): a_n = -(2/sqrt(pi)) (-1)^(n+1)
(2n-1)!!, from erfcx(x) ~ (1/(x sqrt(pi))) sum_n (-1)^n (2n-1)!! z^n."""


def _erfcx_series(s: Any) -> Any:
    """erfcx'(s) by its asymptotic series (Horner in z): tracers or SymPy alike;
    each derivative of it is the series of the next derivative."""
    z = 0.5 / (s * s)
    acc: Any = ERFCX_D1[-1]
    for c in reversed(ERFCX_D1[:-1]):
        acc = acc * z + c
    return acc * z


def _erfcx_deriv(x: Any, y: Any) -> Any:
    """erfcx' without cancellation: the series from ERFCX_SERIES on, at a safe
    argument elsewhere (neither branch of the where divides by zero)."""
    large = x >= ERFCX_SERIES
    s = np.where(large, x, ERFCX_SERIES)
    return np.where(large, _erfcx_series(s), 2.0 * x * y - TWO_OVER_SQRT_PI)


# ------------------------------------------------------------------------ rows
HEADS = "difgen.primitives.heads.special"


def _polygamma(x: Any, n: int) -> Any:
    return bind_name("polygamma", x, n=n)


def _polygamma_jvp(out: Any, primals: list[Any], tangents: list[Any], n: int) -> Any:
    """polygamma(n)' = polygamma(n + 1)."""
    (x,), (dx,) = primals, tangents
    return None if dx is None else _polygamma(x, n + 1) * dx


class _PolygammaForm:
    """``scipy.special.psi`` for n = 0, else ``polygamma(n, x)``, in NumPy code."""

    modules = frozenset(SCIPY)

    def __call__(self, args: Any, params: Any, avals: Any) -> Any:
        n = params["n"]
        form = (
            "scipy.special.psi({0})" if n == 0 else "scipy.special.polygamma({n}, {0})"
        )
        if n != 0 and precision.is_float32():  # its integer order makes it float64
            form = f"np.float32({form})"
        return call(form, SCIPY)(args, params, avals)


_polygamma_numpy = _PolygammaForm()


def _polygamma_impl(x: Any, n: int) -> Any:
    import scipy.special

    return scipy.special.psi(x) if n == 0 else scipy.special.polygamma(n, x)


def _polygamma_row() -> Primitive:
    import dataclasses

    row = elementwise(
        "polygamma",
        _polygamma_impl,
        _polygamma_numpy,
        arity=1,
        jvp=_polygamma_jvp,
        sympy=MISSING,  # set below: the order n is a param
        c_loop=NO_C,
        scalar=NO_HELPER,
    )
    broadcast = row.shape_rule

    def shape_rule(x: Any, n: int) -> Any:
        return broadcast(x)

    return dataclasses.replace(
        row, sympy=Deferred(f"{HEADS}:polygamma"), shape_rule=shape_rule
    )


def _xlogy_jvp(log: Any, shift: float) -> Any:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """d x log(y + s) = log(y + s) dx + x / (y + s) dy: JAX's rule, also at
        x = 0 (where the value is 0 and d/dx the limit log(y + s))."""
        (x, y), (dx, dy) = primals, tangents
        terms = [
            None if dx is None else log(y) * dx,
            None if dy is None else (x / (y + shift) if shift else x / y) * dy,
        ]
        return _broadcast_to(_add_tangents(*terms), np.shape(out))

    return jvp


SPECIAL = [
    unary(
        "erf",
        scipy_ufunc("erf"),
        call("scipy.special.erf({0})", SCIPY),
        deriv=lambda x, y: TWO_OVER_SQRT_PI * np.exp(-(x * x)),
        sympy=Deferred(f"{HEADS}:SpErf"),
        scalar=NO_HELPER,
    ),
    unary(
        "erfc",
        scipy_ufunc("erfc"),
        call("scipy.special.erfc({0})", SCIPY),
        deriv=lambda x, y: -TWO_OVER_SQRT_PI * np.exp(-(x * x)),
        sympy=Deferred(f"{HEADS}:SpErfc"),
        scalar=NO_HELPER,
    ),
    unary(
        "erfcx",
        scipy_ufunc("erfcx"),
        call("scipy.special.erfcx({0})", SCIPY),
        deriv=_erfcx_deriv,
        sympy=Deferred(f"{HEADS}:SpErfcx"),
        c_loop=NO_C,
        scalar=NO_HELPER,
    ),
    unary(
        "gammaln",
        scipy_ufunc("gammaln"),
        call("scipy.special.gammaln({0})", SCIPY),
        deriv=lambda x, y: _polygamma(x, 0),
        sympy=Deferred(f"{HEADS}:SpGammaln"),
        c_loop=ELEMENTWISE_LOOP,
        scalar=NO_HELPER,
    ),
    _polygamma_row(),
    unary(
        "gamma",
        scipy_ufunc("gamma"),
        call("scipy.special.gamma({0})", SCIPY),
        deriv=lambda x, y: y * _polygamma(x, 0),
        sympy=Deferred(f"{HEADS}:SpGamma"),
        c_loop=ELEMENTWISE_LOOP,
        scalar=NO_HELPER,
    ),
    unary(
        "log_ndtr",
        scipy_ufunc("log_ndtr"),
        call("scipy.special.log_ndtr({0})", SCIPY),
        deriv=lambda x, y: SQRT_TWO_OVER_PI / bind_name("erfcx", x * -SQRT_HALF),
        sympy=Deferred(f"{HEADS}:SpLogNdtr"),
        c_loop=NO_C,
        scalar=NO_HELPER,
    ),
    unary(
        "expit",
        scipy_ufunc("expit"),
        call("scipy.special.expit({0})", SCIPY),
        deriv=lambda x, y: y * bind_name("expit", -x),
        sympy=Deferred(f"{HEADS}:SpExpit"),
        scalar=NO_HELPER,
    ),
    binary(
        "xlogy",
        scipy_ufunc("xlogy"),
        call("scipy.special.xlogy({0}, {1})", SCIPY),
        jvp=_xlogy_jvp(np.log, 0.0),
        sympy=Deferred(f"{HEADS}:SpXlogy"),
    ),
    binary(
        "xlog1py",
        scipy_ufunc("xlog1py"),
        call("scipy.special.xlog1py({0}, {1})", SCIPY),
        jvp=_xlogy_jvp(np.log1p, 1.0),
        sympy=Deferred(f"{HEADS}:SpXlog1py"),
    ),
]

for _prim in SPECIAL:
    register(_prim)
