"""Issue 20: second derivatives of two-argument functions at extreme inputs.

``hypot``'s hessian was written ``b**2 / h**3`` (and ``1 / h - a**2 / h**3``):
inf, 0 or NaN at (1e300, -1e300) and (3e-160, 4e-160) in the sympy backend and the
scalar and C emissions, where SymPy formed ``h**3`` (the vector emission kept
``h`` apart), and off by cancellation where |b| >> |a| (30 ulps at (0.3, -1.7),
90 at (0.1, 1), 5e5 at (0.001, 1)). ``arctan2``'s
derivative ``b / (a*a + b*b)`` overflowed from 1e154 on. Both are written on
hypot's unit vector (a / h) and slope (a / h**2) now, each computed without h**2
(``hypot_unit``, ``hypot_slope``): every second derivative is a product of two
of them, within 8 ulps of mpmath (50 digits) wherever it is a normal float, on
both backends, both modes and every emission (C compiled). logaddexp's (and
logaddexp2's) weights were e**(a - y), 500 ulps off at (1000, 1000) where y's
last bit is, and d2/da2 was p - p**2, 0 at (40, 0) where it is 4e-18: they are
the softmax e**(a - max) / s now, s in [1, 2], whose derivatives are products.

What the answer is where the exact value is not a finite float:

- (3e-320, 4e-320): hypot's second derivatives are ~1e319, beyond the largest
  double; straight-line code gives +-inf, and where a zero seed multiplies an
  infinite coefficient (the vector emission's dense seeds, ``hvp``) inf * 0 is
  NaN, as IEEE and JAX give: never a finite number. The gradient is exact there.
- (0, 0): hypot has no derivative there; its gradient is 0 (the smallest
  subgradient, no NaN where the function is finite) and so are its second
  derivatives, as ``abs``'s are at 0 (hypot(x, 0) = |x|). JAX gives NaN. atan2's
  derivatives, whose value there NumPy defines as 0, are 0 likewise.
- (inf, 1): the limits, hypot's gradient (1, 0) and every second derivative 0.
- (nan, 1): NaN in every entry.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

import extreme_second_order_functions as ef
from compiled import BuiltConfig
from conftest import SUPPORT
from difgen.ad import jvp
from difgen.frontend import trace
from difgen.primitives import binary
from difgen.primitives.heads import binary as binary_heads

CONFIGS = [
    ("sympy", "auto", "auto"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
    ("trace", "forward", "c"),
    ("trace", "reverse", "c"),
]
FUNCTIONS = list(ef.EXACT)
OPERATORS = ["gradient", "hessian", "hvp"]
RTOL = 8 * 2.0**-52
"""8 ulps (relative 1.8e-15): a second derivative is a product of two values of
about 3 ulps each (a quotient, a hypot of 1 and a quotient, another quotient)."""
ATOL = 8 * 2.0**-1074
"""Results below the normal range (subnormal or 0) to a few subnormal steps."""
V = np.array([0.7, -1.3])

FINITE = [
    (1e300, -1e300),
    (3e-160, 4e-160),
    (1.0, 1e-300),
    (1e-300, 1.0),
    (3.0, 4.0),
    (0.3, -1.7),
    (1e200, 3e200),
    (1e-100, 2e-100),
    (1e308, 1e308),
    (-1e-150, 5e-151),
    (0.1, 1.0),
    (1e-3, 1.0),
    (1.0, 1.0000001),
    (1e-100, 1.0000001e-100),
    (1.7e308, 1.6e308),
    (40.0, 0.0),
    (1000.0, 1000.0),
    (-1000.0, -1001.0),
    (-745.0, 0.0),
]
"""Points whose derivatives are floats (normal, subnormal or an underflow to 0)
for at least one function; an entry whose exact value is beyond the largest
double must come out non-finite (inf, or NaN where inf meets a zero seed)."""
OVERFLOWING = [(3e-320, 4e-320)]
"""hypot's and atan2's second derivatives all overflow; the gradient is exact
(logaddexp's are 1/4 there, as at every point where a == b)."""
HYPOT_FAMILY = ["hypot_pair", "arctan2_pair"]


def _name(function: str, backend: str, mode: str, emit: str) -> str:
    return f"{function}_{backend}_{mode}_{emit}"


class Modules(BuiltConfig):
    """Every (function, configuration) module, built in one build (C compiled)."""

    def __init__(self, directory: Path) -> None:
        shutil.copy(SUPPORT / "extreme_second_order_functions.py", directory)
        parts = ['[difgen]\noutput_dir = "out"\n']
        for function in FUNCTIONS:
            for backend, mode, emit in CONFIGS:
                parts.append(
                    "[[module]]\n"
                    f'name = "{_name(function, backend, mode, emit)}"\n'
                    f'function = "extreme_second_order_functions.py:{function}"\n'
                    f"operators = {OPERATORS!r}\n".replace("'", '"')
                    + "input = { shape = [2] }\n"
                    f'backend = "{backend}"\nmode = "{mode}"\nemit = "{emit}"\n'
                )
        super().__init__(directory, "\n".join(parts))


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Modules:
    return Modules(tmp_path_factory.mktemp("extreme_second_order"))


def _exact(function: str, order: int, a: float, b: float) -> np.ndarray:
    """The exact gradient (order 1) or hessian (order 2) as floats, by mpmath."""
    with mp.workdps(50):
        value = ef.EXACT[function][order - 1](mp.mpf(a), mp.mpf(b))
        return np.array(value, dtype=object).astype(float)


def assert_close(actual: Any, expected: np.ndarray, what: str) -> None:
    """Within 8 ulps of the exact value where that is a float; non-finite where
    it overflows (inf, or NaN from inf * 0)."""
    actual = np.asarray(actual, dtype=float)
    big = np.isinf(expected)
    assert not np.isfinite(actual[big]).any(), f"{what}: finite where it overflows"
    np.testing.assert_allclose(
        actual[~big], expected[~big], rtol=RTOL, atol=ATOL, err_msg=what
    )


CASES = [
    pytest.param(function, *config, id=_name(function, *config))
    for function in FUNCTIONS
    for config in CONFIGS
]
HYPOT_CASES = [
    pytest.param(function, *config, id=_name(function, *config))
    for function in HYPOT_FAMILY
    for config in CONFIGS
]


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), CASES)
def test_second_derivatives_at_extreme_points(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """The gradient, hessian and hvp at huge, tiny and lopsided points, each to
    8 ulps of mpmath; where an entry overflows, not a finite number."""
    mod = modules.get(_name(function, backend, mode, emit))
    for a, b in FINITE:
        x = np.array([a, b])
        hessian = _exact(function, 2, a, b)
        with np.errstate(all="ignore"):
            assert_close(mod.gradient(x), _exact(function, 1, a, b), f"grad {a, b}")
            assert_close(mod.hessian(x), hessian, f"hessian at {a, b}")
            if np.isfinite(hessian).all():
                with mp.workdps(50):
                    hvp = np.array(
                        (mp.matrix(hessian.tolist()) * mp.matrix(V.tolist())).tolist()
                    ).astype(float)
                assert_close(mod.hvp(x, V), hvp.ravel(), f"hvp at {a, b}")


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), HYPOT_CASES)
def test_overflowing_second_derivatives(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """At (3e-320, 4e-320) the gradient is exact and no second derivative is a
    finite number (they are ~1e319 and beyond)."""
    mod = modules.get(_name(function, backend, mode, emit))
    for a, b in OVERFLOWING:
        x = np.array([a, b])
        with np.errstate(all="ignore"):
            assert_close(mod.gradient(x), _exact(function, 1, a, b), "gradient")
            assert not np.isfinite(mod.hessian(x)).any()
            assert not np.isfinite(mod.hvp(x, V)).any()


nan = np.nan
ZERO = np.zeros((2, 2))
SOFTMAX = np.array([[0.25, -0.25], [-0.25, 0.25]])
SPECIAL: dict[tuple[float, float], dict[str, tuple[list[float], Any]]] = {
    # point: (gradient, hessian) of each function
    (0.0, 0.0): {
        "hypot_pair": ([0.0, 0.0], ZERO),
        "arctan2_pair": ([0.0, 0.0], ZERO),
        "logaddexp_pair": ([0.5, 0.5], SOFTMAX),
        "logaddexp2_pair": ([0.5, 0.5], SOFTMAX * np.log(2.0)),
    },
    (np.inf, 1.0): {
        "hypot_pair": ([1.0, 0.0], ZERO),
        "arctan2_pair": ([0.0, 0.0], ZERO),
        "logaddexp_pair": ([1.0, 0.0], ZERO),
        "logaddexp2_pair": ([1.0, 0.0], ZERO),
    },
    (nan, 1.0): dict.fromkeys(FUNCTIONS, ([nan, nan], np.full((2, 2), nan))),
}


@pytest.mark.parametrize(("function", "backend", "mode", "emit"), CASES)
def test_special_points(
    modules: Modules, function: str, backend: str, mode: str, emit: str
) -> None:
    """(0, 0): hypot's and atan2's gradient and second derivatives are 0 (the
    smallest subgradient; JAX gives NaN), logaddexp's the softmax's 1/2 and 1/4;
    (inf, 1): the limits; (nan, 1): NaN."""
    mod = modules.get(_name(function, backend, mode, emit))
    for (a, b), table in SPECIAL.items():
        gradient, hessian = table[function]
        x = np.array([a, b])
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(mod.gradient(x), gradient, f"{a, b}")
            np.testing.assert_allclose(mod.hessian(x), hessian, rtol=RTOL, atol=0)
            np.testing.assert_allclose(mod.hvp(x, V), hessian @ V, rtol=RTOL, atol=0)


THIRD = [
    (3.0, 4.0),
    (0.3, -1.7),
    (1e150, -2e150),
    (1e-100, 2e-100),
    (1e300, -1e300),
    (1.0, 1e-8),
]
"""Points whose third derivatives (~1 / h**2) are floats or underflow to 0."""
ORDERS = [(3, 0), (2, 1), (1, 2), (0, 3)]


@functools.cache
def _third_exact(function: str) -> Any:
    """The third partial derivatives as mpmath functions, from SymPy's closed form."""
    a, b = sp.symbols("a b", real=True)
    f = {
        "hypot_pair": sp.sqrt(a * a + b * b),
        "arctan2_pair": sp.atan2(a, b),
        "logaddexp_pair": sp.log(sp.exp(a) + sp.exp(b)),
        "logaddexp2_pair": sp.log(2**a + 2**b) / sp.log(2),
    }[function]
    return [sp.lambdify((a, b), sp.diff(f, a, i, b, j), "mpmath") for i, j in ORDERS]


def _third_expected(function: str, a: float, b: float) -> np.ndarray:
    with mp.workdps(50):
        return np.array(
            [float(d(mp.mpf(a), mp.mpf(b))) for d in _third_exact(function)]
        )


THIRD_SOFTMAX = [(3.0, 4.0), (0.3, -1.7), (40.0, 0.0), (-20.0, -21.0), (2.0, 2.5)]
"""logaddexp's points (its closed form at 1e150 needs more than 50 digits)."""


@pytest.mark.parametrize("function", FUNCTIONS)
def test_third_order_of_the_graph(function: str) -> None:
    """Forward over forward over forward on the traced graph (the trace backend's
    rules): each third partial derivative to 16 ulps of mpmath (three products
    of slopes, and one difference of the value's own, b**2 - a**2)."""
    g = jvp(
        jvp(jvp(trace(getattr(ef, function), [((2,), "float64")])), (True, False)),
        (True, False, False),
    )
    e = np.eye(2)
    for a, b in THIRD if function in HYPOT_FAMILY else THIRD_SOFTMAX:
        x = np.array([a, b])
        got = [
            float(
                g.evaluate(
                    x, e[0 if i > 0 else 1], e[0 if i > 1 else 1], e[0 if i > 2 else 1]
                )[-1]
            )
            for i, _ in ORDERS
        ]
        np.testing.assert_allclose(
            got,
            _third_expected(function, a, b),
            rtol=2 * RTOL,
            atol=ATOL,
            err_msg=f"{function} at {a, b}",
        )


@pytest.mark.parametrize("function", HYPOT_FAMILY)
def test_third_order_of_the_sympy_heads(function: str) -> None:
    """The sympy backend's heads differentiate to the same third derivatives:
    NpHypot -> HypotUnit -> HypotSlope -> HypotGap (atan2 -> HypotSlope), each head
    evaluated by its NumPy value."""
    a, b = sp.symbols("a b", real=True)
    head = binary_heads.NpHypot if function == "hypot_pair" else binary_heads.Atan2
    values = {
        "HypotUnit": binary._hypot_unit_value,
        "HypotSlope": binary._hypot_slope_value,
        "HypotGap": binary._hypot_gap_value,
        "NpHypot": np.hypot,
        "atan2": np.arctan2,
    }
    derivatives = [
        sp.lambdify((a, b), sp.diff(head(a, b), a, i, b, j), [values, "numpy"])
        for i, j in ORDERS
    ]
    for p, q in THIRD:
        got = [float(d(np.float64(p), np.float64(q))) for d in derivatives]
        np.testing.assert_allclose(
            got,
            _third_expected(function, p, q),
            rtol=2 * RTOL,
            atol=ATOL,
            err_msg=f"{function} at {p, q}",
        )
