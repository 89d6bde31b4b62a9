"""Static ``for`` loops that stay loops (issue 21, item 4).

A ``for`` over a build-time ``range`` of at least ``LOOP_MIN_TRIPS`` items is
traced once, as a ``while_loop`` on a traced index (``for_``); each function of
``static_loop_cases`` is built twice, looped and unrolled (the threshold raised out
of reach), and every operator of the looped module must equal the unrolled one's,
in both modes, at ordinary points and at NaN and infinite inputs. Bodies that use
the index as a Python int keep the unrolling, and the build says so once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import static_loop_cases as cases
from conftest import (
    SUPPORT,
    build_and_import,
    import_file,
    operators_source,
    write_config,
)
from difgen import api
from difgen.core.ir import SubGraph, evaluate
from difgen.frontend import trace
from difgen.frontend.control import helpers

SOURCE = SUPPORT / "static_loop_cases.py"
SCALAR_OPS = ["gradient", "hessian", "hvp", "jacobian"]
REVERSE_OPS = ["gradient", "jacobian"]  # second order in reverse mode: below
ARRAY_OPS = ["jacobian", "pushforward", "pullback"]
_BUILT: dict[tuple[str, str, bool], tuple[Any, str]] = {}


def _primitives(graph: Any) -> list[str]:
    """The primitives of ``graph`` and of the sub-graphs of its loops and conds."""
    names = []
    for eqn in graph.eqns:
        names.append(eqn.primitive.name)
        for value in eqn.params.as_dict().values():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, SubGraph):
                    names += _primitives(item.graph)
    return names


@pytest.fixture(autouse=True)
def _loops_whatever_their_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases are small loops, which unroll by size (``UNROLL_EQUATIONS``): here
    they stay loops, to test the loop machinery on them."""
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 0)


def _graph(name: str) -> Any:
    fn, shape, _ = cases.CASES[name]
    return trace(getattr(cases, fn), [(tuple(shape), "float64")])


def _module(
    tmp: Path, name: str, mode: str, looped: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, str]:
    key = (name, mode, looped)
    if key not in _BUILT:
        fn, shape, _ = cases.CASES[name]
        scalar = _graph(name).outputs[0].shape == ()
        cfg = write_config(
            tmp / f"{name}_{mode}_{looped}",
            SOURCE,
            fn,
            shape,
            (SCALAR_OPS if mode == "forward" else REVERSE_OPS) if scalar else ARRAY_OPS,
            backend="trace",
            mode=mode,
        )
        with monkeypatch.context() as patch:
            if not looped:
                patch.setattr(helpers, "LOOP_MIN_TRIPS", 10**9)
            _BUILT[key] = build_and_import(cfg)
    return _BUILT[key]


def _points(name: str) -> list[np.ndarray]:
    _, shape, points = cases.CASES[name]
    odd = [np.full(shape, np.nan), np.array([np.inf] + [0.5] * (shape[0] - 1))]
    odd.append(np.array([-np.inf] * shape[0]))
    return [*points, *odd]


def _same(a: Any, b: Any) -> None:
    np.testing.assert_allclose(
        np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-300, equal_nan=True
    )


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_each_case_traces_to_a_loop(name: str) -> None:
    fn, _, points = cases.CASES[name]
    graph = _graph(name)
    assert "while_loop" in _primitives(graph)
    assert len(graph.eqns) < 40  # not the unrolled iterations
    for x in points:
        _same(evaluate(graph, [x])[0], getattr(cases, fn)(x))


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_looped_derivatives_equal_the_unrolled_ones(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    mode: str,
) -> None:
    tmp = tmp_path_factory.getbasetemp()
    looped, text = _module(tmp, name, mode, True, monkeypatch)
    unrolled, flat = _module(tmp, name, mode, False, monkeypatch)
    assert "while " in operators_source(looped) and len(text) < len(flat)
    shape = cases.CASES[name][1]
    scalar = _graph(name).outputs[0].shape == ()
    rng = np.random.default_rng(21)
    for x in _points(name):
        dx = rng.normal(size=shape)
        _same(looped.f(x), unrolled.f(x))
        _same(looped.jacobian(x), unrolled.jacobian(x))
        if scalar:
            _same(looped.gradient(x), unrolled.gradient(x))
        if scalar and mode == "forward":
            _same(looped.hessian(x), unrolled.hessian(x))
            _same(looped.hvp(x, dx), unrolled.hvp(x, dx))
        if not scalar:
            u = rng.normal(size=np.shape(unrolled.f(x)))
            _same(looped.pushforward(x, dx), unrolled.pushforward(x, dx))
            _same(looped.pullback(x, u), unrolled.pullback(x, u))


