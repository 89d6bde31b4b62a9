"""Every primitive prints as vectorized NumPy: its declaration's ``numpy`` field is a
form (an expression or statements assigning ``OUT``) or a :class:`Statements` value
whose statement the printer builds, and the claim is checked: each row of
tests/support/primitive_cases.py, traced and printed, runs and gives what the graph
evaluates to."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import scipy.special

import primitive_cases as cases
from difgen.ad.loops import SWEEP
from difgen.core.ir import Graph
from difgen.core.primitive import Primitive, Statements
from difgen.frontend import trace
from difgen.primitives import PRIMITIVES
from difgen.primitives.structural import basis_p
from difgen.targets.numpy.printer import STATEMENTS, print_graph
from difgen.targets.parts import Constants

DECLARED = {**PRIMITIVES, "sweep": SWEEP, "basis": basis_p}
"""Every declaration: the registry, and the two the AD layer makes unregistered."""


@functools.cache
def _graph(name: str) -> Graph:
    fn, shape = cases.ROWS[name]
    return trace(fn, [(shape, "float64")])


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_primitive_declares_a_numpy_form(name: str) -> None:
    prim: Primitive = DECLARED[name]
    if isinstance(prim.numpy, Statements):
        assert prim.numpy.statement in STATEMENTS, prim.numpy
    else:
        assert callable(prim.numpy), prim.numpy


def test_a_statement_form_the_printer_does_not_build_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown statement form"):
        Statements("match")


@pytest.mark.parametrize("name", sorted(cases.ROWS))
def test_every_row_prints_and_runs_as_numpy(name: str) -> None:
    """The printed statements, run with the module's constants, give the values
    the reference interpreter gives (each primitive's ``impl``)."""
    graph = _graph(name)
    assert name in {e.primitive.name for e in graph.eqns}, "the row lost its primitive"
    pool = Constants()
    code = print_graph(graph, ["x"], pool)
    x = np.random.default_rng(3).uniform(0.2, 0.8, cases.ROWS[name][1])
    source = [f"{constant} = {value}" for constant, value in pool.items]
    source += [*pool.setup, *code.lines, f"OUTPUTS = [{', '.join(code.outputs)}]"]
    space: dict[str, Any] = {"np": np, "scipy": scipy, "x": x}
    exec("\n".join(source), space)  # noqa: S102 (difgen's own printed code)
    got = space["OUTPUTS"]
    expected = graph.evaluate(x)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-13, atol=0)
