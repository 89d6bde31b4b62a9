"""Removable singularities: derivatives at and near a point where the closed form is
0/0 (or inf * 0) but the function is smooth, to third order, against mpmath.

``np.sinc`` is the case the design is built on (``sin(pi x) / (pi x)``, 1 at 0): a
compound ``where(x == 0, ...)`` would take every derivative at 0 from the constant
branch (``second_derivative`` 0 where the exact value is -pi^2/3) and lose all
digits of the second derivative at 1e-8 to cancellation. Checked on the traced IR
(forward to third order, reverse over forward), on SymPy's ``diff`` of the
primitive's head (to third order, printed by the scalar printer), and in generated
modules of both backends, every emission and both modes, on scalar, vector and
matrix inputs; at inf and NaN the value is NumPy's and the derivatives NaN.
"""

from __future__ import annotations

import math
import shutil
from typing import Any

import mpmath
import numpy as np
import pytest
import sympy as sp

from compiled import Built
from conftest import SUPPORT
from difgen import floats
from difgen.ad import jvp, vjp
from difgen.derive.lowering import inert
from difgen.frontend import trace
from difgen.primitives.heads.singular import NpSinc
from difgen.primitives.singular import SINC_SERIES
from difgen.targets.c.extension import c_expr
from difgen.targets.python.printer import FloatPrinter
from surface_harness import same

POINTS = [
    0.0,
    1e-300,
    -1e-300,
    1e-8,
    -1e-8,
    1e-4,
    -1e-4,
    0.1,
    -0.1,
    0.5,
    -0.5,
    1.0,
    -1.0,
    2.5,
    -2.5,
    1e3,
    -1e3,
    # either side of the switch from series to closed form
    SINC_SERIES,
    -SINC_SERIES,
    math.nextafter(SINC_SERIES, 0.0),
    math.nextafter(-SINC_SERIES, 0.0),
]
NONFINITE = [math.inf, -math.inf, math.nan]
ORDERS = range(4)


def exact_sinc(x: float, k: int) -> float:
    """The k-th derivative of sin(pi x) / (pi x) at the float x, by mpmath at 50
    significant digits (more working digits near 0, where mpmath's differences of
    values near 1 need them to resolve a derivative of size x). The function is
    even: its odd derivatives at 0 are exactly 0 (mpmath's differences leave 1e-67)."""
    if x == 0.0 and k % 2:
        return 0.0
    digits = 50 + (int(-math.log10(abs(x))) if 0.0 < abs(x) < 1.0 else 0)
    with mpmath.workdps(digits):
        return float(mpmath.diff(mpmath.sincpi, mpmath.mpf(x), k))


def agree(actual: Any, x: float, k: int) -> None:
    """Within 1e-12 of the exact value, relative; where the derivative has zeros
    (|x| >= 1/2, not counting the odd orders' zero at 0, which the series meets
    exactly), also within 1e-14 * pi^k absolute."""
    expected = exact_sinc(x, k)
    atol = 1e-14 * math.pi ** k if abs(x) >= 0.5 else 0.0
    value = float(np.asarray(actual))
    assert abs(value - expected) <= 1e-12 * abs(expected) + atol, (
        x,
        k,
        value,
        expected,
    )


# ------------------------------------------------------------------ traced IR
@pytest.fixture(scope="module")
def sinc_graph() -> Any:
    return trace(lambda x: np.sinc(x), [((), "float64")])


def forward(g: Any, k: int) -> Any:
    """The graph of the k-th forward derivative (inputs x, then k seeds)."""
    for order in range(k):
        g = jvp(g, (True,) + (False,) * order) if order else jvp(g)
    return g


def test_the_traced_value_is_numpys(sinc_graph: Any) -> None:
    with np.errstate(all="ignore"):
        for x in POINTS + NONFINITE:
            same(sinc_graph.evaluate(np.array(x))[0], np.sinc(np.array(x)))


