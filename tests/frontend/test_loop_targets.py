"""The target of a ``for`` loop with a ``break`` (issue 21, item 4): a target the
function never reads (``for _ in range(n)``) takes every item, so the loop passes
the counter through as its float and computes no int64 (the C loops then run it);
a target the function reads keeps Python's value, the item at the ``break``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import difgen.ad  # noqa: F401  (registers while_loop)
from difgen.core.ir import SubGraph, evaluate
from difgen.frontend import trace
from difgen.frontend.control import helpers


def _primitives(graph: Any) -> list[str]:
    names = []
    for eqn in graph.eqns:
        names.append(eqn.primitive.name)
        for value in eqn.params.as_dict().values():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, SubGraph):
                    names += _primitives(item.graph)
    return names


def unread(x: Any) -> Any:
    s = x[0] * 0.5
    for _ in range(60):
        if s > 3.0:
            break
        s = s + 0.1 * np.exp(-s) * x[1]
    return s * s


def read_after(x: Any) -> Any:
    s = x[0] * 0.5
    k = -1
    for k in range(60):  # noqa: B007  (read after the loop)
        if s > 3.0:
            break
        s = s + 0.1 * np.exp(-s) * x[1]
    return s * k


@pytest.fixture(autouse=True)
def _loops_whatever_their_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helpers, "UNROLL_EQUATIONS", 0)


POINTS = [np.array([0.4, 2.0]), np.array([5.0, 1.0]), np.array([0.2, 0.9])]


def test_an_unread_target_leaves_no_int64_in_the_loop() -> None:
    graph = trace(unread, [((2,), "float64")])
    names = _primitives(graph)
    assert "while_loop" in names and "to_int64" not in names
    for x in POINTS:
        np.testing.assert_allclose(evaluate(graph, [x])[0], unread(x), rtol=1e-15)


def test_a_target_read_after_the_loop_keeps_the_item_at_the_break() -> None:
    graph = trace(read_after, [((2,), "float64")])
    assert "while_loop" in _primitives(graph)
    for x in [*POINTS, np.array([2.0, 30.0])]:
        np.testing.assert_allclose(evaluate(graph, [x])[0], read_after(x), rtol=1e-15)
