"""The adjoints of shifted slices, rolls, concatenations, pads and broadcasts in
C (``emit = "c"``, trace backend): a gather in the loop that computes the
gradient, the boundary elements peeled, the values read at two neighbours
computed again instead of stored (``targets/c/demand.py``'s
``RECOMPUTE_ELEMENTS``).

Each function's gradient and hvp (and a vector function's jacobian) are checked
against the module's NumPy operators (the same operations; NaN and inf where
they are), against central differences of the function, with NaN and inf
inputs, at n = 1, 2, 3, small and past ``RECOMPUTE_ELEMENTS``; the Rosenbrock
gradient's C is one loop over n with no full-size temporary, and its results are
the same bits as with every shared value kept in memory (as before the values
were computed again).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import c_shifted_functions as F
from compiled import BuiltConfig
from oracle import central_jacobian

SUPPORT = Path(__file__).resolve().parents[2] / "support"
LARGE = 5000  # past RECOMPUTE_ELEMENTS (4096): values read twice are recomputed

FUNCTIONS = {
    # function: sizes
    "rosenbrock": (1, 2, 3, 10, 257, LARGE),
    "stencil": (3, 4, 40, LARGE),
    "rolled": (1, 3, 40, LARGE),
    "concatenated": (2, 3, 40, LARGE),
    "padded": (1, 3, 40, LARGE),
    "broadcast": (1, 3, 40, LARGE),
}
JACOBIAN = {"residual": (2, 3, 40)}


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    modules = [(f, n, '["gradient", "hvp"]') for f, s in FUNCTIONS.items() for n in s]
    modules += [(f, n, '["jacobian"]') for f, s in JACOBIAN.items() for n in s]
    for function, n, ops in modules:
        parts.append(
            f'[[module]]\nname = "{function}_{n}_c"\n'
            f'function = "c_shifted_functions.py:{function}"\n'
            f'backend = "trace"\nemit = "c"\noperators = {ops}\n'
            f"input = {{ shape = [{n}] }}\n"
        )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("shifted_moves")
    shutil.copy(SUPPORT / "c_shifted_functions.py", directory)
    return BuiltConfig(directory, _config())


def _python(built: BuiltConfig, name: str) -> Any:
    """The module alone in a directory: its NumPy operators."""
    lone = built.directory / "python" / name
    if not lone.exists():
        lone.mkdir(parents=True)
        shutil.copy(built.directory / "out" / f"{name}.py", lone)
    from conftest import import_file

    with pytest.warns(RuntimeWarning):
        module = import_file(lone / f"{name}.py")
    assert not module.COMPILED
    return module


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal to rounding; NaN where NaN, inf (of the sign) where inf."""
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(
        np.isinf(got) * np.sign(got), np.isinf(expected) * np.sign(expected)
    )
    finite = np.isfinite(expected)
    scale = max(1.0, float(np.max(np.abs(expected[finite]), initial=0.0)))
    np.testing.assert_allclose(
        got[finite], expected[finite], rtol=0, atol=1e-12 * scale
    )


def _point(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.3, 1.4, n), rng.standard_normal(n)


CASES = [(f, n) for f, sizes in FUNCTIONS.items() for n in sizes]


@pytest.mark.parametrize(("function", "n"), CASES)
def test_gradient_and_hvp_equal_the_numpy_operators(
    built: BuiltConfig, function: str, n: int
) -> None:
    name = f"{function}_{n}_c"
    compiled, python = built.get(name), _python(built, name)
    x, v = _point(n)
    _same(compiled.gradient(x), python.gradient(x))
    _same(compiled.hvp(x, v), python.hvp(x, v))


@pytest.mark.parametrize(("function", "n"), [c for c in CASES if c[1] <= 257])
def test_gradient_and_hvp_against_central_differences(
    built: BuiltConfig, function: str, n: int
) -> None:
    module = built.get(f"{function}_{n}_c")
    fn = getattr(F, function)
    x, v = _point(n)
    numeric = np.reshape(central_jacobian(fn, x), (n,))
    np.testing.assert_allclose(module.gradient(x), numeric, rtol=1e-6, atol=1e-6)
    h = 1e-6
    along = (module.gradient(x + h * v) - module.gradient(x - h * v)) / (2 * h)
    np.testing.assert_allclose(module.hvp(x, v), along, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("function", "n"), [c for c in CASES if c[1] >= 3])