@pytest.mark.parametrize("k", ORDERS)
def test_trace_forward_derivatives_to_third_order(sinc_graph: Any, k: int) -> None:
    g = forward(sinc_graph, k)
    seeds = [np.array(1.0)] * k
    for x in POINTS:
        agree(g.evaluate(np.array(x), *seeds)[-1], x, k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_trace_reverse_over_forward_to_third_order(sinc_graph: Any, k: int) -> None:
    """The last derivative taken in reverse mode (a transpose of the where)."""
    first = forward(sinc_graph, k - 1)
    g = vjp(first, (True,) + (False,) * (k - 1))
    seeds = [np.array(1.0)] * (k - 1)
    # a cotangent on the last output (the (k-1)-th derivative) only
    cts = [np.array(0.0)] * (len(first.outputs) - 1) + [np.array(1.0)]
    for x in POINTS:
        agree(g.evaluate(np.array(x), *seeds, *cts)[-1], x, k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_trace_derivatives_at_nonfinite_points_are_nan(sinc_graph: Any, k: int) -> None:
    g = forward(sinc_graph, k)
    with np.errstate(all="ignore"):
        for x in NONFINITE:
            out = g.evaluate(np.array(x), *[np.array(1.0)] * k)[-1]
            assert np.isnan(out), (x, k, out)


# ------------------------------------------------------------------ SymPy head
X = sp.Symbol("x")


def scalar_code(expr: Any) -> Any:
    """``expr`` printed by the scalar emission's printer, as a function of x."""
    printer = FloatPrinter()
    text = printer.doprint(inert(expr))
    helpers = floats.definitions(printer.helpers)  # what the printer reports it used
    source = "".join(helpers) + f"def fn(x):\n    return {text}\n"
    namespace: dict[str, Any] = {"math": math, "np": np}
    exec(source, namespace)  # noqa: S102 (difgen's own printed code)
    return namespace["fn"]


@pytest.mark.parametrize("k", ORDERS)
def test_sympy_derivatives_to_third_order(k: int) -> None:
    """SymPy's diff of the head, k times, printed as the scalar emission prints it."""
    fn = scalar_code(sp.diff(NpSinc(X), X, k))
    for x in POINTS:
        agree(fn(x), x, k)


def test_the_head_prints_numpys_formula() -> None:
    """In Python floats and in C: NumPy's ``y = pi * where(x == 0, 1e-20, x)``."""
    fn = scalar_code(NpSinc(X))
    for x in POINTS + NONFINITE:
        same(fn(x), np.sinc(x))
    text = c_expr(inert(NpSinc(X)))
    assert text == (
        "_div(_sin(3.141592653589793 * (((x == 0.0)) ? (1e-20) : (x))), "
        "3.141592653589793 * (((x == 0.0)) ? (1e-20) : (x)))"
    )


# ----------------------------------------------------------- generated modules
SCALAR_OPS = ["derivative", "second_derivative", "pushforward"]
REVERSE_OPS = ["gradient", "hessian", "hvp", "pullback"]
CONFIGS = [
    ("sympy", "auto", "scalar"),
    ("trace", "forward", "vector"),
    ("trace", "reverse", "vector"),
    ("trace", "forward", "scalar"),
    ("trace", "reverse", "scalar"),
]
# every point is checked on the scalar module; the arrays check the shapes and the
# elementwise structure on a few (scalar emission of a hessian grows with the square)
ARRAY = np.array([0.0, -1e-300, 1e-8, -0.1, 0.5, -SINC_SERIES, 1e3])
MATRIX = np.array([[-0.0, 1e-4, -1e-8], [SINC_SERIES, -2.5, 1.0]])


# At finite points no branch may divide by zero or make a NaN, even one that is not
# selected (a where's branches are both evaluated; a cse hoists out of a Piecewise)
FINITE_CLEAN = {"divide": "raise", "invalid": "raise", "over": "raise"}


def check_scalar_module(mod: Any) -> None:
    """Every operator of the scalar sinc module at every point, and at inf/NaN."""
    one = 1.0
    with np.errstate(**FINITE_CLEAN):
        for x in POINTS:
            same(mod.f(x), np.sinc(x))
            agree(mod.derivative(x), x, 1)
            agree(mod.second_derivative(x), x, 2)
            agree(mod.pushforward(x, one), x, 1)
            agree(mod.pullback(x, one), x, 1)
            agree(mod.gradient(x), x, 1)
            agree(mod.hessian(x), x, 2)
            agree(mod.hvp(x, one), x, 2)
    with np.errstate(all="ignore"):
        for x in NONFINITE:
            same(mod.f(x), np.sinc(x))
            for op in ("derivative", "second_derivative", "gradient", "hessian"):
                assert np.isnan(getattr(mod, op)(x)), (op, x)


def check_array_modules(elementwise: Any, summed: Any, x: np.ndarray) -> None:
    """Elementwise pushforward/pullback (ones: the derivative of each element) and
    the gradient, hessian diagonal and hvp of the sum."""
    ones = np.ones_like(x)
    with np.errstate(**FINITE_CLEAN):
        same(elementwise.f(x), np.sinc(x))
        pushed = elementwise.pushforward(x, ones)
        pulled = elementwise.pullback(x, ones)
        grad, hess, hv = summed.gradient(x), summed.hessian(x), summed.hvp(x, ones)
    hess = np.asarray(hess).reshape(x.size, x.size)
    assert np.count_nonzero(hess - np.diag(np.diag(hess))) == 0
    for i, xi in enumerate(x.ravel()):
        agree(np.ravel(pushed)[i], float(xi), 1)
        agree(np.ravel(pulled)[i], float(xi), 1)
        agree(np.ravel(grad)[i], float(xi), 1)
        agree(hess[i, i], float(xi), 2)
        agree(np.ravel(hv)[i], float(xi), 2)


@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
def test_scalar_module(module_cache: Any, backend: str, mode: str, emit: str) -> None:
    mod, _ = module_cache(
        SUPPORT / "singularity_cases.py",
        "sinc_scalar",
        (),
        ["f", *SCALAR_OPS, *REVERSE_OPS],
        backend=backend,
        mode=mode,
        emit=emit,
    )
    check_scalar_module(mod)


@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
@pytest.mark.parametrize("x", [ARRAY, MATRIX], ids=["vector", "matrix"])
def test_array_modules(
    module_cache: Any, backend: str, mode: str, emit: str, x: np.ndarray
) -> None:
    options = {"backend": backend, "mode": mode, "emit": emit}
    source = SUPPORT / "singularity_cases.py"
    elementwise, _ = module_cache(
        source, "sinc_array", x.shape, ["f", "pushforward", "pullback"], **options
    )
    summed, _ = module_cache(
        source, "sinc_sum", x.shape, ["gradient", "hessian", "hvp"], **options
    )
    check_array_modules(elementwise, summed, x)


# ---------------------------------------------------------------- emit = "c"
@pytest.fixture(scope="module")
def c_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sinc modules with ``emit = "c"`` on both backends, compiled once."""
    directory = tmp_path_factory.mktemp("singularities_c")
    shutil.copy(SUPPORT / "singularity_cases.py", directory)
    parts = ['[difgen]\noutput_dir = "out"\n']
    for backend in ("sympy", "trace"):
        for name, function, shape, ops in (
            ("scalar", "sinc_scalar", [], ["f", *SCALAR_OPS, *REVERSE_OPS]),
            (
                "array",
                "sinc_array",
                list(ARRAY.shape),
                ["f", "pushforward", "pullback"],
            ),
            ("summed", "sinc_sum", list(ARRAY.shape), ["gradient", "hessian", "hvp"]),
        ):
            quoted = ", ".join(f'"{op}"' for op in ops)
            parts.append(
                f'[[module]]\nname = "{backend}_{name}"\n'
                f'function = "singularity_cases.py:{function}"\n'
                f'backend = "{backend}"\nemit = "c"\noperators = [{quoted}]\n'
                f"input = {{ shape = {shape} }}\n"
            )
    (directory / "difgen.toml").write_text("\n".join(parts))
    return Built(directory)


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_compiled_modules(c_built: Built, backend: str) -> None:
    check_scalar_module(c_built.compiled(f"{backend}_scalar"))
    check_array_modules(
        c_built.compiled(f"{backend}_array"),
        c_built.compiled(f"{backend}_summed"),
        ARRAY,
    )


# ------------------------------------------------------------------ the audit
# Every compound and identity that decides a value with where (or a constant branch)
# was read for the same trap (tests/support/singularity_cases.py names each point); these
# are the candidates whose derivatives exist at the point: they must not come from
# the branch. Exact values: mpmath at 50 digits (one-sided where the function is
# undefined on one side).
def _power(a: Any, b: Any) -> Any:
    return a**b


def _logaddexp(a: Any, b: Any) -> Any:
    return mpmath.log(mpmath.exp(a) + mpmath.exp(b))


def _logaddexp2(a: Any, b: Any) -> Any:
    return mpmath.log(mpmath.power(2, a) + mpmath.power(2, b), 2)


def _linspace_flat(a: Any, b: Any) -> Any:
    return sum((a + (b - a) * i / 4) ** 2 * (i + 1) for i in range(5))


AUDIT = {
    # name: (exact function, point, one-sided in x[0])
    "power_at_zero": (_power, (0.0, 3.5), True),
    "logaddexp_tie": (_logaddexp, (0.3, 0.3), False),
    "logaddexp2_tie": (_logaddexp2, (-1.5, -1.5), False),
    "linspace_flat": (_linspace_flat, (0.7, 0.7), False),
}


def exact_partial(name: str, orders: tuple[int, int]) -> float:
    fn, point, one_sided = AUDIT[name]
    with mpmath.workdps(50):
        if one_sided:
            return float(mpmath.diff(fn, point, orders, direction=1))
        return float(mpmath.diff(fn, point, orders))


def partials(k: int) -> list[tuple[int, ...]]:
    """The k-th order derivatives of a function of two variables, as index tuples."""
    return list(np.ndindex(*(2,) * k))


def orders_of(index: tuple[int, ...]) -> tuple[int, int]:
    return (index.count(0), index.count(1))


def agree_partial(actual: Any, name: str, index: tuple[int, ...]) -> None:
    expected = exact_partial(name, orders_of(index))
    value = float(np.asarray(actual))
    tol = 1e-12 * abs(expected) + 1e-14
    assert abs(value - expected) <= tol, (name, index, value, expected)


@pytest.mark.parametrize("name", sorted(AUDIT))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_audit_trace_derivatives_to_third_order(name: str, k: int) -> None:
    import singularity_cases as cases

    fn = getattr(cases, name)
    g = forward(trace(fn, [((2,), "float64")]), k)
    x = np.array(AUDIT[name][1])
    basis = np.eye(2)
    with np.errstate(all="ignore"):
        for index in partials(k):
            out = g.evaluate(x, *(basis[i] for i in index))[-1]
            agree_partial(out, name, index)


@pytest.mark.parametrize("name", sorted(AUDIT))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_audit_sympy_derivatives_to_third_order(name: str, k: int) -> None:
    """SymPy's diff of the lowered function, printed by the scalar printer."""
    import singularity_cases as cases
    from difgen.derive.lowering import lower, symbols

    g = trace(getattr(cases, name), [((2,), "float64")])
    xs = symbols("x", (2,))
    (y,) = lower(g, [xs])
    a, b = xs.ravel()
    for index in partials(k):
        expr = sp.diff(y[()], *(xs.ravel()[i] for i in index))
        printer = FloatPrinter()
        text = printer.doprint(inert(expr))
        source = "".join(floats.definitions(printer.helpers))
        source += f"def fn({a}, {b}):\n    return {text}\n"
        namespace: dict[str, Any] = {"math": math, "np": np}
        exec(source, namespace)  # noqa: S102 (difgen's own printed code)
        agree_partial(namespace["fn"](*AUDIT[name][1]), name, index)


@pytest.mark.parametrize("name", sorted(AUDIT))
@pytest.mark.parametrize("backend,mode,emit", CONFIGS)
def test_audit_modules(
    module_cache: Any, name: str, backend: str, mode: str, emit: str
) -> None:
    """Gradient and hessian of the generated modules at the point."""
    mod, _ = module_cache(
        SUPPORT / "singularity_cases.py",
        name,
        (2,),
        ["gradient", "hessian"],
        backend=backend,
        mode=mode,
        emit=emit,
    )
    x = np.array(AUDIT[name][1])
    with np.errstate(all="ignore"):
        grad, hess = mod.gradient(x), mod.hessian(x)
    for index in partials(1):
        agree_partial(grad[index], name, index)
    for index in partials(2):
        agree_partial(hess[index], name, index)
