"""Class 2: NumPy semantics in every emission.

For NaN, +-inf, 0, -0, negatives, tiny and huge inputs, ``f`` and every value of a
``value_and_*`` operator equal what NumPy computes for the user's function: NaN
where NumPy gives NaN, the same infinities, zero where NumPy rounds to zero, never
a ``math domain error``, ``ZeroDivisionError``, ``OverflowError`` or a complex
number. Simplification identities (``x/x``, ``x - x``, ``0*x``, ``y*(c/y)``) must not
turn NumPy's NaN/inf into a finite value. Where the function is finite and
differentiable its derivatives are exact. Zero-size shapes keep NumPy's shapes.

Every case runs on the sympy backend and on both emissions of the trace backend.
Finite values are compared to 1e-14 relative (summation order may differ by a few
ulps); NaN, infinities and zeros must match exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from .adversarial_support import Builder, Built, quiet_numpy, rows

VARIANTS: dict[str, dict[str, str]] = {
    "sympy": {"backend": "sympy"},
    "trace-scalar": {"backend": "trace", "emit": "scalar"},
    "trace-vector": {"backend": "trace", "emit": "vector"},
}

nan, inf = np.nan, np.inf
INPUTS = [
    np.array([nan, inf, -inf, 0.0]),
    np.array([-0.0, -2.0, -0.5, 1e-20]),
    np.array([0.1, 1.0, 3.0, 800.0]),
    np.array([1e200, -1e200, 0.5, 5e-324]),
]
"""Special values, four at a time (a small input keeps the scalar builds fast)."""

VALUE_OPERATORS = ("value_and_jacobian", "value_and_pullback")
"""Forward (dense Jacobian) and reverse (pullback) code paths, each with its value."""
SCALAR_OPERATORS = ("value_and_gradient", "value_gradient_and_hessian")


def assert_numpy_equal(got: Any, expected: Any, what: str) -> None:
    """Same shape, NaN/inf/zero exactly where NumPy has them, finite values to 1e-14."""
    got_array = np.asarray(got)
    assert not np.iscomplexobj(got_array), f"{what}: complex result {got!r}"
    got_array = got_array.astype(np.float64)
    expected_array = np.asarray(expected, dtype=np.float64)
    assert got_array.shape == expected_array.shape, (what, got_array.shape)
    np.testing.assert_allclose(
        got_array, expected_array, rtol=1e-14, atol=0, equal_nan=True, err_msg=what
    )
    zeros = expected_array == 0
    np.testing.assert_array_equal(got_array[zeros], 0.0, err_msg=what)


# ------------------------------------------------------------ elementwise cases


@dataclass(frozen=True)
class Case:
    """``f(x) = body`` on a 4-vector; ``deriv`` is NumPy's df/dx elementwise, NaN
    where the function is not differentiable (those entries are not checked), or
    None when f is nowhere finite (no derivative to check)."""

    name: str
    body: str
    deriv: Callable[[np.ndarray], np.ndarray] | None


def _subnormal(x: np.ndarray) -> np.ndarray:
    return (x != 0) & (np.abs(x) < np.finfo(np.float64).tiny)


def _where(cond: np.ndarray, value: Any) -> np.ndarray:
    return np.where(cond, value, np.nan)


ELEMENTWISE = [
    Case("log", "np.log(x)", lambda x: 1.0 / x),
    Case("log1p", "np.log1p(x)", lambda x: 1.0 / (1.0 + x)),
    Case("sqrt", "np.sqrt(x)", lambda x: _where(x > 0, 0.5 / np.sqrt(x))),
    Case("exp", "np.exp(x)", np.exp),
    Case("reciprocal", "1.0 / x", lambda x: -1.0 / (x * x)),
    Case("pow_1_5", "x ** 1.5", lambda x: _where(x > 0, 1.5 * np.sqrt(x))),
    Case("pow_2", "x ** 2", lambda x: 2.0 * x),
    Case("pow_neg_2", "x ** -2.0", lambda x: -2.0 * x**-3.0),
    Case("two_to_x", "2.0 ** x", lambda x: np.log(2.0) * 2.0**x),
    Case("sin", "np.sin(x)", np.cos),
    Case("tan", "np.tan(x)", lambda x: 1.0 / np.cos(x) ** 2),
    Case("arcsin", "np.arcsin(x)", lambda x: 1.0 / np.sqrt(1.0 - x * x)),
    Case("arctanh", "np.arctanh(x)", lambda x: 1.0 / (1.0 - x * x)),
    Case("cosh", "np.cosh(x)", np.sinh),
    Case("tanh", "np.tanh(x)", lambda x: 1.0 - np.tanh(x) ** 2),
    Case("maximum", "np.maximum(x, 0.0)", lambda x: _where(x != 0, (x > 0) * 1.0)),
    Case("minimum", "np.minimum(x, 1.0)", lambda x: _where(x != 1, (x < 1) * 1.0)),
    Case(
        "clip",
        "np.clip(x, -1.0, 1.0)",
        lambda x: _where(abs(x) != 1, (abs(x) < 1) * 1.0),
    ),
    Case("abs", "np.abs(x)", lambda x: _where(x != 0, np.sign(x))),
    Case(
        "where_sqrt",
        "np.where(x > 0, np.sqrt(x), 0.0)",
        lambda x: _where(x != 0, np.where(x > 0, 0.5 / np.sqrt(np.abs(x)), 0.0)),
    ),
    Case("div_self", "x / x", lambda x: 0.0 * x),
    Case("sub_self", "x - x", lambda x: 0.0 * x),
    Case("zero_mul", "0.0 * x", lambda x: 0.0 * x),
    Case("mul_div", "x * (2.0 / x)", lambda x: 0.0 * x),
    Case("add_sub", "(x + 1.0) - 1.0", lambda x: 1.0 + 0.0 * x),
    Case("exp_log", "np.exp(np.log(x))", lambda x: _where(x > 0, 1.0)),
    Case("sq_div", "x ** 2 / x", lambda x: 1.0 + 0.0 * x),
    Case("zero_log", "x + 0.0 * np.log(x)", lambda x: _where(x > 0, 1.0)),
    # Non-finite constants in the trace: NumPy computes with them like any other.
    Case("div_zero_const", "x / 0.0", None),
    Case("times_inf", "x * np.inf", None),
    Case("plus_nan", "x + np.nan", None),
    Case("log_zero_const", "x + np.log(np.zeros(4))", None),
]

SOURCE = "import numpy as np\n" + "".join(
    f"\n\ndef {case.name}(x):\n    return {case.body}\n" for case in ELEMENTWISE
)

CASES = {case.name: case for case in ELEMENTWISE}
MATRIX = [(case.name, variant) for case in ELEMENTWISE for variant in VARIANTS]
DERIV_MATRIX = [
    (case.name, variant) for case in ELEMENTWISE if case.deriv for variant in VARIANTS
]


def _id(row: tuple[Any, ...]) -> str:
    return "-".join(str(part) for part in row)


def _elementwise(build: Builder, name: str, variant: str) -> Built:
    return build(SOURCE, name, (4,), VALUE_OPERATORS, **VARIANTS[variant])


SCALAR = ("sympy", "trace-scalar")
ALL = tuple(VARIANTS)
DOMAIN = "scalar emission: math.* raises ValueError (math domain error) where NumPy gives nan/-inf"
OVERFLOW = "scalar emission: math.*/** raise OverflowError where NumPy gives inf"
ZERODIV = (
    "scalar emission: float division raises ZeroDivisionError where NumPy gives inf/nan"
)
IDENTITY = "a simplification identity turns NumPy's NaN/inf into a finite value"

CONSTANT = (
    "the build crashes with a traceback (ValueError: Invalid literal for "
    "Fraction: 'inf'/'nan') on a non-finite constant in the trace"
)


@pytest.mark.parametrize(("name", "variant"), rows(MATRIX, id_of=_id))
def test_values_equal_numpy(build: Builder, name: str, variant: str) -> None:
    """f and the value of every value_and_* operator are NumPy's, special values too."""
    built = _elementwise(build, name, variant)
    module = built.module
    ones = np.ones(4)
    with quiet_numpy():
        for x in INPUTS:
            expected = built.call_reference(x)
            assert_numpy_equal(module.f(x.copy()), expected, f"f({x})")
            for op, args in (
                ("value_and_jacobian", ()),
                ("value_and_pullback", (ones,)),
            ):
                value = getattr(module, op)(x.copy(), *args)[0]
                assert_numpy_equal(value, expected, f"{op}({x})[0]")


