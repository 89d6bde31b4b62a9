"""Elementwise NumPy surface: logaddexp(2), modulo, rounding, angles, real parts,
sinc, nan_to_num, Python's math and the builtins min/max/abs/pow/sum/round.

Each function: traced values equal NumPy's bit for bit and derivatives match the
oracle in both modes and to second order (scalar, vector and matrix inputs);
generated modules on both backends against JAX or central differences; and the
generated value on NaN, inf and signed zeros is NumPy's exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import surface_cases as cases
from difgen.errors import TraceError
from difgen.frontend import trace
from surface_harness import check_module, check_trace, check_values

SOURCE = "surface_cases.py"
ELEMENTWISE = [
    cases.e_logaddexp,
    cases.e_logaddexp_equal,
    cases.e_modulo,
    cases.e_rounding,
    cases.e_angles,
    cases.e_real,
    cases.e_sinc,
    cases.e_sinc_at_zero,
    cases.e_nan_to_num,
]
SHAPES = [(), (5,), (2, 3)]


def point(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn", ELEMENTWISE, ids=lambda f: f.__name__)
def test_traced_values_and_derivatives(fn: Any, shape: tuple[int, ...]) -> None:
    with np.errstate(all="ignore"):
        check_trace(fn, point(shape))


@pytest.mark.parametrize(
    "fn", [cases.e_math, cases.e_builtins], ids=lambda f: f.__name__
)
def test_math_and_builtins_on_traced_scalars(fn: Any) -> None:
    check_trace(fn, point((3,)))


MODULES = [
    # (function, oracle is JAX, backend, mode): each function on both backends,
    # and both trace modes among them (every module runs pushforward and pullback)
    (cases.e_logaddexp, True, "sympy", "auto"),
    (cases.e_logaddexp, True, "trace", "forward"),
    (cases.e_modulo, False, "sympy", "auto"),
    (cases.e_modulo, False, "trace", "reverse"),
    (cases.e_scalars, False, "sympy", "auto"),
    (cases.e_scalars, False, "trace", "reverse"),
]


@pytest.mark.parametrize(
    "fn, use_jax, backend, mode",
    MODULES,
    ids=[f"{m[0].__name__}-{m[2]}-{m[3]}" for m in MODULES],
)
def test_generated_modules(
    module_cache: Any, fn: Any, use_jax: bool, backend: str, mode: str
) -> None:
    x = point((3,) if fn is cases.e_scalars else (4,), 7)
    check_module(module_cache, SOURCE, fn, x, backend, mode, use_jax)


SPECIALS = [
    np.array([np.nan, 1.5, -np.inf, np.inf, 0.0, -0.0]),
    np.array([np.inf, np.inf, -np.inf, -np.inf, 2.0, -2.0]),
    np.array([-0.0, 0.0, 3.0, -3.0, np.nan, 0.5]),
    np.array([2.5, -2.5, 0.5, -0.5, 1e300, -1e-300]),
    np.array([7.0, -7.0, -0.3, 0.3, 1e-320, 2.0]),
]


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_values_at_nan_inf_and_signed_zeros(module_cache: Any, backend: str) -> None:
    check_values(module_cache, SOURCE, cases.e_values, SPECIALS, backend)


def test_round_with_decimals_is_numpys_value(module_cache: Any) -> None:
    """rint(x * 10**d) / 10**d, as NumPy computes it. Vector emission only: scalar
    code (both backends) lets cse turn a vector's divisions by one constant into
    products by its reciprocal (``x / 10.0`` becomes ``x * 0.1``, wrong in the last
    bit for 0.9): a defect of scalar emission for every division (reported), not
    of np.round."""
    check_values(
        module_cache, SOURCE, cases.e_round_decimals, SPECIALS, "trace", emit="vector"
    )


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_python_max_keeps_pythons_nan_order(module_cache: Any, backend: str) -> None:
    """max(a, b) is ``b if b > a else a``: NaN first wins, NaN second loses.

    (Of 0.0 and -0.0 Python returns the first; the generated code may return the
    other zero, since ``maximum`` is a commutative primitive in the IR and SymPy's
    Max sorts its arguments: the one inexactness, which np.maximum shares.)"""
    points = [np.array(p) for p in ([np.nan, 1.0], [1.0, np.nan], [2.0, 2.0])]
    points += [np.array([np.nan, np.nan]), np.array([-np.inf, 3.0])]
    check_values(module_cache, SOURCE, cases.e_max_nan, points, backend)


def test_scalar_helpers_are_numpys_functions() -> None:
    """The scalar-code helpers against the ufuncs, on many floats and specials."""
    from difgen import floats

    namespace: dict[str, Any] = {"math": math, "np": np}
    for name in (
        "_floor",
        "_ceil",
        "_trunc",
        "_rint",
        "_remainder",
        "_fmod",
        "_logaddexp",
        "_logaddexp2",
    ):
        source = floats.HELPERS[name]
        exec(source, namespace)  # noqa: S102 (difgen's own helper source)
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            rng.normal(size=300) * 10.0,
            rng.uniform(-3.0, 3.0, 300).round(1),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, 2.5, 1e300, 5e-324],
        ]
    )
    pairs = rng.choice(values, (2, 2000))
    with np.errstate(all="ignore"):
        for name, ufunc in (
            ("_floor", np.floor),
            ("_ceil", np.ceil),
            ("_trunc", np.trunc),
            ("_rint", np.rint),
        ):
            for v in values:
                assert np.array_equal(
                    namespace[name](float(v)), ufunc(v), equal_nan=True
                )
                assert math.copysign(1, namespace[name](float(v))) == math.copysign(
                    1, ufunc(v)
                ) or np.isnan(v)
        for name, ufunc in (
            ("_remainder", np.remainder),
            ("_fmod", np.fmod),
            ("_logaddexp", np.logaddexp),
            ("_logaddexp2", np.logaddexp2),
        ):
            for a, b in pairs.T:
                got, want = namespace[name](float(a), float(b)), ufunc(a, b)
                assert np.array_equal(got, want, equal_nan=True), (
                    name,
                    a,
                    b,
                    got,
                    want,
                )
                assert np.isnan(want) or math.copysign(1, got) == math.copysign(1, want)


def test_percent_with_a_traced_right_side_and_a_float_left() -> None:
    g = trace(lambda x: 1.0 % x + x % 0.7 + np.mod(2.0, x), [((3,), "float64")])
    x = np.array([0.3, -0.45, 2.0])
    np.testing.assert_array_equal(g.evaluate(x)[0], 1.0 % x + x % 0.7 + np.mod(2.0, x))


def _refuses(fn: Any, shape: tuple[int, ...], *words: str) -> None:
    with pytest.raises(TraceError) as info:
        trace(fn, [(shape, "float64")])
    message = str(info.value)
    assert "test_surface_elementwise.py:" in message
    for word in words:
        assert word in message, message


def test_refusals_name_the_line_and_the_construct() -> None:
    _refuses(lambda x: math.exp(x), (3,), "math.exp", "shape (3,)")
    _refuses(lambda x: math.erf(x), (), "math.erf")
    _refuses(lambda x: math.isnan(x), (), "math.isnan")
    _refuses(lambda x: math.fsum([x, x]), (), "math.fsum")
    _refuses(lambda x: max(x, key=abs), (3,), "key=")
    _refuses(lambda x: max(x, x[:2]), (3,), "max()", "np.maximum")
    _refuses(lambda x: np.round(x, out=x), (3,), "out=")
    _refuses(lambda x: np.sum(x, initial=1.0), (3,), "initial=")


def test_math_and_builtins_are_restored_after_tracing() -> None:
    """Globals see the real math and builtins again, exactly as before."""
    before = dict(cases.__dict__)
    trace(cases.e_math, [((3,), "float64")])
    trace(cases.e_builtins, [((3,), "float64")])
    assert cases.math is math
    assert "max" not in cases.__dict__ and "min" not in cases.__dict__
    assert dict(cases.__dict__) == before
