"""Loops and branches in C (issue 21, item 5): ``emit = "c"`` on graphs with
``while_loop``, ``sweep`` and ``cond`` runs the whole operator in C.

The cases of ``static_loop_cases`` are built with ``emit = "c"`` in both modes (the
loops kept loops whatever their size), compiled, and checked against the Python
fallback of the same module (the vector emission, whose loops are Python loops)
and against the vector module of the same function unrolled (no loop at all), at
ordinary points and at NaN and infinite inputs: f, gradient, jacobian, hessian and
hvp (forward mode; reverse over reverse unrolls), pushforward and pullback.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import static_loop_cases as cases
from compiled import BuiltConfig
from conftest import SUPPORT
from difgen.frontend.control import helpers

SCALAR_OPS = {
    "forward": ["f", "gradient", "jacobian", "hessian", "hvp"],
    "reverse": ["f", "gradient", "jacobian"],
}
ARRAY_OPS = ["f", "jacobian", "pushforward", "pullback"]
ARRAYS = {"decay", "written"}  # the cases with an array result
NAMES = ["branched", "breaking", "decay", "euler", "skipping", "written"]
"""The cases whose loops run in C (``breaking``: a ``break`` on a traced value, its
``for _`` target passed through as the float counter; ``skipping``: a
``continue`` on ``i % 3``, and ``decay``, ``y[i % 3]`` of its state: the
counter's integers computed as doubles, the index proved in bounds,
:mod:`difgen.targets.c.counters`)."""


def _config(emit: str) -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name in NAMES:
        fn, shape, _ = cases.CASES[name]
        for mode in ("forward", "reverse"):
            ops = ARRAY_OPS if name in ARRAYS else SCALAR_OPS[mode]
            quoted = ", ".join(f'"{op}"' for op in ops)
            suffix = "_c" if emit == "c" else ""
            parts.append(
                f'[[module]]\nname = "{name}_{mode}{suffix}"\n'
                f'function = "static_loop_cases.py:{fn}"\nbackend = "trace"\n'
                f'emit = "{emit}"\nmode = "{mode}"\noperators = [{quoted}]\n'
                f"input = {{ shape = {shape} }}\n"
            )
    return "\n".join(parts)


def _build(directory: Path, emit: str, looped: bool) -> BuiltConfig:
    shutil.copy(SUPPORT / "static_loop_cases.py", directory)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)  # small loops stay loops
        if not looped:
            patch.setattr(helpers, "LOOP_MIN_TRIPS", 10**9)
        return BuiltConfig(directory, _config(emit))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("c_statements"), "c", True)


@pytest.fixture(scope="module")
def unrolled(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    return _build(tmp_path_factory.mktemp("c_statements_unrolled"), "vector", False)


def _fallback(built: BuiltConfig, name: str) -> Any:
    """The compiled module's own Python operators (the vector emission)."""
    from conftest import import_file

    lone = built.directory / "python" / name
    if not lone.exists():
        lone.mkdir(parents=True)
        shutil.copy(built.directory / "out" / f"{name}.py", lone)
    with pytest.warns(RuntimeWarning):
        module = import_file(lone / f"{name}.py")
    assert not module.COMPILED
    return module


def _points(name: str) -> list[np.ndarray]:
    _, shape, points = cases.CASES[name]
    odd = [np.full(shape, np.nan), np.array([np.inf] + [0.5] * (shape[0] - 1))]
    odd.append(np.array([-np.inf] * shape[0]))
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


def _calls(module: Any, name: str, x: np.ndarray) -> dict[str, Any]:
    rng = np.random.default_rng(21)
    shape = cases.CASES[name][1]
    dx = rng.normal(size=shape)
    got: dict[str, Any] = {}
    for op in module.__all__:
        if op in ("hvp", "pushforward"):
            got[op] = getattr(module, op)(x, dx)
        elif op == "pullback":
            u = rng.normal(size=np.shape(module.f(x)))
            got[op] = module.pullback(x, u)
        else:
            got[op] = getattr(module, op)(x)
    return got


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", NAMES)
def test_loops_in_c_equal_the_python_loops_and_the_unrolled_code(
    compiled: BuiltConfig, unrolled: BuiltConfig, name: str, mode: str
) -> None:
    module = compiled.get(f"{name}_{mode}_c")
    assert module.COMPILED and not module.PYTHON_OPERATORS, module.PYTHON_OPERATORS
    python = _fallback(compiled, f"{name}_{mode}_c")
    flat = unrolled.get(f"{name}_{mode}")
    for x in _points(name):
        got = _calls(module, name, x)
        for op, value in _calls(python, name, x).items():
            _close(got[op], value)
        for op, value in _calls(flat, name, x).items():
            _close(got[op], value)