@pytest.mark.parametrize(("name", "variant"), rows(DERIV_MATRIX, id_of=_id))
def test_derivatives_exact_where_finite(
    build: Builder, name: str, variant: str
) -> None:
    """Where f(x_i) and NumPy's derivative are finite, Jacobian row i is exact:
    the derivative on the diagonal, exactly 0 elsewhere."""
    built = _elementwise(build, name, variant)
    module = built.module
    with quiet_numpy():
        for x in INPUTS:
            value = np.asarray(built.call_reference(x))
            deriv_of = CASES[name].deriv
            assert deriv_of is not None
            deriv = np.asarray(deriv_of(x.copy()), dtype=np.float64)
            # Subnormal inputs are left out: there the chain rule itself
            # overflows (1/5e-324 = inf), in NumPy, JAX and difgen alike.
            good = np.isfinite(value) & np.isfinite(deriv) & ~_subnormal(x)
            jac = np.asarray(module.value_and_jacobian(x.copy())[1])
            expected = np.diag(deriv)[good]
            # atol: at x = 1e200 the chain rule of x * (2 / x) adds 2/x and
            # x * (-2/x**2), which overflows to -0: 2e-200 is the rounding residue
            # of terms of that size (JAX gives the same), not a wrong derivative.
            np.testing.assert_allclose(
                jac[good], expected, rtol=1e-12, atol=1e-190, err_msg=f"jacobian at {x}"
            )


