"""Vector code computes with NumPy's arithmetic also when an argument is one float.

A float argument given as a Python float (or int, or 0-d array) used to reach the
vector code as a Python float, whose arithmetic raises where NumPy's gives inf or
NaN: ``derivative(0.0)`` of ``1 / x`` raised ZeroDivisionError, ``f(1e308)`` of
``x ** 2`` OverflowError. The check now makes it an ``np.float64``, so every way of
passing the float gives the one-point answers NumPy gives (and the same as passing
``np.float64``, which worked).
"""

from __future__ import annotations

import warnings
from types import ModuleType

import numpy as np
import pytest

import difgen
from conftest import import_file

FUNCTIONS = """\
import numpy as np


def inverse(x):
    return 1.0 / x + x ** 2


def scaled(x, s):
    return np.sum(x / s) + s ** 2
"""

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "inverse"
function = "functions.py:inverse"
backend = "trace"
emit = "vector"
operators = ["derivative", "second_derivative", "value_and_derivative", "pushforward"]
input = {{ shape = [] }}
mode = "{mode}"

[[module]]
name = "scaled"
function = "functions.py:scaled"
backend = "trace"
emit = "vector"
operators = ["gradient", "hessian", "hvp"]
input = {{ shape = [3] }}
contexts = [{{ name = "s", shape = [] }}]
mode = "{mode}"
"""


@pytest.fixture(scope="module", params=["forward", "reverse"])
def modules(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ModuleType]:
    root = tmp_path_factory.mktemp(f"floats-{request.param}")
    (root / "functions.py").write_text(FUNCTIONS)
    (root / "difgen.toml").write_text(CONFIG.format(mode=request.param))
    difgen.build(root / "difgen.toml")
    return {
        name: import_file(root / "out" / f"{name}.py") for name in ("inverse", "scaled")
    }


def _same(got: object, expected: object) -> None:
    np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(expected))


@pytest.mark.parametrize("given", [0.0, 0, np.array(0.0), np.float64(0.0), -0.0])
def test_a_float_argument_at_a_pole_gives_numpys_inf(
    modules: dict[str, ModuleType], given: object
) -> None:
    m = modules["inverse"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sign = np.copysign(1.0, float(np.asarray(given)))
        expected_d = -1.0 / np.float64(0.0) ** 2  # -inf, whatever the sign of zero
        _same(m.derivative(given), expected_d)
        _same(m.second_derivative(given), 2.0 / (np.float64(sign) * 0.0) ** 3 + 2.0)
        value, d = m.value_and_derivative(given)
        _same(value, 1.0 / np.float64(sign * 0.0))
        _same(d, expected_d)
        _same(m.pushforward(given, 1.0), expected_d)


@pytest.mark.parametrize("given", [1e308, np.array(1e308), np.float64(1e308)])
def test_a_huge_float_argument_overflows_to_inf(
    modules: dict[str, ModuleType], given: object
) -> None:
    m = modules["inverse"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(m.derivative(given), np.inf)
        value, _ = m.value_and_derivative(given)
        _same(value, np.inf)


@pytest.mark.parametrize("s", [0.0, 0, np.array(0.0)])
def test_a_float_context_at_zero_gives_numpys_values(
    modules: dict[str, ModuleType], s: object
) -> None:
    m = modules["scaled"]
    x = np.array([1.0, -2.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = m.gradient(x, np.float64(0.0))
        _same(m.gradient(x, s), expected)
        _same(m.hessian(x, s), m.hessian(x, np.float64(0.0)))
        _same(m.hvp(x, np.ones(3), s), m.hvp(x, np.ones(3), np.float64(0.0)))
    assert np.isinf(expected).all()


def test_a_float_argument_is_refused_as_before_when_it_is_no_number(
    modules: dict[str, ModuleType],
) -> None:
    with pytest.raises(TypeError, match="derivative: x"):
        modules["inverse"].derivative("1.0")
    with pytest.raises(TypeError, match="gradient: s"):
        modules["scaled"].gradient(np.ones(3), None)