def _c_function(built: BuiltConfig, module: str, op: str) -> str:
    source = (built.directory / "out" / f"{module}__c.c").read_text()
    start = source.index(f"dg_op_{op}(")
    return source[start : source.index("\n}\n", start)]


def test_the_adjoint_runs_one_tape_in_c(compiled: BuiltConfig) -> None:
    """The reverse-mode gradient of the Euler loop: the primal loop records the
    tape of the sweep (its forward loop is the primal loop on three of its four
    slots), which runs its backward loop only: one forward pass, one tape, one
    backward pass, no allocation. Where no primal loop is computed (the pullback
    of ``written``: its cotangent does not read the loop's result) the sweep runs
    its own forward loop into a tape of the size the build counted."""
    body = _c_function(compiled, "euler_reverse_c", "gradient")
    assert body.count("for (;;)") == 1 and body.count("the tape backwards") == 1
    assert body.count("59 trips counted at build time: recorded by this loop") == 1
    assert "alloc(" not in body
    other = _c_function(compiled, "written_reverse_c", "pullback")
    assert "/* while_loop at " not in other
    assert other.count("59 trips counted at build time: the tape pre-sized") == 1
    assert other.count("for (;;)") == 1 and other.count("the tape backwards") == 1


def test_long_tapes_pre_sized_and_grown_match(tmp_path: Path) -> None:
    """10^4 steps of a static ``range`` (the tape allocated once, to the trip
    count the build counted) and a ``while`` on a traced condition running some
    25,000 times (the tape doubled from 64 records, many times): the gradients equal
    the vector emission's, NaN included."""
    (tmp_path / "long.py").write_text(
        "import numpy as np\n\n\n"
        "def euler(p):\n"
        "    pos, vel = 1.0, 0.0\n"
        "    for _ in range(10000):\n"
        "        acc = -p[0] * pos - p[1] * vel + 0.5 * np.sin(pos)\n"
        "        pos, vel = pos + 0.001 * vel, vel + 0.001 * acc\n"
        "    return pos**2 + vel**2\n\n\n"
        "def climb(p):\n"
        "    s = p[0] * 1.0\n"
        "    while s < 50.0:\n"
        "        s = s + 0.001 * (1.0 + p[1] * p[1]) + 1e-6 * np.sin(s * p[0])\n"
        "    return s * p[1]\n"
    )
    parts = ['[difgen]\noutput_dir = "out"\n']
    for fn in ("euler", "climb"):
        for emit, suffix in (("c", "_c"), ("vector", "")):
            parts.append(
                f'[[module]]\nname = "{fn}{suffix}"\nfunction = "long.py:{fn}"\n'
                f'backend = "trace"\nemit = "{emit}"\noperators = ["gradient"]\n'
                "input = { shape = [2] }\n"
            )
    built = BuiltConfig(tmp_path, "\n".join(parts))
    text = (tmp_path / "out" / "euler_c__c.c").read_text()
    assert "9999 trips counted at build time: recorded by this loop" in text
    assert "trips counted" not in (tmp_path / "out" / "climb_c__c.c").read_text()
    points = [np.array([4.0, 0.3]), np.array([0.5, 1.0]), np.array([np.nan, 1.0])]
    for fn in ("euler", "climb"):
        module, vector = built.get(f"{fn}_c"), built.get(fn)
        assert "gradient" not in module.PYTHON_OPERATORS
        for x in points:
            _close(module.gradient(x), vector.gradient(x))