# ----------------------------------------------------------- reductions (scalar y)

REDUCTIONS = {
    "sum": "np.sum(x)",
    "prod": "np.prod(x)",
    "max": "np.max(x)",
    "min": "np.min(x)",
    "mean": "np.mean(x)",
    "sum_squares": "np.sum(x * x)",
    "log_sum_exp": "np.log(np.sum(np.exp(x)))",
}
REDUCTION_SOURCE = "import numpy as np\n" + "".join(
    f"\n\ndef {name}(x):\n    return {body}\n" for name, body in REDUCTIONS.items()
)
REDUCTION_MATRIX = [(name, variant) for name in REDUCTIONS for variant in VARIANTS]


@pytest.mark.parametrize(("name", "variant"), rows(REDUCTION_MATRIX, id_of=_id))
def test_reduction_values_equal_numpy(build: Builder, name: str, variant: str) -> None:
    """Reductions over special values: inf - inf, 0 * inf, NaN in max/min, overflow."""
    built = build(REDUCTION_SOURCE, name, (4,), SCALAR_OPERATORS, **VARIANTS[variant])
    module = built.module
    with quiet_numpy():
        for x in INPUTS:
            expected = built.call_reference(x)
            assert_numpy_equal(module.f(x.copy()), expected, f"f({x})")
            assert_numpy_equal(
                module.value_and_gradient(x.copy())[0],
                expected,
                f"value_and_gradient({x})[0]",
            )
            assert_numpy_equal(
                module.value_gradient_and_hessian(x.copy())[0],
                expected,
                f"value_gradient_and_hessian({x})[0]",
            )


# ------------------------------------------------------- exact derivatives (scalar y)


@dataclass(frozen=True)
class Exact:
    """A scalar function, a point where it is finite and differentiable, and its
    exact gradient and Hessian there (computed by hand)."""

    name: str
    body: str
    x: tuple[float, ...]
    gradient: Callable[[np.ndarray], np.ndarray]
    hessian: Callable[[np.ndarray], np.ndarray]


EXACT = [
    # d/dy 0**y = 0 for y > 0 (log(0) * 0**y is nan: the sympy backend's answer).
    Exact(
        "zero_base",
        "np.sum(np.power(0.0, x))",
        (0.5, 1.0, 2.0, 3.0),
        lambda x: 0 * x,
        lambda x: np.zeros((4, 4)),
    ),
    # A constant exponent has no log(base) term: at 0 and at negatives it is exact.
    Exact(
        "square_at_zero",
        "np.sum(x ** 2.0)",
        (0.0, -2.0, 0.0, 1.5),
        lambda x: 2 * x,
        lambda x: 2 * np.eye(4),
    ),
    Exact(
        "cube_at_zero",
        "np.sum(np.power(x, 3.0))",
        (0.0, -1.0, 2.0, 0.0),
        lambda x: 3 * x * x,
        lambda x: np.diag(6 * x),
    ),
    # The unselected branch's nan must not leak into the gradient (reverse mode).
    Exact(
        "where_sqrt",
        "np.sum(np.where(x > 0, np.sqrt(x), 0.0))",
        (-1.0, 4.0, -2.0, 1.0),
        lambda x: np.where(x > 0, 0.5 / np.sqrt(np.abs(x)), 0.0),
        lambda x: np.diag(np.where(x > 0, -0.25 * np.abs(x) ** -1.5, 0.0)),
    ),
    # |x|**3 is twice differentiable at 0: gradient 3x|x|, Hessian 6|x|.
    Exact(
        "abs_cubed",
        "np.sum(np.abs(x) ** 3)",
        (0.0, -1.0, 2.0, 0.0),
        lambda x: 3 * x * np.abs(x),
        lambda x: np.diag(6 * np.abs(x)),
    ),
    Exact(
        "maximum_squared",
        "np.sum(np.maximum(x, 0.0) ** 2)",
        (-1.0, 2.0, -3.0, 0.5),
        lambda x: 2 * np.maximum(x, 0),
        lambda x: np.diag(2.0 * (x > 0)),
    ),
    Exact(
        "x_to_x",
        "np.sum(x ** x)",
        (0.5, 1.0, 2.0, 3.0),
        lambda x: x**x * (np.log(x) + 1),
        lambda x: np.diag(x**x * ((np.log(x) + 1) ** 2 + 1 / x)),
    ),
    Exact(
        "log_one_plus_square",
        "np.sum(np.log1p(x * x))",
        (0.0, -1.0, 2.0, 0.0),
        lambda x: 2 * x / (1 + x * x),
        lambda x: np.diag(2 * (1 - x * x) / (1 + x * x) ** 2),
    ),
]
EXACT_BY_NAME = {case.name: case for case in EXACT}
EXACT_SOURCE = "import numpy as np\n" + "".join(
    f"\n\ndef {case.name}(x):\n    return {case.body}\n" for case in EXACT
)
EXACT_MATRIX = [(case.name, variant) for case in EXACT for variant in VARIANTS]