@pytest.mark.parametrize("name", ["euler", "branched", "breaking"])
def test_reverse_over_reverse_unrolls_the_loops_and_says_so(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """The adjoint of a loop is not transposed again: a reverse-mode hessian traces
    the function once more with its static loops unrolled."""
    fn, shape, _ = cases.CASES[name]
    cfg = write_config(
        tmp_path, SOURCE, fn, shape, ["hessian", "hvp"], backend="trace", mode="reverse"
    )
    (built,) = api.build(cfg).modules
    assert any("unrolled" in n for n in built.notes), built.notes
    mod = import_file(built.path)
    looped, _ = _module(
        tmp_path_factory.getbasetemp(), name, "forward", True, monkeypatch
    )
    rng = np.random.default_rng(5)
    for x in cases.CASES[name][2]:  # forward and reverse differ at NaN inputs
        np.testing.assert_allclose(
            mod.hessian(x), looped.hessian(x), rtol=1e-9, atol=1e-12, equal_nan=True
        )
        dx = rng.normal(size=shape)
        np.testing.assert_allclose(
            mod.hvp(x, dx), looped.hvp(x, dx), rtol=1e-9, atol=1e-12, equal_nan=True
        )


def _loop_groups(graph: Any, name: str, pick: str) -> int:
    """The distinct loops among ``graph``'s ``name`` equations (one per value)."""
    return len(
        {
            (e.inputs, tuple((k, v) for k, v in e.params if k != pick))
            for e in graph.eqns
            if e.primitive.name == name
        }
    )


@pytest.mark.parametrize(
    ("name", "slots"), [("euler", 2), ("decay", 2), ("written", 1), ("skipping", 1)]
)
def test_the_adjoint_of_a_loop_sweeps_its_tape_once(name: str, slots: int) -> None:
    """Every state slot read after a loop has its own ``while_loop`` equation; their
    transposes are one ``sweep``: one forward loop recording the tape, one backward
    loop carrying every slot's cotangent (not one sweep per slot)."""
    from difgen.ad.transpose import vjp

    graph = _graph(name)
    loops = _loop_groups(graph, "while_loop", "index")
    assert loops == 1
    assert sum(e.primitive.name == "while_loop" for e in graph.eqns) == slots
    adjoint = vjp(graph)
    assert _loop_groups(adjoint, "sweep", "out") == 1


def test_the_gradient_of_euler_matches_differences(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod, _ = _module(
        tmp_path_factory.getbasetemp(), "euler", "reverse", True, monkeypatch
    )
    x, h = np.array([4.0, 0.3]), 1e-6
    fd = [
        (cases.euler(x + h * e) - cases.euler(x - h * e)) / (2 * h) for e in np.eye(2)
    ]
    np.testing.assert_allclose(mod.gradient(x), fd, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(cases.UNROLLED))
def test_a_body_that_needs_a_python_index_stays_unrolled_and_says_so(
    tmp_path: Path, name: str
) -> None:
    fn, shape = cases.UNROLLED[name]
    cfg = write_config(tmp_path, SOURCE, fn, shape, ["gradient"], backend="trace")
    result = api.build(cfg)
    (built,) = result.modules
    notes = [n for n in built.notes if "stays unrolled" in n]
    assert len(notes) == 1, built.notes
    assert "static_loop_cases.py:" in notes[0] and "iterations" in notes[0]
    assert "while " not in operators_source(import_file(built.path))
    x = np.array([0.3, 0.8])
    h = 1e-6
    g = import_file(built.path).gradient(x)
    f = getattr(cases, fn)
    fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_a_short_loop_unrolls_as_before() -> None:
    graph = trace(cases.short, [((2,), "float64")])
    assert "while_loop" not in _primitives(graph)
    assert helpers.LOOP_MIN_TRIPS > 10


def test_a_loop_unrolls_while_its_unrolled_trace_is_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """By default a long loop stays a loop only when unrolling it would trace more
    than ``UNROLL_EQUATIONS`` equations: unrolled code is faster, and small."""
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 4096)
    fn, shape, _ = cases.CASES["euler"]
    small = trace(getattr(cases, fn), [(tuple(shape), "float64")])
    per_step = len(small.eqns)
    assert "while_loop" not in _primitives(small)  # its 40-odd steps unroll
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", max(per_step // 8, 1))
    looped = trace(getattr(cases, fn), [(tuple(shape), "float64")])
    assert "while_loop" in _primitives(looped) and len(looped.eqns) < per_step


def test_the_sympy_backend_unrolls_static_loops(tmp_path: Path) -> None:
    """SymPy has no loop form: a static loop unrolls into its expressions, as it
    always did (a ``while_loop`` on a traced condition would fall back to the graph,
    with a note)."""
    cfg = write_config(tmp_path, SOURCE, "linear", [2], ["gradient"], backend="sympy")
    (built,) = api.build(cfg).modules
    text = built.path.read_text()
    mod = import_file(built.path)
    assert "Backend sympy" in text and not built.notes
    assert "while " not in operators_source(mod)
    x = np.array([1.5, 0.3])
    a = 0.9**40
    np.testing.assert_allclose(
        mod.gradient(x), [2 * a * x[0] + (1 - a) * x[1], (1 - a) * x[0]], rtol=1e-12
    )


def test_a_trip_count_from_an_int_context_is_a_loop(tmp_path: Path) -> None:
    """``range(n)`` of an int64 context: one loop, whatever ``n`` is at run time
    (no iteration included), integer loop variables kept integers."""
    import shutil

    shutil.copy(SOURCE, tmp_path / SOURCE.name)
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "mod"\n'
        f'function = "{SOURCE.name}:counted"\noperators = ["jacobian", "pullback"]\n'
        'input = { shape = [3] }\nbackend = "trace"\n'
        'contexts = [{ name = "n", shape = [], dtype = "int64" }]\n'
    )
    mod, _ = build_and_import(tmp_path / "difgen.toml")
    assert "while " in operators_source(mod)
    x, h = np.array([0.3, 0.5, -0.2]), 1e-6
    for n in (0, 1, 5, 37):
        _same(mod.f(x, np.int64(n)), cases.counted(x, n))
        fd = np.stack(
            [
                (cases.counted(x + h * e, n) - cases.counted(x - h * e, n)) / (2 * h)
                for e in np.eye(3)
            ],
            axis=1,
        )
        np.testing.assert_allclose(mod.jacobian(x, np.int64(n)), fd, atol=1e-7)
        u = np.array([1.0, -2.0, 0.5])
        _same(mod.pullback(x, u, np.int64(n)), u @ mod.jacobian(x, np.int64(n)))