def test_nan_and_inf_where_the_numpy_operators_have_them(
    built: BuiltConfig, function: str, n: int
) -> None:
    name = f"{function}_{n}_c"
    compiled, python = built.get(name), _python(built, name)
    x, v = _point(n)
    x[0], x[n // 2], x[-1] = np.nan, np.inf, -np.inf
    v[1] = np.inf
    with np.errstate(all="ignore"):
        _same(compiled.gradient(x), python.gradient(x))
        _same(compiled.hvp(x, v), python.hvp(x, v))


@pytest.mark.parametrize("n", JACOBIAN["residual"])
def test_jacobian_of_shifted_slices(built: BuiltConfig, n: int) -> None:
    name = f"residual_{n}_c"
    compiled, python = built.get(name), _python(built, name)
    x, _ = _point(n)
    _same(compiled.jacobian(x), python.jacobian(x))
    numeric = central_jacobian(F.residual, x)
    np.testing.assert_allclose(compiled.jacobian(x), numeric, rtol=1e-6, atol=1e-6)
    x[1] = np.nan
    _same(compiled.jacobian(x), python.jacobian(x))


def _operator(source: str, op: str) -> str:
    start = source.index(f"dg_op_{op}(")
    return source[start : source.index("\n}\n", start)]


@pytest.mark.parametrize("op", ["gradient", "hvp"])
def test_rosenbrock_is_one_loop_without_temporaries(
    built: BuiltConfig, op: str
) -> None:
    """At n = 5000 the gradient (and the hvp) is one loop over the interior
    elements, the two boundary elements peeled before it, and no workspace:
    the adjoint of ``x[1:]`` and ``x[:-1]`` is a gather (``g[1 + i]`` reads the
    terms of ``i + 1`` and ``i``), and ``x[1:] - x[:-1]**2`` is computed at
    both reads instead of stored."""
    source = (built.directory / "out" / f"rosenbrock_{LARGE}_c__c.c").read_text()
    body = _operator(source, op)
    loops = re.findall(r"for \(npy_intp (\w+) = 0; \1 < (\d+); \1\+\+\)", body)
    assert loops == [("dg_i0", str(LARGE - 2))], loops
    assert "elements only, in 2 loops" in body
    assert "dg_stack" not in body and "malloc" not in body and "dg_w + " not in body
    assert "dg_r0[1 + dg_i0] = " in body  # each element stored once, no +=
    assert "+=" not in body


def test_the_same_bits_as_with_the_values_kept(
    built: BuiltConfig, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Computing a value again at its second read performs the same operations
    on the same operands: the results are bit for bit those of the build that
    keeps every value read twice in memory (the C of before), the moved terms
    added in the same order."""
    from difgen.targets.c import demand

    directory = tmp_path_factory.mktemp("shifted_moves_kept")
    shutil.copy(SUPPORT / "c_shifted_functions.py", directory)
    config = _config().split("\n[[module]]")
    chosen = [config[0]] + [
        c for c in config[1:] if re.search(rf'name = "\w+_{LARGE}_c"', c)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demand, "RECOMPUTE_ELEMENTS", 1 << 40)
        kept = BuiltConfig(directory, "\n[[module]]".join(chosen))
    source = (kept.directory / "out" / f"rosenbrock_{LARGE}_c__c.c").read_text()
    assert "dg_w + " in _operator(source, "gradient")  # the kept temporary
    x, v = _point(LARGE, seed=11)
    for function in FUNCTIONS:
        name = f"{function}_{LARGE}_c"
        now, before = built.get(name), kept.get(name)
        for got, expected in (
            (now.gradient(x), before.gradient(x)),
            (now.hvp(x, v), before.hvp(x, v)),
        ):
            np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("op", ["gradient", "hvp"])
def test_a_rolled_adjoint_is_read_in_the_loop_of_the_gradient(
    built: BuiltConfig, op: str
) -> None:
    """The gradient of ``x**2 * roll(x, 1) - 0.25 x roll(x, -2)**3`` is a sum of
    elementwise terms and rolls of terms: computed at its own elements, one loop
    over all of them that reads the rolled terms' operands where the rolls put
    them, and no workspace (before: the terms stored, then a second loop)."""
    source = (built.directory / "out" / f"rolled_{LARGE}_c__c.c").read_text()
    body = _operator(source, op)
    loops = re.findall(r"for \(npy_intp (\w+) = 0; \1 < (\d+); \1\+\+\)", body)
    assert loops == [("dg_i0", str(LARGE))], loops
    assert "elements only, in 1 loop" in body
    assert "dg_stack" not in body and "malloc" not in body and "dg_w + " not in body