BODIES = {
    "sin_plus_x": "s = np.sin(s) * 0.5 + x",
    "plus_x": "s = s + x",
    "x_minus": "s = x - s * 0.25",
    "scalar_const": "s = s * 0.9 + x[0]",
    "two_uses": "s = x + s * 0.5 + x * 0.25",
}


@pytest.fixture(scope="module")
def whiles(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    """A ``while`` on a traced value per body, run 0, 1 or 7 times as ``x[1]``
    says: the sweep's array state, a constant whose cotangent is the carried one
    itself (``s = ... + x``), and an empty tape."""
    directory = tmp_path_factory.mktemp("c_whiles")
    source = ["import numpy as np\n"]
    parts = ['[difgen]\noutput_dir = "out"\n']
    for case, body in BODIES.items():
        source.append(
            f"\n\ndef {case}(x):\n    s = x\n    i = x[0] * 0.0\n"
            f"    while i < x[1]:\n        {body}\n        i = i + 1.0\n"
            "    return np.sum(s * s)\n"
        )
        parts.append(
            f'[[module]]\nname = "{case}_c"\nfunction = "whiles.py:{case}"\n'
            'backend = "trace"\nemit = "c"\noperators = ["gradient"]\n'
            "input = { shape = [3] }\n"
        )
    (directory / "whiles.py").write_text("".join(source))
    return BuiltConfig(directory, "\n".join(parts))


@pytest.mark.parametrize("case", sorted(BODIES))
def test_the_backward_loop_sums_each_iterations_cotangents(
    whiles: BuiltConfig, case: str
) -> None:
    module = whiles.get(f"{case}_c")
    assert "gradient" not in module.PYTHON_OPERATORS
    python = _fallback(whiles, f"{case}_c")
    from conftest import import_file

    f = getattr(import_file(whiles.directory / "whiles.py"), case)
    for trips in (-1.0, 0.5, 6.5):  # 0, 1 and 7 iterations
        x = np.array([0.3, trips, 1.1])
        _close(module.gradient(x), python.gradient(x))
        h = 1e-6
        fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(module.gradient(x), fd, rtol=1e-6, atol=1e-8)


def test_a_nested_loop_runs_in_c(tmp_path: Path) -> None:
    """A loop in a loop (neither reading its index): the inner loop is a
    statement of the outer loop's body, and its adjoint a sweep inside the outer
    sweep's backward body; gradient (reverse) and hessian (forward) in C equal
    the vector emission's, NaN included."""
    (tmp_path / "nest.py").write_text(
        "import numpy as np\n\n\n"
        "def nest(x):\n"
        "    s = x * 1.0\n"
        "    for _ in range(40):\n"
        "        t = s * 0.0\n"
        "        for _ in range(35):\n"
        "            t = t + 0.001 * np.sin(s + 0.01 * t)\n"
        "        s = s + t * x[0]\n"
        "    return np.sum(s * s)\n"
    )
    parts = ['[difgen]\noutput_dir = "out"\n']
    for mode, ops in (("reverse", '"gradient"'), ("forward", '"hessian", "hvp"')):
        for emit, suffix in (("c", "_c"), ("vector", "")):
            parts.append(
                f'[[module]]\nname = "{mode}{suffix}"\nfunction = "nest.py:nest"\n'
                f'backend = "trace"\nemit = "{emit}"\nmode = "{mode}"\n'
                f"operators = [{ops}]\ninput = {{ shape = [3] }}\n"
            )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(helpers, "UNROLL_EQUATIONS", 0)
        built = BuiltConfig(tmp_path, "\n".join(parts))
    text = (tmp_path / "out" / "reverse_c__c.c").read_text()
    assert text.count("/* sweep (a loop's adjoint) at ") >= 2  # outer and inner
    dx = np.array([0.3, -0.2, 0.5])
    for x in (np.array([0.7, 1.3, -0.4]), np.array([np.nan, 0.5, 0.5])):
        for mode in ("reverse", "forward"):
            module, vector = built.get(f"{mode}_c"), built.get(mode)
            assert module.PYTHON_OPERATORS == (), module.PYTHON_OPERATORS
            for op in module.__all__:
                args = (x, dx) if op == "hvp" else (x,)
                _close(getattr(module, op)(*args), getattr(vector, op)(*args))
