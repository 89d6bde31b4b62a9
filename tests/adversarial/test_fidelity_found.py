"""Silent wrong answers found by review: each case is a NumPy function whose
generated ``f`` and ``value_and_jacobian`` value must equal NumPy's bit for bit
(NaN where NumPy has NaN, the sign of every zero), on the sympy backend and on both
emissions of the trace backend.

- NaN tests: SymPy's symbols are real, so ``x != x`` folded to False and
  ``not (x > 0)`` was rewritten ``x <= 0``, both wrong where x is NaN.
- Division by a constant: ``cse`` shared the reciprocal of ``x / 10.0`` and
  multiplied by it, which is not the same float (0.9 / 10 != 0.9 * 0.1).
- ``np.hypot`` written as ``sqrt(a*a + b*b)`` overflows at 1e200 and underflows at
  1e-300; ``np.log2``/``np.log10``/``np.exp2`` written through ``log``/``**`` are
  off in the last bit.
- ``np.maximum``/``np.minimum`` return their second argument on equal values, so
  the order of ``0.0`` and ``-0.0`` decides the sign: SymPy's ``Max`` sorted it.
- ``np.fmax``/``np.fmin`` were traced as ``maximum``/``minimum``, which propagate
  NaN where fmax returns the other argument.
- IR identities applied to the user's own computation that are not exact in floats:
  ``c1 * (c2 * x)`` folded to ``(c1 c2) * x``, ``y * (1 / s)`` to ``y / s``,
  ``(p * T) * u`` reordered, and ``x + 0``, ``0 - x``, ``-(a - b)`` rewritten up to
  the sign of zero. They now apply only to derivative (relaxed) equations.
"""

from __future__ import annotations

import numpy as np
import pytest

from .adversarial_support import Builder, quiet_numpy, rows

VARIANTS: dict[str, dict[str, str]] = {
    "sympy": {"backend": "sympy"},
    "trace-scalar": {"backend": "trace", "emit": "scalar"},
    "trace-vector": {"backend": "trace", "emit": "vector"},
}

nan, inf = np.nan, np.inf
INPUTS = [
    np.array([nan, inf, -inf, 0.0]),
    np.array([-0.0, 0.9, 1e200, -1e200]),
    np.array([0.3, 7.0, 1e-300, 5e-324]),
    np.array([0.7, 1.1, 2.3, 1e308]),
    np.array([-0.7, 3.3, 1.9, 0.1]),
    np.array([0.0, -0.0, nan, 1.0]),
    np.array([-0.0, 0.0, 3.0, nan]),
    np.array([0.0, 0.0, -0.0, -0.0]),
]

CASES = {
    "ne_self": "np.where(x != x, -1.0, x)",
    "eq_self": "np.where(x == x, x, -1.0)",
    "not_gt": "np.where(~(x > 0), -1.0, x)",
    "logical_not_lt": "np.where(np.logical_not(x < 1), -1.0, x)",
    "not_ge_minus_inf": "np.where(~(x >= -np.inf), -1.0, x)",
    "div_constant": "x / 10.0",
    "div_constant_twice": "x / 10.0 + np.sin(x) / 10.0",
    "hypot": "np.hypot(x, 2.0 * x)",
    "hypot_inf_nan": "np.hypot(x, np.where(x > 0, np.nan, x))",
    "log2": "np.log2(x)",
    "log10": "np.log10(x)",
    "exp2": "np.exp2(x)",
    "maximum_zeros": "np.maximum(x, -x)",
    "minimum_zeros": "np.minimum(-x, x)",
    "fmax": "np.fmax(x, x[::-1])",
    "fmin": "np.fmin(x, x[::-1])",
    "constant_product": "0.1 * (3.0 * x)",
    "times_reciprocal": "x * (1.0 / x[0])",
    "small_factors": "(x[0] * x) * x[1]",
    "negated_difference": "-(x - x[::-1])",
    "zero_minus": "0.0 - x",
    "plus_zero": "x + 0.0",
    "zero_plus": "0.0 + x",
}
SOURCE = "import numpy as np\n" + "".join(
    f"\n\ndef {name}(x):\n    return {body}\n" for name, body in CASES.items()
)
MATRIX = [(name, variant) for name in CASES for variant in VARIANTS]


def assert_bitwise(got: object, expected: object, what: str) -> None:
    """Same values, NaN where NumPy has NaN, and the same sign of every zero."""
    got_array = np.asarray(got, dtype=np.float64)
    expected_array = np.asarray(expected, dtype=np.float64)
    assert got_array.shape == expected_array.shape, what
    np.testing.assert_array_equal(got_array, expected_array, err_msg=what)
    np.testing.assert_array_equal(
        np.signbit(got_array), np.signbit(expected_array), err_msg=f"{what}: sign"
    )


@pytest.mark.parametrize(
    ("name", "variant"), rows(MATRIX, id_of=lambda row: "-".join(row))
)
def test_value_is_numpy_bitwise(build: Builder, name: str, variant: str) -> None:
    """f and value_and_jacobian's value are NumPy's own floats."""
    built = build(SOURCE, name, (4,), ("value_and_jacobian",), **VARIANTS[variant])
    with quiet_numpy():
        for x in INPUTS:
            expected = built.call_reference(x)
            assert_bitwise(built.module.f(x.copy()), expected, f"f({x})")
            value = built.module.value_and_jacobian(x.copy())[0]
            assert_bitwise(value, expected, f"value_and_jacobian({x})[0]")


DERIVATIVES = {  # of the CASES of the same name
    "hypot": lambda x: np.sqrt(5.0) * np.sign(x),
    "log2": lambda x: 1.0 / (x * np.log(2.0)),
    "log10": lambda x: 1.0 / (x * np.log(10.0)),
    "exp2": lambda x: np.exp2(x) * np.log(2.0),
}
DERIVATIVE_MATRIX = [(name, variant) for name in DERIVATIVES for variant in VARIANTS]


@pytest.mark.parametrize(
    ("name", "variant"), rows(DERIVATIVE_MATRIX, id_of=lambda row: "-".join(row))
)
def test_new_primitive_derivatives(build: Builder, name: str, variant: str) -> None:
    """The Jacobian of log2/log10/exp2/hypot is the analytic one (diagonal), and
    hypot's is 0 where hypot(x, 2x) = 0, on every backend alike."""
    built = build(SOURCE, name, (4,), ("value_and_jacobian",), **VARIANTS[variant])
    deriv = DERIVATIVES[name]
    x = np.array([0.3, 1.7, 12.0, 0.02])
    jacobian = built.module.value_and_jacobian(x.copy())[1]
    np.testing.assert_allclose(jacobian, np.diag(deriv(x)), rtol=1e-14, atol=0)
    if name == "hypot":
        zero = np.array([0.0, -0.0, 1.0, 0.0])
        with quiet_numpy():  # scalar code may compute the unselected x / 0
            at_zero = built.module.value_and_jacobian(zero)[1]
        expected = np.diag([0.0, 0.0, np.sqrt(5.0), 0.0])
        np.testing.assert_allclose(at_zero, expected, rtol=1e-14, atol=0)
