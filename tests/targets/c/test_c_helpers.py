"""The C runtime's versions of the helpers of ``difgen.floats``.

The scalar emission calls a helper wherever Python would raise or differ from
NumPy (``_logaddexp``, ``_remainder``, ``_floor``, ``_hypot``…). The C printer
prints the same calls, so the C runtime must define every one of them with NumPy's
semantics: a helper it lacks would make an extension that compiles (or not) and
never loads. Each is checked here against the module's Python fallback, bit for
bit, at a grid of special values (NaN, infinities, signed zeros, huge, tiny) and
at random points, for ``f`` and its gradient. ``np.log2``, ``np.log10`` and
``np.exp2`` are the exception: the fallback calls NumPy's own implementation and
the C code the C library's, which differ in the last bit on some floats.
"""

from __future__ import annotations

import itertools
import shutil
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import sympy as sp

import difgen
from conftest import import_file
from difgen.floats import HELPERS
from difgen.targets.c import extension as c_code

FUNCTIONS = """\
import numpy as np


def exact(x):
    a, b = x[0], x[1]
    return (
        np.logaddexp(a, b)
        + np.logaddexp2(b, a)
        + np.remainder(a, b)
        + np.fmod(b, a)
        + np.floor(a) * np.ceil(b)
        + np.trunc(a)
        - np.rint(b)
        + np.hypot(a, b)
        + np.sign(a) * np.maximum(a, b)
        - np.minimum(a, b)
        + np.sqrt(np.abs(a))
        + np.expm1(b)
        + np.arctanh(a / 4)
        + np.arccosh(np.abs(b) + 1)
        + a / b
        + np.power(np.abs(a), b)
    )


def last_bits(x):
    return np.exp2(x[0]) + np.log2(np.abs(x[1])) + np.log10(np.abs(x[0]))
"""

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -1.5]
SPECIAL += [1e300, -1e300, 1e-300, 5e-324]


def _module(name: str) -> str:
    return (
        f'[[module]]\nname = "{name}"\nfunction = "functions.py:{name}"\n'
        'backend = "sympy"\nemit = "c"\noperators = ["gradient"]\n'
        "input = { shape = [2] }\n"
    )


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    """Each function's module with its extension ("NAME") and alone ("NAME.py")."""
    root = tmp_path_factory.mktemp("c_helpers")
    (root / "functions.py").write_text(FUNCTIONS)
    text = '[difgen]\noutput_dir = "out"\n' + _module("exact") + _module("last_bits")
    (root / "difgen.toml").write_text(text)
    difgen.build(root / "difgen.toml", compile=True)
    out: dict[str, ModuleType] = {}
    for name in ("exact", "last_bits"):
        lone = root / "lone" / name
        lone.mkdir(parents=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[name] = import_file(root / "out" / f"{name}.py")
            out[f"{name}.py"] = import_file(
                Path(shutil.copy(root / "out" / f"{name}.py", lone))
            )
        assert out[name].COMPILED and not out[f"{name}.py"].COMPILED
    return out


def _points() -> list[np.ndarray]:
    grid = [np.array(p) for p in itertools.product(SPECIAL, repeat=2)]
    return grid + list(np.random.default_rng(0).uniform(-5.0, 5.0, (500, 2)))


def test_every_helper_is_defined_in_c() -> None:
    """Every helper the scalar emission may call has a C definition."""
    assert set(HELPERS) <= c_code.C_HELPERS


X, Y = sp.symbols("x y")


@pytest.mark.parametrize(
    "expr",
    [
        sp.KroneckerDelta(X, Y),  # Python's (1 if x == y else 0)
        sp.Lambda(X, X + 1),  # lambda
        sp.Mod(X, Y),  # Python's x % y on floats
        sp.nan,  # math.nan
        sp.oo,  # math.inf
        sp.I * X,  # 1j
        sp.erf(X),  # a math function C's table does not name
        sp.Tuple(X, Y),  # (x, y)
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_c_printer_refuses_what_only_python_spells(expr: sp.Basic) -> None:
    """A node printed by a method that writes Python (a conditional expression,
    ``lambda``, ``%``, ``math.nan``...) is refused before it is printed, never
    written into a C file."""
    with pytest.raises(c_code.Unsupported, match="no C form of"):
        c_code.c_expr(expr)


def test_the_c_printer_prints_c_forms() -> None:
    """What it does print is C: conditionals, booleans, relations, helpers."""
    expr = sp.Piecewise((sp.sin(X), sp.Or(sp.Eq(X, 0), Y < 1)), (X, True))
    assert c_code.c_expr(expr) == (
        "(((((x == 0.0)) || ((y < 1.0)))) ? (_sin(x)) : (x))"
    )
    expr = sp.Piecewise((X, sp.And(X > 0, sp.Not(Y < 1))), (Y, True))
    assert c_code.c_expr(expr) == "(((((y >= 1.0)) && ((x > 0.0)))) ? (x) : (y))"
    assert c_code.c_expr(sp.Heaviside(X) + sp.sqrt(X) * Y**2) == (
        "_sqrt(x)*(y * y) + ((x) > 0.0 ? 1.0 : (x) < 0.0 ? 0.0 : 0.5)"
    )


def test_helpers_match_the_fallback_bit_for_bit(modules: dict[str, ModuleType]) -> None:
    compiled, python = modules["exact"], modules["exact.py"]
    for x in _points():
        with np.errstate(all="ignore"):
            for op in ("f", "gradient"):
                got, expected = getattr(compiled, op)(x), getattr(python, op)(x)
                np.testing.assert_array_equal(got, expected, err_msg=f"{op}({x})")
                finite = ~np.isnan(got)
                assert np.array_equal(
                    np.signbit(got)[finite], np.signbit(expected)[finite]
                ), f"{op}({x}): the sign of a zero"


def test_log2_log10_exp2_differ_in_the_last_bits_only(
    modules: dict[str, ModuleType],
) -> None:
    compiled, python = modules["last_bits"], modules["last_bits.py"]
    for x in np.random.default_rng(1).uniform(-5.0, 5.0, (500, 2)):
        for op in ("f", "gradient"):
            np.testing.assert_allclose(
                getattr(compiled, op)(x), getattr(python, op)(x), rtol=4e-16 * 4
            )
