"""A rerolled loop computing with its integer counter, in C (issue 21, item 5):
``i * dt``, ``i % 3``, ``(i - 40) // 7`` of negative values, a negative step and
the counter as an index (``x[i % 3]``, ``x[i - 1]``, read unchecked where the build
proves it in bounds). Each case is built with ``emit = "c"`` in both modes,
its loop kept a loop, and checked against the module's own Python operators (the
vector emission, a Python loop computing in int64), the vector module of the same
function unrolled and central differences, at ordinary points and at NaN and
infinite inputs; every operator is compiled (no fallback note) and its C runs the
loop itself."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import c_counter_functions as cases
import difgen
from compiled import BuiltConfig
from conftest import SUPPORT, import_file
from difgen.frontend.control import helpers
from difgen.targets.c import counters

OPS = {
    "forward": ["f", "gradient", "jacobian", "hessian", "hvp"],
    "reverse": ["f", "gradient", "jacobian"],
}
SOURCE = "c_counter_functions.py"


def _config(emit: str) -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (shape, _) in cases.CASES.items():
        for mode, ops in OPS.items():
            quoted = ", ".join(f'"{op}"' for op in ops)
            suffix = "_c" if emit == "c" else ""
            parts.append(
                f'[[module]]\nname = "{name}_{mode}{suffix}"\n'
                f'function = "{SOURCE}:{name}"\nbackend = "trace"\n'
                f'emit = "{emit}"\nmode = "{mode}"\noperators = [{quoted}]\n'
                f"input = {{ shape = {shape} }}\n"
            )
    return "\n".join(parts)


def _build(directory: Path, emit: str, looped: bool) -> BuiltConfig:
    shutil.copy(SUPPORT / SOURCE, directory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)  # small loops stay loops
        if not looped:
            patch.setattr(helpers, "LOOP_MIN_TRIPS", 10**9)
        return BuiltConfig(directory, _config(emit))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("c_counters"), "c", True)


@pytest.fixture(scope="module")
def unrolled(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("c_counters_unrolled"), "vector", False)


def _fallback(built: BuiltConfig, name: str) -> Any:
    """The compiled module's own Python operators (the vector emission)."""
    lone = built.directory / "python" / name
    if not lone.exists():
        lone.mkdir(parents=True)
        shutil.copy(built.directory / "out" / f"{name}.py", lone)
    with pytest.warns(RuntimeWarning):
        module = import_file(lone / f"{name}.py")
    assert not module.COMPILED
    return module


def _points(name: str) -> list[np.ndarray]:
    shape, points = cases.CASES[name]
    n = shape[0]
    odd = [np.full(n, np.nan), np.array([np.inf] + [0.5] * (n - 1))]
    odd.append(np.array([0.5] * (n - 1) + [-np.inf]))
    return [*points, *odd]


