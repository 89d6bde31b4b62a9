"""Issue 20, item 3: no input makes a build end in a traceback.

Every registered primitive (its row of ``primitive_cases.ROWS``) is composed with
the shapes that break symbolic differentiation and printing: a quotient under
``abs`` (``abs(x0 / x1)``'s second derivative is an unevaluated SymPy
``Derivative`` of ``sign``), ``np.maximum``, ``np.where`` on a run-time condition
and on a constant mask over a ``sqrt``, a quotient by a ``where`` (whose reverse
mode once raised in a transpose rule), and a scalar input divided by itself. Each
composition is built with every operator of the table that its shapes allow, on
both backends. A build either succeeds (its Python source compiles) or is one of
difgen's own refusals, a ``ConfigError`` or ``TraceError`` whose message names a
``file:line``; any other exception fails the case.

Pruning, to keep the grid near a minute on one core: each function is traced once
and both backends derive from that trace through the pipeline in-process (derive,
print; the template render, which does not depend on the function, runs on a sample
only); every primitive meets every composition, but the scalar-input composition
(the only one with ``derivative`` and ``second_derivative``) is built for the
elementwise rows alone, whose result shape does not depend on the input's; a
sample is rendered and its C compiled.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import primitive_cases as pc
from conftest import import_file, write_config
from difgen.config import ModuleSpec, load_config
from difgen.core.primitive import PRIMITIVES
from difgen.errors import ConfigError, TraceError
from difgen.operators import OPERATORS, REQUESTABLE
from difgen.pipeline import build_parts, generate_files, trace_spec

VECTOR_INPUT = ["pushforward", "pullback", "gradient", "jacobian", "hvp", "hessian"]
"""One operator per result kind (the value_and_* operators add the value, which
every module's ``f`` prints already)."""
SCALAR_INPUT = [*VECTOR_INPUT, "derivative", "second_derivative"]
assert {k for op in SCALAR_INPUT for k in OPERATORS[op].results} == {
    k for op in REQUESTABLE for k in OPERATORS[op].results
} - {"value"}


def _quotient_abs(p: Callable[..., Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        flat = np.ravel(x)
        return (
            np.sum(np.abs(p(x) / flat[1])) + np.abs(flat[0] / flat[1]) + flat[-1] ** 2
        )

    return f


def _maximum(p: Callable[..., Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        flat = np.ravel(x)
        return np.sum(np.maximum(p(x), 0.5) / (1.0 + np.abs(flat[0] - flat[-1])))

    return f


def _where(p: Callable[..., Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = p(x)
        return np.sum(np.where(y > 0.5, np.sqrt(y), np.abs(y) / np.ravel(x)[0]))

    return f


def _masked(p: Callable[..., Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = p(x) - 0.5
        keep = (np.arange(np.size(y)) % 2 == 0).reshape(np.shape(y))
        return np.sum(np.where(keep, np.sqrt(np.abs(y)), 0.0) / np.ravel(x)[0])

    return f


def _over_where(p: Callable[..., Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        y = p(x)
        return np.sum(np.ravel(x)[0] / np.where(y > 0.5, y, 0.0))

    return f


def _scalar(p: Callable[..., Any], shape: tuple[int, ...]) -> Callable[..., Any]:
    ramp = np.linspace(0.3, 0.7, int(np.prod(shape))).reshape(shape)

    def f(t: Any) -> Any:
        return np.sum(np.abs(p(t * ramp) / t))

    return f


COMPOSITIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "quotient_abs": _quotient_abs,
    "maximum": _maximum,
    "where": _where,
    "masked": _masked,
    "over_where": _over_where,
}

FILE_LINE = re.compile(r"[\w./-]+\.(toml|py):\d+")


@pytest.fixture(scope="module")
def base_spec(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., ModuleSpec]:
    """A module spec of the given input shape and operators (the function comes
    from the grid, not from the config's file)."""
    directory = tmp_path_factory.mktemp("grid")
    source = directory / "src" / "grid.py"
    source.parent.mkdir()
    source.write_text("def f(x):\n    return x\n")
    cache: dict[Any, ModuleSpec] = {}

    def get(shape: tuple[int, ...], operators: list[str]) -> ModuleSpec:
        key = (shape, tuple(operators))
        if key not in cache:
            where = directory / f"cfg{len(cache)}"
            cfg = write_config(where, source, "f", shape, operators, backend="trace")
            (cache[key],) = load_config(cfg).modules
        return cache[key]

    return get


def _refusal(exc: Exception) -> bool:
    """difgen's own refusal: a ConfigError or TraceError naming a file:line."""
    return isinstance(exc, (ConfigError, TraceError)) and bool(
        FILE_LINE.search(str(exc))
    )


def _build_both(spec: ModuleSpec, fn: Callable[..., Any]) -> list[str]:
    """Trace once, derive and print on both backends; the outcomes, for messages."""
    outcomes = []
    try:
        graph = trace_spec(spec, fn)
    except Exception as exc:  # noqa: BLE001 (the point: which exception it is)
        assert _refusal(exc), f"tracing raised {type(exc).__name__}: {exc}"
        return [f"refused at trace: {exc}"]
    for backend in ("sympy", "trace"):
        try:
            build_parts(dataclasses.replace(spec, backend=backend), graph)
        except Exception as exc:  # noqa: BLE001
            assert _refusal(exc), f"{backend}: {type(exc).__name__}: {exc}"
            outcomes.append(f"{backend}: refused: {exc}")
        else:
            outcomes.append(f"{backend}: built")
    return outcomes


ROWS = sorted(pc.ROWS)


def test_every_primitive_has_a_row() -> None:
    """The grid reaches every registered primitive (through its row function)."""
    assert set(PRIMITIVES) <= set(pc.ROWS) | {"basis"}, set(PRIMITIVES) - set(pc.ROWS)


SINGULAR = [
    "abs", "arccos", "arcsin", "cbrt", "div", "hypot", "log", "maximum", "pow",
    "sign", "sqrt", "where",
]  # fmt: skip
"""Rows whose derivative has a kink, a pole or an unbounded slope: every
composition. The other rows take one composition each, in turn."""
GRID = [
    (row, composition)
    for i, row in enumerate(ROWS)
    for j, composition in enumerate(sorted(COMPOSITIONS))
    if row in SINGULAR or i % len(COMPOSITIONS) == j
]


@pytest.mark.parametrize(("row", "composition"), GRID)
def test_no_traceback(
    base_spec: Callable[..., ModuleSpec], row: str, composition: str
) -> None:
    p, shape = pc.ROWS[row]
    spec = base_spec(tuple(shape), VECTOR_INPUT)
    _build_both(spec, COMPOSITIONS[composition](p))


def test_every_primitive_is_in_the_grid() -> None:
    assert {row for row, _ in GRID} == set(ROWS)
    assert {c for _, c in GRID} == set(COMPOSITIONS)


@pytest.mark.parametrize("row", SINGULAR)
def test_no_traceback_scalar_input(
    base_spec: Callable[..., ModuleSpec], row: str
) -> None:
    p, shape = pc.ROWS[row]
    _build_both(base_spec((), SCALAR_INPUT), _scalar(p, tuple(shape)))


def test_issue_example_falls_back_or_differentiates(
    base_spec: Callable[..., ModuleSpec], tmp_path: Path
) -> None:
    """The issue's ``abs(x0 / x1) + x2**2``: hessian and hvp exact on sympy."""
    source = tmp_path / "issue.py"
    source.write_text(
        "import numpy as np\n\n\ndef f(x):\n    return abs(x[0] / x[1]) + x[2] ** 2\n"
    )
    ops = ["gradient", "hessian", "hvp"]
    cfg = write_config(tmp_path / "p", source, "f", (3,), ops, backend="sympy")
    config = load_config(cfg)
    (spec,) = config.modules
    from difgen.load import load_function

    files = generate_files(spec, config, load_function(spec))
    out = tmp_path / "mod.py"
    out.write_text(files[0][1])
    mod = import_file(out)
    x = np.array([0.3, -0.8, 1.7])
    a, b = x[0], x[1]
    s = np.sign(a / b)
    grad = np.array([s / b, -s * a / b**2, 2 * x[2]])
    hess = np.array(
        [[0.0, -s / b**2, 0.0], [-s / b**2, 2 * s * a / b**3, 0.0], [0.0, 0.0, 2.0]]
    )
    np.testing.assert_allclose(mod.gradient(x), grad, rtol=1e-14)
    np.testing.assert_allclose(mod.hessian(x), hess, rtol=1e-14)
    v = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(mod.hvp(x, v), hess @ v, rtol=1e-14)


SAMPLE = [("div", "quotient_abs"), ("sqrt", "masked"), ("abs", "maximum")]


@pytest.mark.parametrize(("row", "composition"), SAMPLE)
def test_sample_renders_and_compiles(
    base_spec: Callable[..., ModuleSpec], tmp_path: Path, row: str, composition: str
) -> None:
    """A sample rendered in full with ``emit = "c"`` on both backends, its Python
    imported and its C compiled: the compiled operators give the Python ones."""
    from difgen.targets.c import compiling

    p, shape = pc.ROWS[row]
    fn = COMPOSITIONS[composition](p)
    spec = base_spec(tuple(shape), ["gradient", "hessian"])
    config = load_config(spec.config_path)
    x = np.random.default_rng(0).uniform(0.2, 0.8, size=shape)
    for backend in ("sympy", "trace"):
        name = f"{row}_{composition}_{backend}"
        variant = dataclasses.replace(spec, backend=backend, emit="c", name=name)
        for suffix, text in generate_files(variant, config, fn):
            (tmp_path / f"{name}{suffix}").write_text(text)
        python = import_file(tmp_path / f"{name}.py")
        assert not python.COMPILED
        compiling.compile_module(tmp_path, name)
        compiled = import_file(tmp_path / f"{name}.py")
        assert compiled.COMPILED, compiled.C_FALLBACK_REASON
        for op in ("gradient", "hessian"):
            np.testing.assert_allclose(
                getattr(compiled, op)(x), getattr(python, op)(x), rtol=1e-12
            )