@pytest.mark.parametrize(("name", "variant"), rows(EXACT_MATRIX, id_of=_id))
def test_derivatives_exact(build: Builder, name: str, variant: str) -> None:
    """Gradient and Hessian equal the hand-computed ones (to 1e-12) where the
    function is finite and differentiable, even where a textbook rule gives nan."""
    case = EXACT_BY_NAME[name]
    built = build(EXACT_SOURCE, name, (4,), SCALAR_OPERATORS, **VARIANTS[variant])
    x = np.array(case.x)
    with quiet_numpy():
        value, gradient, hessian = built.module.value_gradient_and_hessian(x.copy())
        _, gradient_alone = built.module.value_and_gradient(x.copy())
        expected = built.call_reference(x)
    assert_numpy_equal(value, expected, "value")
    for got in (gradient, gradient_alone):
        np.testing.assert_allclose(got, case.gradient(x), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(hessian, case.hessian(x), rtol=1e-12, atol=1e-300)


# ----------------------------------------------------------------- zero-size shapes


@dataclass(frozen=True)
class Empty:
    """A function whose input or output has a zero-size dimension."""

    name: str
    body: str
    shape: tuple[int, ...]
    operators: tuple[str, ...]


EMPTY = [
    Empty("repeat_zero", "np.repeat(x, 0, axis=0)", (3, 1), ("jacobian", "pullback")),
    Empty("empty_input", "x * 2.0", (0, 3), ("jacobian", "pushforward")),
    Empty("empty_sum", "np.sum(x * x)", (0, 3), ("gradient", "hessian")),
    Empty("empty_slice", "x[:0] * 3.0", (3,), ("jacobian", "pushforward")),
    Empty("sum_empty_axis", "np.sum(x, axis=1)", (2, 0), ("jacobian", "pullback")),
]
EMPTY_BY_NAME = {case.name: case for case in EMPTY}
EMPTY_SOURCE = "import numpy as np\n" + "".join(
    f"\n\ndef {case.name}(x):\n    return {case.body}\n" for case in EMPTY
)
EMPTY_MATRIX = [(case.name, variant) for case in EMPTY for variant in VARIANTS]


@pytest.mark.parametrize(("name", "variant"), rows(EMPTY_MATRIX, id_of=_id))
def test_zero_size_shapes(build: Builder, name: str, variant: str) -> None:
    """f has NumPy's shape and values; the jacobian is y.shape + x.shape (zeros); a
    gradient has x's shape; seeds of zero size are accepted."""
    case = EMPTY_BY_NAME[name]
    built = build(EMPTY_SOURCE, name, case.shape, case.operators, **VARIANTS[variant])
    module = built.module
    x = np.arange(1.0, 1.0 + np.prod(case.shape)).reshape(case.shape)
    expected = np.asarray(built.call_reference(x))
    got = np.asarray(module.f(x.copy()))
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if "jacobian" in case.operators:
        jac = np.asarray(module.jacobian(x.copy()))
        assert jac.shape == expected.shape + case.shape
        assert not jac.any()
    if "gradient" in case.operators:
        gradient = np.asarray(module.gradient(x.copy()))
        assert gradient.shape == case.shape
        hessian = np.asarray(module.hessian(x.copy()))
        assert hessian.shape == case.shape + case.shape
    if "pushforward" in case.operators:
        jvp = np.asarray(module.pushforward(x.copy(), np.ones(case.shape)))
        assert jvp.shape == expected.shape
    if "pullback" in case.operators:
        vjp = np.asarray(module.pullback(x.copy(), np.ones(expected.shape)))
        assert vjp.shape == case.shape
        assert not vjp.any()