def _close(a: Any, b: Any) -> None:
    """Equal to a relative 1e-12 of the result's scale, NaN and inf where the
    other has them (the C library's sin may differ from NumPy's in the last bit)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
    np.testing.assert_array_equal(a[np.isinf(a)], b[np.isinf(b)])
    finite = np.isfinite(a)
    scale = max(float(np.max(np.abs(b[finite]), initial=0.0)), 1e-300)
    np.testing.assert_allclose(a[finite], b[finite], rtol=1e-12, atol=1e-12 * scale)


def _calls(module: Any, x: np.ndarray) -> dict[str, Any]:
    dx = np.linspace(-0.7, 0.9, x.size)
    return {
        op: getattr(module, op)(*((x, dx) if op == "hvp" else (x,)))
        for op in module.__all__
    }


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_the_counters_loop_runs_in_c_and_equals_python_and_unrolled(
    compiled: BuiltConfig, unrolled: BuiltConfig, name: str, mode: str
) -> None:
    module = compiled.get(f"{name}_{mode}_c")
    assert module.COMPILED and not module.PYTHON_OPERATORS, module.PYTHON_OPERATORS
    text = (compiled.directory / "out" / f"{name}_{mode}_c__c.c").read_text()
    assert "for (;;)" in text  # the loop is a C loop, not unrolled
    python = _fallback(compiled, f"{name}_{mode}_c")
    flat = unrolled.get(f"{name}_{mode}")
    for x in _points(name):
        got = _calls(module, x)
        for op, value in _calls(python, x).items():
            _close(got[op], value)
        for op, value in _calls(flat, x).items():
            _close(got[op], value)


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_the_compiled_gradient_matches_finite_differences(
    compiled: BuiltConfig, name: str
) -> None:
    f = getattr(cases, name)
    h = 1e-6
    for mode in OPS:
        module = compiled.get(f"{name}_{mode}_c")
        for x in cases.CASES[name][1]:
            fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)]
            np.testing.assert_allclose(module.gradient(x), fd, rtol=1e-6, atol=1e-7)


def test_a_break_keeps_the_counters_integers_in_python(tmp_path: Path) -> None:
    """After a ``break`` the loop's ``i`` is a state of its own, unbounded for the
    build: the operator stays in Python (NumPy's int64) and the build says so."""
    shutil.copy(SUPPORT / SOURCE, tmp_path)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m_c"\n'
        f'function = "{SOURCE}:stopping"\nbackend = "trace"\nemit = "c"\n'
        'operators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)
        result = difgen.build(tmp_path / "difgen.toml", compile=False)
    (built,) = result.modules
    assert any(
        "gradient: kept in Python" in n and "to_int64" in n for n in built.notes
    ), built.notes


def test_an_integer_the_build_cannot_prove_exact_stays_in_python(
    tmp_path: Path,
) -> None:
    """``i * 10**15`` reaches 3.9e16 > 2**53: a double would round it, so the
    operator keeps NumPy's int64 and the build says why."""
    (tmp_path / "big.py").write_text(
        "import numpy as np\n\n\n"
        "def big(x):\n"
        "    s = x[0] * 1.0\n"
        "    for i in range(40):\n"
        "        s = s + 0.01 * np.sin(s) * ((i * 10**15) % 7)\n"
        "    return s * x[1]\n"
    )
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m_c"\n'
        'function = "big.py:big"\nbackend = "trace"\nemit = "c"\n'
        'operators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)
        result = difgen.build(tmp_path / "difgen.toml", compile=False)
    (built,) = result.modules
    assert any(
        "gradient: kept in Python" in n and "int_arith" in n for n in built.notes
    ), built.notes


def test_intervals_follow_pythons_integer_rules() -> None:
    """The intervals the rewrite proves hold the results NumPy's int64 gives, on
    negative operands too (``-7 // 2 == -4``, ``-7 % 3 == 2``, ``7 % -3 == -2``),
    and a divisor interval holding zero proves nothing."""
    rng = np.random.default_rng(5)
    for op, fn in (
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("mod", np.remainder),
        ("floordiv", np.floor_divide),
        ("maximum", np.maximum),
        ("minimum", np.minimum),
    ):
        for _ in range(200):
            a = np.sort(rng.integers(-50, 50, size=2)).astype(float)
            b = np.sort(rng.integers(-9, 9, size=2)).astype(float)
            iv = counters._combine(op, (a[0], a[1]), (b[0], b[1]))
            if op in ("mod", "floordiv") and b[0] <= 0 <= b[1]:
                assert iv is None
                continue
            assert iv is not None
            xs = np.arange(a[0], a[1] + 1).astype(np.int64)
            ys = np.arange(b[0], b[1] + 1).astype(np.int64)
            got = fn(xs[:, None], ys[None, :])
            assert iv[0] <= got.min() and got.max() <= iv[1], (op, a, b, iv)
    assert counters._combine("mul", (0.0, 2.0**40), (0.0, 2.0**14)) is None
    assert int(np.floor_divide(-7, 2)) == -4 and int(np.remainder(-7, 3)) == 2


def test_an_index_the_build_cannot_bound_stays_in_python(tmp_path: Path) -> None:
    """``x[i - 2 * (i // 2)]`` is 0 or 1 at every trip, but intervals bound it by
    [-40, 41] only: the C does not read an index it cannot prove in bounds (the
    check would raise inside the loop), and the operator stays in Python."""
    (tmp_path / "past.py").write_text(
        "import numpy as np\n\n\n"
        "def past(x):\n"
        "    s = x[0] * 1.0\n"
        "    for i in range(40):\n"
        "        s = s + 0.01 * np.sin(s) * x[i - 2 * (i // 2)]\n"
        "    return s * x[1]\n"
    )
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m_c"\n'
        'function = "past.py:past"\nbackend = "trace"\nemit = "c"\n'
        'operators = ["gradient"]\ninput = { shape = [3] }\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)
        result = difgen.build(tmp_path / "difgen.toml", compile=False)
    (built,) = result.modules
    assert any(
        "gradient: kept in Python" in n and "run-time index in a loop's body" in n
        for n in built.notes
    ), built.notes
