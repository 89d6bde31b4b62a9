"""The scalar emission's helpers (:mod:`difgen.targets.python.runtime`) as
functions: NumPy's value on every float, NaN, inf and signed zeros included, and
the text :mod:`difgen.floats` copies into generated modules is their source."""

from __future__ import annotations

import builtins
import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import difgen.primitives  # noqa: F401 (registers every declaration)
from difgen import floats
from difgen.core.primitive import scalar_helpers
from difgen.targets.python import runtime

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 1.5]
SPECIALS += [2.5, -2.5, 710.0, -745.5, 1e300, -1e300, 1e-300, 5e-324, -5e-324]


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """NumPy's fallbacks meet every invalid and overflowing float here."""
    with np.errstate(all="ignore"):
        yield


def _values() -> list[float]:
    rng = np.random.default_rng(19)
    drawn = np.concatenate([rng.normal(size=200) * 10.0, rng.uniform(-3, 3, 100)])
    return SPECIALS + [float(v) for v in drawn]


def _pairs() -> list[tuple[float, float]]:
    rng = np.random.default_rng(20)
    values = np.array(_values())
    drawn = [(float(a), float(b)) for a, b in rng.choice(values, (1500, 2))]
    return [(a, b) for a in SPECIALS for b in SPECIALS] + drawn


def _same(got: float, want: Any, ulps: int = 0) -> bool:
    """``got`` is NumPy's ``want``: NaN where NaN, the same infinity and sign of
    zero, and equal (or within ``ulps`` units in the last place)."""
    want = float(want)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if got == want:
        return math.copysign(1.0, got) == math.copysign(1.0, want)
    return math.isfinite(want) and abs(got - want) <= ulps * math.ulp(want)


HELPERS = scalar_helpers()
"""Each unary's scalar helper, by SymPy name, as its declaration gives it."""
FAST = {
    name: getattr(np, h.numpy.removeprefix("np."))
    for name, h in HELPERS.items()
    if h.family == "fast"
}
EXACT_UNARY: dict[str, Callable[..., Any]] = {
    **{
        name: getattr(np, h.numpy.removeprefix("np."))
        for name, h in HELPERS.items()
        if h.family == "numpy"
    },
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "rint": np.rint,
    "sign": np.sign,
}
BINARY: dict[str, Callable[..., Any]] = {
    "div": np.divide,
    "hypot": np.hypot,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "remainder": np.remainder,
    "fmod": np.fmod,
    "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2,
}


def _fn(name: str) -> Callable[..., float]:
    fn: Callable[..., float] = getattr(runtime, floats.helper(name))
    return fn


@pytest.mark.parametrize("name", sorted(FAST))
def test_math_fast_path_where_it_works_numpy_where_math_raises(name: str) -> None:
    """``math.<name>`` wherever it returns (libm: NumPy's own loop may differ in
    the last bit), and NumPy's exact value wherever ``math`` raises."""
    fast = getattr(math, HELPERS[name].fast.removeprefix("math."))
    for v in _values():
        got = _fn(name)(v)
        assert type(got) is float
        want = FAST[name](v)
        try:
            expected = fast(v)
        except (ValueError, OverflowError):
            assert _same(got, want), (name, v, got, want)
        else:
            assert got == expected or math.isnan(expected), (name, v)
            assert _same(got, want, ulps=1), (name, v, got, want)


@pytest.mark.parametrize("name", sorted(EXACT_UNARY))
def test_unary_is_numpys_bit_for_bit(name: str) -> None:
    for v in _values():
        got = _fn(name)(v)
        assert type(got) is float
        assert _same(got, EXACT_UNARY[name](v)), (name, v, got)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_is_numpys_bit_for_bit(name: str) -> None:
    for a, b in _pairs():
        got = _fn(name)(a, b)
        assert type(got) is float
        assert _same(got, BINARY[name](a, b)), (name, a, b, got)


def test_pow_is_numpys_power() -> None:
    """``math.pow`` where it returns, ``np.power`` where it raises (a negative
    base to a fractional power, zero to a negative one, overflow).

    Not compared: the exponent 0.5, where NumPy's ``power`` (2.4 here) is ``sqrt``
    (``np.power(-0.0, 0.5)`` is -0.0 and ``np.power(-inf, 0.5)`` NaN) but C's
    ``pow``, ``math.pow`` and this helper give 0.0 and inf: a known difference
    of ``_pow`` (in Python and in C alike), not of its fallback."""
    pairs = [*_pairs(), (-8.0, 1 / 3), (0.0, -1.0), (-0.0, -3.0), (1e200, 3.0)]
    for a, b in pairs:
        got = runtime._pow(a, b)
        assert type(got) is float
        if b != 0.5:
            assert _same(got, np.power(a, b), ulps=1), (a, b, got)


def test_constants() -> None:
    assert (math.inf, -math.inf) == (runtime._INF, runtime._NINF)
    assert math.isnan(runtime._NAN)
    for name, value in floats.CONSTANTS.items():
        assert floats.HELPERS[name] == f"{name} = {value}\n"


def test_generated_modules_get_the_functions_source() -> None:
    """The text copied into a generated module is the function's own source, in
    the module's order, and every helper the printers may name has one."""
    for name, text in floats.HELPERS.items():
        value = getattr(runtime, name)
        if callable(value):
            assert text == inspect.getsource(value), name
    families = [n for n, h in HELPERS.items() if h.family != "safe"]
    families += ["floor", "ceil", "trunc"]
    families += ["rint", "sign", *BINARY, "pow"]
    families += ["gammaln", "gamma", "expit", "xlogy", "xlog1py"]  # scipy.special's
    expected = {floats.helper(n) for n in families} | set(floats.CONSTANTS)
    assert set(floats.NAMES) == expected
    assert list(floats.NAMES) == [n for n in vars(runtime) if n in expected]


def test_copied_source_needs_only_math_numpy_and_builtins() -> None:
    """A helper's text runs in a namespace of ``math`` and ``np`` alone (what a
    generated module imports), as the module's own definition."""
    namespace: dict[str, Any] = {"math": math, "np": np}
    for text in floats.HELPERS.values():
        exec(text, namespace)  # noqa: S102 (difgen's own helper source)
    for name in floats.NAMES:
        value = getattr(runtime, name)
        if callable(value):
            code = value.__code__
            allowed = {"math", "np", *dir(builtins), *floats.NAMES}
            assert set(code.co_names) <= allowed | {
                a for n in ("math", "np") for a in dir(namespace[n])
            }, name
    assert math.isnan(namespace["_sin"](math.inf))
    assert namespace["_div"](1.0, -0.0) == -math.inf


def test_the_printer_reports_the_helpers_and_modules_it_printed() -> None:
    """What a generated module defines and imports is what its printer says it
    printed, not what a search of the printed text finds."""
    import sympy as sp

    from difgen.targets.python.printer import FloatPrinter

    x, y = sp.symbols("x_0 x_1", real=True)
    inf = sp.Symbol("_INF", real=True)
    printer = FloatPrinter()
    text = printer.doprint(sp.sin(x) * y + sp.Max(x, y, inf) + sp.log(y))
    assert printer.helpers == {"_sin", "_maximum", "_log", "_INF"}
    assert all(name in text for name in printer.helpers)
    assert not printer.module_imports
    other = FloatPrinter()
    other.doprint(sp.atan(x) + sp.sqrt(y) + sp.floor(x))
    assert "math" in other.module_imports
    assert other.helpers == {"_sqrt"}
    assert FloatPrinter().helpers == set()  # each printer reports its own
