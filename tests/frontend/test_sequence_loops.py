"""``for`` loops over static sequences that stay loops (issue 21, item 4).

A loop over a tuple or list of arrays or numbers, an array along its first axis
(a constant, or a traced array's rows), ``enumerate`` or ``zip`` of them, becomes
one ``while_loop`` on an index into the stacked items when the body traces once;
each case of ``sequence_loop_cases`` is built looped and unrolled (the threshold
raised out of reach), and every operator must equal the unrolled one's to 1e-12,
in both modes, at ordinary points and at NaN and infinite inputs. Items that cannot
be stacked, and a state that changes shape, keep the unrolling and say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sequence_loop_cases as cases
from conftest import SUPPORT, build_and_import, operators_source, write_config
from difgen import api
from difgen.core.ir import SubGraph, evaluate
from difgen.frontend import trace
from difgen.frontend.control import helpers

SOURCE = SUPPORT / "sequence_loop_cases.py"
_BUILT: dict[tuple[str, str, bool], tuple[Any, str]] = {}


def _primitives(graph: Any) -> list[str]:
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
        ops = ["gradient", "jacobian"]
        ops += ["hessian", "hvp"] if mode == "forward" else []
        cfg = write_config(
            tmp / f"seq_{name}_{mode}_{looped}",
            SOURCE,
            fn,
            shape,
            ops,
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
def test_each_sequence_loop_traces_to_a_loop(name: str) -> None:
    fn = cases.CASES[name][0]
    graph = _graph(name)
    assert "while_loop" in _primitives(graph)
    assert len(graph.eqns) < 40  # not the unrolled iterations
    with np.errstate(all="ignore"):
        for x in _points(name):
            _same(evaluate(graph, [x])[0], getattr(cases, fn)(x))


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_looped_sequences_equal_the_unrolled_ones(
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
    rng = np.random.default_rng(21)
    with np.errstate(all="ignore"):
        for x in _points(name):
            dx = rng.normal(size=shape)
            _same(looped.f(x), unrolled.f(x))
            _same(looped.gradient(x), unrolled.gradient(x))
            _same(looped.jacobian(x), unrolled.jacobian(x))
            if mode == "forward":
                _same(looped.hessian(x), unrolled.hessian(x))
                _same(looped.hvp(x, dx), unrolled.hvp(x, dx))


@pytest.mark.parametrize("name", sorted(cases.UNROLLED))
def test_a_sequence_loop_that_cannot_loop_unrolls_and_says_why(
    tmp_path: Path, name: str
) -> None:
    fn, shape, why = cases.UNROLLED[name]
    cfg = write_config(tmp_path, SOURCE, fn, shape, ["gradient"], backend="trace")
    (built,) = api.build(cfg).modules
    notes = [n for n in built.notes if "unrolled: " in n]
    assert len(notes) == 1, built.notes
    assert "sequence_loop_cases.py:" in notes[0] and why in notes[0], notes[0]
    module = build_and_import(cfg)[0]
    assert "while " not in operators_source(module)
    x, h = np.array([0.3, 0.8]), 1e-6
    f = getattr(cases, fn)
    fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(module.gradient(x), fd, rtol=1e-6, atol=1e-9)


def test_a_short_sequence_unrolls_as_before() -> None:
    def short(x: Any) -> Any:
        s = x[0] * 1.0
        for a in cases.RATES[:10]:
            s = s + np.sin(s) * a
        return s

    graph = trace(short, [((2,), "float64")])
    assert "while_loop" not in _primitives(graph)
