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
